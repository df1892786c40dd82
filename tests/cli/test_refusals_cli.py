"""What ``baton run`` and ``baton logs`` refuse, with which exit code and error code.

None of these starts Claude Code: each is refused before a run exists. The first test drives
the installed console script; the others run the same typer app in this process, since a
subprocess costs ~3 s of imports and adds nothing to a refusal once one is checked end to end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI, Invocation, invoke_in_process

InvokeBaton = Callable[..., Invocation]


def refused_plainly(invocation: Invocation, exit_code: int, code: str) -> str:
    """Nothing on stdout; one ``baton: CODE: message`` line on stderr. Returns the message."""
    assert invocation.returncode == exit_code, invocation.describe()
    assert invocation.stdout == ""
    prefix = f"baton: {code}: "
    assert invocation.stderr.startswith(prefix), invocation.describe()
    assert invocation.stderr.count("\n") == 1, invocation.describe()
    return invocation.stderr.removeprefix(prefix).strip()


def refused_as_json(invocation: Invocation, exit_code: int, code: str) -> str:
    """Nothing on stdout; exactly ``{"error": {"code", "message"}}`` on stderr. Returns the message."""
    assert invocation.returncode == exit_code, invocation.describe()
    assert invocation.stdout == ""
    body = json.loads(invocation.stderr)
    assert set(body) == {"error"}
    assert set(body["error"]) - {"details"} == {"code", "message"}
    assert body["error"]["code"] == code
    return str(body["error"]["message"])


@pytest.fixture
def baton_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> InvokeBaton:
    def invoke(*args: str) -> Invocation:
        return invoke_in_process(monkeypatch, tmp_path / "baton-home", *args)

    return invoke


def test_no_model_credentials_is_refused_and_says_what_to_set(baton: BatonCLI, repo: Path) -> None:
    plain, as_json = baton.many(("run", "go", "--repo", str(repo)), ("run", "go", "--repo", str(repo), "--json"))
    message = refused_plainly(plain, 3, "model_credentials_missing")
    assert "ANTHROPIC_API_KEY" in message
    assert "--scenario" in message
    assert refused_as_json(as_json, 3, "model_credentials_missing") == message
    assert not list(baton.home.glob("runs/*")), "a refused run leaves no run directory"


def test_bypass_permissions_as_root_is_refused(baton_here: InvokeBaton, repo: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only as root: bypass_refused_as_root applies only when baton (so the agent) runs as root")
    args = ("run", "go", "--repo", str(repo), "--scenario", "plain", "--mode", "bypassPermissions")
    assert "bypassPermissions" in refused_plainly(baton_here(*args), 3, "bypass_refused_as_root")
    refused_as_json(baton_here(*args, "--json"), 3, "bypass_refused_as_root")


def test_bad_arguments_are_usage_errors(baton_here: InvokeBaton, repo: Path) -> None:
    run = ("run", "go", "--repo", str(repo), "--scenario", "plain")
    message = refused_plainly(baton_here(*run, "--mode", "nonsense"), 2, "invalid_argument")
    assert "nonsense" in message and "acceptEdits" in message
    missing_repo = baton_here("run", "go", "--repo", "/does/not/exist", "--scenario", "plain", "--json")
    assert "/does/not/exist" in refused_as_json(missing_repo, 2, "invalid_argument")
    assert "--budget-usd" in refused_plainly(baton_here(*run, "--budget-usd", "0"), 2, "invalid_argument")
    assert "--max-turns" in refused_plainly(baton_here(*run, "--max-turns", "0"), 2, "invalid_argument")
    assert "--max-seconds" in refused_plainly(baton_here(*run, "--max-seconds", "-1"), 2, "invalid_argument")
    codex = ("run", "go", "--repo", str(repo), "--scenario", "plain", "--agent", "codex", "--budget-usd", "1")
    assert "codex reports no cost" in refused_plainly(baton_here(*codex), 3, "budget_not_supported")
    assert "Bash(" in refused_plainly(baton_here(*run, "--allow", "Bash("), 2, "invalid_argument")
    unknown = baton_here("run", "go", "--repo", str(repo), "--scenario", "no-such-scenario")
    message = refused_plainly(unknown, 2, "invalid_argument")
    assert "no-such-scenario" in message and "write-and-run" in message


def test_a_rule_with_a_lower_case_tool_suggests_the_tool(baton_here: InvokeBaton, repo: Path) -> None:
    run = ("run", "go", "--repo", str(repo), "--scenario", "plain")
    message = refused_plainly(baton_here(*run, "--allow", "bash(ls)"), 2, "invalid_argument")
    assert message == "invalid rule 'bash(ls)': tool names are case-sensitive: did you mean Bash(ls)?"
    message = refused_plainly(baton_here(*run, "--deny", "write(src/**)"), 2, "invalid_argument")
    assert message.endswith("did you mean Write(src/**)?")
    assert "TodoWrite takes no specifier" in refused_plainly(
        baton_here(*run, "--allow", "TodoWrite(x)"), 2, "invalid_argument"
    )


def test_a_bad_mode_is_a_usage_error_even_without_credentials(baton_here: InvokeBaton, repo: Path) -> None:
    refused_plainly(baton_here("run", "go", "--repo", str(repo), "--mode", "nonsense"), 2, "invalid_argument")


def test_logs_of_an_unknown_run_is_run_not_found(baton_here: InvokeBaton) -> None:
    # A well-formed id that names no run: the lookup failed (1), the command line was fine (not 2),
    # and nothing was refused by policy (not 3).
    assert "run_nope" in refused_as_json(baton_here("logs", "run_nope", "--json"), 1, "run_not_found")
    bad_view = baton_here("logs", "run_nope", "--view", "wire", "--json")
    assert "wire" in refused_as_json(bad_view, 2, "invalid_argument")


def test_logs_without_json_reports_errors_plainly(baton_here: InvokeBaton) -> None:
    assert "run_nope" in refused_plainly(baton_here("logs", "run_nope"), 1, "run_not_found")


def test_record_and_replay_options_are_checked_before_a_run_exists(
    baton_here: InvokeBaton, repo: Path, tmp_path: Path
) -> None:
    run = ("run", "go", "--repo", str(repo))
    both = baton_here(*run, "--record", str(tmp_path / "a.jsonl"), "--replay", str(tmp_path / "b.jsonl"))
    assert "exclusive" in refused_plainly(both, 2, "invalid_argument")
    with_scenario = baton_here(*run, "--scenario", "plain", "--replay", str(tmp_path / "b.jsonl"))
    assert "exclusive" in refused_plainly(with_scenario, 2, "invalid_argument")
    assert "real or fast" in refused_plainly(
        baton_here(*run, "--replay", str(tmp_path / "b.jsonl"), "--replay-timing", "slow"), 2, "invalid_argument"
    )
    (tmp_path / "bad.jsonl").write_text('{"baton_cassette": 9}\n')
    assert "version 9" in refused_plainly(
        baton_here(*run, "--replay", str(tmp_path / "bad.jsonl")), 2, "cassette_invalid"
    )
    assert "run_nope" in refused_plainly(baton_here("fork", "run_nope", "--turn", "1"), 1, "run_not_found")
