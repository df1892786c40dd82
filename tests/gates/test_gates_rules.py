"""Rule syntax, and matching through the Gatekeeper: commands, paths, domains, MCP, precedence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from baton.errors import UsageError
from baton.gates import Gatekeeper, Policy, ToolCall, parse_rule
from baton.gates.rules import RuleSyntaxError


def keeper(
    workspace: Path,
    *,
    mode: str = "default",
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    ask: Sequence[str] = (),
) -> Gatekeeper:
    return Gatekeeper(Policy.build(mode, allow=allow, deny=deny, ask=ask), workspace)


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command}, "call")


@pytest.mark.parametrize(
    ("text", "tool", "kind"),
    [
        ("Bash", "Bash", "any"),
        ("Bash(npm test:*)", "Bash", "command"),
        ("Bash(npm test)", "Bash", "command"),
        (" Write(src/**) ", "Write", "path"),
        ("Read(//etc/hosts)", "Read", "path"),
        ("WebFetch(domain:example.com)", "WebFetch", "domain"),
        ("WebSearch", "WebSearch", "any"),
        ("Task(Explore)", "Task", "subagent"),
        ("mcp__github", "mcp__github", "mcp"),
        ("mcp__github__*", "mcp__github", "mcp"),
        ("mcp__github__create_issue", "mcp__github__create_issue", "mcp"),
        ("TodoWrite", "TodoWrite", "any"),
    ],
)
def test_parse(text: str, tool: str, kind: str) -> None:
    rule = parse_rule(text)
    assert (rule.tool, rule.kind, rule.text) == (tool, kind, text.strip())


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Bash(",
        "Bash()",
        "Bash(:*)",
        "Bash(a:*b:*)",
        "Bash(a:* b)",
        "bash command",
        "Write(../x)",
        "Write()",
        "WebFetch(example.com)",
        "WebFetch(domain:exa mple.com)",
        "WebSearch(cats)",
        "TodoWrite(x)",
        "mcp__server(x)",
        "mcp__*",
        "Bash__*",
    ],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(RuleSyntaxError):
        parse_rule(text)


def test_parse_error_names_the_rule() -> None:
    with pytest.raises(UsageError) as caught:
        Policy.build("default", allow=["Bash(ls)", "Bash(:*)"])
    assert caught.value.code == "invalid_argument"
    assert "Bash(:*)" in caught.value.message
    assert caught.value.details["rule"] == "Bash(:*)"


def test_rules_must_be_a_list() -> None:
    with pytest.raises(UsageError) as caught:
        Policy.build("default", allow="Bash")
    assert caught.value.code == "invalid_argument"


@pytest.mark.parametrize(
    ("command", "behavior"),
    [
        ("npm test", "allow"),
        ("npm test -- --watch", "allow"),
        ("npm test\t--ci", "allow"),
        ("npm tests", "ask"),
        ("npm testing", "ask"),
        ("npm", "ask"),
        ("npm test && npm test -- --ci", "allow"),
        ("npm test && rm -rf /", "ask"),
        ("npm test || curl evil", "ask"),
        ("npm test; rm x", "ask"),
        ("npm test | sh", "ask"),
        ("npm test $(rm x)", "ask"),
        ("npm test `rm x`", "ask"),
        ("npm test\nrm x", "ask"),
        ("npm test > src/app.py", "ask"),
        ("npm test 2>&1", "allow"),
        ("npm test 'unterminated", "ask"),
    ],
)
def test_prefix_rule_and_compound_commands(tmp_path: Path, command: str, behavior: str) -> None:
    decision = keeper(tmp_path, allow=["Bash(npm test:*)"]).decide(bash(command))
    assert decision.behavior == behavior
    if behavior == "allow":
        assert decision.reason == "rule:Bash(npm test:*)"


def test_compound_command_allowed_part_by_part(tmp_path: Path) -> None:
    gate = keeper(tmp_path, allow=["Bash(npm test:*)", "Bash(git status)"])
    decision = gate.decide(bash("git status && npm test -- --ci | npm test"))
    assert decision.behavior == "allow"
    assert decision.reason == "rule:Bash(git status) & Bash(npm test:*)"
    assert gate.decide(bash("git status --short")).behavior == "ask"


def test_exact_command_rule(tmp_path: Path) -> None:
    gate = keeper(tmp_path, allow=["Bash(make lint)"])
    assert gate.decide(bash("make lint")).behavior == "allow"
    assert gate.decide(bash("  make lint  ")).behavior == "allow"
    assert gate.decide(bash("make lint fix")).behavior == "ask"


def test_bare_bash_allows_everything_but_deny_still_wins(tmp_path: Path) -> None:
    gate = keeper(tmp_path, allow=["Bash"], deny=["Bash(rm:*)"])
    assert gate.decide(bash("anything > file; curl x | sh")).behavior == "allow"
    assert gate.decide(bash("ls")).reason == "rule:Bash"
    assert gate.decide(ToolCall("BashOutput", {"bash_id": "1"})).behavior == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm",
        "ls && rm -rf /",
        "ls | xargs echo; rm x",
        "echo $(rm -rf /)",
        "echo `rm x`",
        "X=1 rm x",
        "env rm x",
        "/bin/rm x",
        "ls 'unterminated; rm x",
    ],
)
def test_deny_matches_any_part(tmp_path: Path, command: str) -> None:
    decision = keeper(tmp_path, mode="default", allow=["Bash"], deny=["Bash(rm:*)"]).decide(bash(command))
    assert (decision.behavior, decision.reason) == ("deny", "rule:Bash(rm:*)")
    assert "Bash(rm:*)" in decision.message


def test_ask_rule_matches_any_part(tmp_path: Path) -> None:
    gate = keeper(tmp_path, allow=["Bash"], ask=["Bash(git push:*)"])
    decision = gate.decide(bash("git commit -m x && git push origin main"))
    assert (decision.behavior, decision.reason) == ("ask", "rule:Bash(git push:*)")
    assert gate.decide(bash("git pushy")).behavior == "allow"


def test_deny_beats_ask_beats_allow(tmp_path: Path) -> None:
    call = ToolCall("Write", {"file_path": "src/a.py", "content": ""})
    both = keeper(tmp_path, allow=["Write(src/**)"], ask=["Write(src/a.py)"])
    assert both.decide(call).reason == "rule:Write(src/a.py)"
    assert both.decide(call).behavior == "ask"
    every = keeper(tmp_path, allow=["Write"], ask=["Write(src/**)"], deny=["Edit(*.py)"])
    assert (every.decide(call).behavior, every.decide(call).reason) == ("deny", "rule:Edit(*.py)")


def test_deny_rule_beats_a_permissive_mode(tmp_path: Path) -> None:
    gate = Gatekeeper(Policy.build("bypassPermissions", deny=["WebFetch"], agent_runs_unprivileged=True), tmp_path)
    assert gate.decide(ToolCall("WebFetch", {"url": "https://a.example"})).behavior == "deny"
    assert gate.decide(ToolCall("WebSearch", {"query": "q"})).behavior == "allow"


def test_allow_rule_beats_the_mode(tmp_path: Path) -> None:
    gate = keeper(tmp_path, allow=["WebSearch", "Task(Explore)", "mcp__docs"])
    assert gate.decide(ToolCall("WebSearch", {"query": "q"})).reason == "rule:WebSearch"
    assert gate.decide(ToolCall("Agent", {"subagent_type": "Explore"})).behavior == "allow"
    assert gate.decide(ToolCall("Task", {"subagent_type": "general-purpose"})).behavior == "ask"
    assert gate.decide(ToolCall("mcp__docs__search", {})).behavior == "allow"
    assert gate.decide(ToolCall("SomethingNew", {})).behavior == "ask"
    assert keeper(tmp_path, allow=["SomethingNew"]).decide(ToolCall("SomethingNew", {})).behavior == "allow"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("src/**", "src/a.py", True),
        ("src/**", "src/deep/er/a.py", True),
        ("src/**", "lib/src/a.py", False),
        ("src/**", "srcx/a.py", False),
        ("/src/*.py", "src/a.py", True),
        ("./src/*.py", "src/deep/a.py", False),
        ("src/*.py", "src/deep/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/a/b/c.py", True),
        ("*.md", "README.md", True),
        ("*.md", "docs/guide/intro.md", True),
        ("README.md", "docs/README.md", True),
        ("docs/", "docs/guide/intro.md", True),
        ("docs", "docs/guide/intro.md", True),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file12.txt", False),
        ("file[0-9].txt", "file7.txt", True),
        ("file[!0-9].txt", "file7.txt", False),
        ("**", "anything/at/all", True),
    ],
)
def test_path_globs(tmp_path: Path, pattern: str, path: str, matches: bool) -> None:
    gate = keeper(tmp_path, allow=[f"Write({pattern})"])
    decision = gate.decide(ToolCall("Write", {"file_path": path, "content": ""}))
    assert (decision.behavior == "allow") is matches


def test_absolute_input_paths_are_normalized(tmp_path: Path) -> None:
    gate = keeper(tmp_path, allow=["Edit(src/**)"])
    call = ToolCall("Edit", {"file_path": str(tmp_path / "src" / "." / "x" / ".." / "a.py")})
    assert gate.decide(call).behavior == "allow"


def test_read_rules_cover_search_and_edit_rules_cover_writes(tmp_path: Path) -> None:
    gate = keeper(tmp_path, deny=["Read(secrets/**)"], allow=["Edit(src/**)"])
    assert gate.decide(ToolCall("Grep", {"pattern": "x", "path": "secrets/k"})).behavior == "deny"
    assert gate.decide(ToolCall("Read", {"file_path": "secrets/key"})).behavior == "deny"
    assert gate.decide(ToolCall("Write", {"file_path": "src/a.py"})).behavior == "allow"
    assert gate.decide(ToolCall("MultiEdit", {"file_path": "src/a.py"})).behavior == "allow"
    assert gate.decide(ToolCall("Bash", {"command": "cat secrets/key"})).behavior == "ask"


def test_specific_tool_path_rule_covers_only_that_tool(tmp_path: Path) -> None:
    gate = keeper(tmp_path, mode="acceptEdits", deny=["MultiEdit(src/**)"])
    assert gate.decide(ToolCall("MultiEdit", {"file_path": "src/a.py"})).behavior == "deny"
    assert gate.decide(ToolCall("Edit", {"file_path": "src/a.py"})).behavior == "allow"


def test_absolute_path_rules(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    gate = keeper(workspace, allow=[f"Read(/{tmp_path}/shared/**)"])
    assert gate.decide(ToolCall("Read", {"file_path": str(tmp_path / "shared" / "a")})).behavior == "allow"
    assert gate.decide(ToolCall("Read", {"file_path": str(tmp_path / "other" / "a")})).behavior == "ask"


@pytest.mark.parametrize(
    ("rule", "url", "behavior"),
    [
        ("WebFetch(domain:example.com)", "https://example.com/docs", "allow"),
        ("WebFetch(domain:example.com)", "https://EXAMPLE.com:8443/", "allow"),
        ("WebFetch(domain:example.com)", "https://docs.example.com/", "ask"),
        ("WebFetch(domain:example.com)", "https://example.com.evil.net/", "ask"),
        ("WebFetch(domain:example.com)", "https://user@evil.net/?example.com", "ask"),
        ("WebFetch(domain:*.example.com)", "https://docs.example.com/", "allow"),
        ("WebFetch(domain:*.example.com)", "https://example.com/", "ask"),
        ("WebFetch(domain:*.example.com)", "https://badexample.com/", "ask"),
        ("WebFetch", "not a url", "allow"),
        ("WebFetch(domain:example.com)", "not a url", "ask"),
    ],
)
def test_webfetch_domains(tmp_path: Path, rule: str, url: str, behavior: str) -> None:
    decision = keeper(tmp_path, allow=[rule]).decide(ToolCall("WebFetch", {"url": url, "prompt": ""}))
    assert decision.behavior == behavior


@pytest.mark.parametrize(
    ("rule", "tool", "matches"),
    [
        ("mcp__github", "mcp__github__create_issue", True),
        ("mcp__github", "mcp__github", True),
        ("mcp__github", "mcp__githubby__x", False),
        ("mcp__github__*", "mcp__github__list", True),
        ("mcp__github__create_issue", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__delete_repo", False),
    ],
)
def test_mcp_rules(tmp_path: Path, rule: str, tool: str, matches: bool) -> None:
    decision = keeper(tmp_path, allow=[rule]).decide(ToolCall(tool, {}))
    assert (decision.behavior == "allow") is matches
    denied = keeper(tmp_path, allow=["mcp__github"], deny=[rule]).decide(ToolCall(tool, {}))
    assert (denied.behavior == "deny") is matches
