"""The hint in a decision on a compound command the allow rules allow only in part.

The hint names the parts no rule allows and the ``Bash(program:*)`` rules that would; it changes
only the message. Each hint given is checked here by adding the rules it names: the same call
must then be allowed by rules, so a hint never names a rule that would not help.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from baton.gates import Gatekeeper, Policy, ToolCall

HINT = re.compile(r"(?:the rule|the rules) ((?:Bash\([^)]*\)(?: and )?)+) would allow")


def decide(tmp_path: Path, command: str, *, mode: str = "default", allow: tuple[str, ...] = (), **rules: list[str]):
    gatekeeper = Gatekeeper(Policy.build(mode, allow=allow, **rules), tmp_path)
    return gatekeeper.decide(ToolCall("Bash", {"command": command}))


def hinted_rules(message: str) -> list[str]:
    found = HINT.search(message)
    return found[1].split(" and ") if found else []


@pytest.mark.parametrize(
    ("command", "allow", "rules", "parts"),
    [
        ("npm test | tail -5", ("Bash(npm test:*)",), ["Bash(tail:*)"], "`tail -5`"),
        ("npm test 2>&1 | tail -5", ("Bash(npm test:*)",), ["Bash(tail:*)"], "`tail -5`"),
        ("cd app && npm test 2>&1 | tail -5", ("Bash(npm test:*)", "Bash(cd:*)"), ["Bash(tail:*)"], "`tail -5`"),
        ("tail -5 log | grep x | wc -l", ("Bash(tail:*)",), ["Bash(grep:*)", "Bash(wc:*)"], "`grep x`, `wc -l`"),
        ("npm test; tail -1; tail -2", ("Bash(npm test:*)",), ["Bash(tail:*)"], "`tail -1`, `tail -2`"),
    ],
)
def test_the_hint_names_the_rules_that_would_allow_the_rest(
    tmp_path: Path, command: str, allow: tuple[str, ...], rules: list[str], parts: str
) -> None:
    decision = decide(tmp_path, command, allow=allow)
    assert (decision.behavior, decision.reason) == ("ask", "mode:default")  # the decision is unchanged
    assert decision.message.startswith("Bash needs a human's approval in default mode. ")
    assert f"but not {parts}:" in decision.message
    assert hinted_rules(decision.message) == rules
    # Sound: with the hinted rules added, the same call is allowed by rules.
    widened = decide(tmp_path, command, allow=(*allow, *rules))
    assert widened.behavior == "allow" and widened.reason.startswith("rule:")


def test_the_hint_also_comes_where_the_mode_would_deny_bash(tmp_path: Path) -> None:
    decision = decide(tmp_path, "npm test | tail -5", mode="acceptEdits", allow=("Bash(npm test:*)",))
    assert decision.reason == "mode:acceptEdits"
    assert hinted_rules(decision.message) == ["Bash(tail:*)"]


@pytest.mark.parametrize(
    ("command", "allow", "why"),
    [
        ("npm test | tail -5", (), "no part is allowed: every Bash call would be hinted"),
        ("ls | tail -5", ("Bash(npm test:*)",), "no part is allowed"),
        ("npm test", ("Bash(npm ci:*)",), "one command: nothing is allowed in part"),
        ("npm test | sh -c 'rm -rf /'", ("Bash(npm test:*)",), "Bash(sh:*) would allow every command"),
        ("npm test | xargs rm", ("Bash(npm test:*)",), "xargs runs the command it is given"),
        ("npm test && sudo make install", ("Bash(npm test:*)",), "sudo runs the command it is given"),
        ("npm test | tail -5 > out.txt", ("Bash(npm test:*)",), "writing a file needs a bare Bash"),
        ("npm test && FOO=1 make", ("Bash(npm test:*)",), "an assignment is not a program"),
        ("npm test | 'tail' -5", ("Bash(npm test:*)",), "a quoted program is not named by a plain rule"),
        ('npm test | "unterminated', ("Bash(npm test:*)",), "the command does not parse: no rule allows it"),
    ],
)
def test_no_hint_where_no_narrow_rule_would_help(
    tmp_path: Path, command: str, allow: tuple[str, ...], why: str
) -> None:
    decision = decide(tmp_path, command, allow=allow)
    assert decision.behavior == "ask"
    assert "Part of this command" not in decision.message, why


def test_no_hint_where_a_deny_ask_or_plan_decides(tmp_path: Path) -> None:
    allow = ("Bash(npm test:*)",)
    denied = decide(tmp_path, "npm test | rm -rf x", allow=allow, deny=["Bash(rm:*)"])
    assert denied.reason == "rule:Bash(rm:*)" and "Part of" not in denied.message
    asked = decide(tmp_path, "npm test | tail -5", allow=allow, ask=["Bash(tail:*)"])
    assert asked.reason == "rule:Bash(tail:*)" and "Part of" not in asked.message
    planning = decide(tmp_path, "npm test | tail -5", mode="plan", allow=allow)
    assert planning.reason == "mode:plan" and "Part of" not in planning.message


def test_an_allowed_compound_command_has_no_hint(tmp_path: Path) -> None:
    decision = decide(tmp_path, "npm test | tail -5", allow=("Bash(npm test:*)", "Bash(tail:*)"))
    assert decision.behavior == "allow"
    assert decision.message == "Bash is allowed by the rule Bash(npm test:*) & Bash(tail:*)."
