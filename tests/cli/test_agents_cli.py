"""``baton agents [NAME] [--json]``: the registry as the CLI prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process


def test_agents_json_lists_every_agent_installed_with_its_mode_matrix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = invoke_in_process(monkeypatch, tmp_path / "home", "agents", "--json")
    assert result.returncode == 0, result.describe()
    agents = {agent["name"]: agent for agent in json.loads(result.stdout)}
    assert set(agents) == {"claude", "codex", "claude-acp", "gemini", "opencode", "qwen", "kilo"}
    codex = agents["codex"]
    assert codex["installed"] is True and codex["version"] == "0.16.0"
    assert codex["package"] == "@zed-industries/codex-acp@0.16.0"
    assert Path(codex["command"][0]).is_file()
    assert codex["modes"] == {m: "ask-all" for m in ("default", "acceptEdits", "plan", "bypassPermissions")}
    settings = {s["native"]: s for s in codex["native_settings"]}
    assert settings["ask-all"]["unasked"] == []
    assert "approval_policy=untrusted" in settings["ask-all"]["setting"]
    assert any(".claude/" in probe for probe in settings["auto"]["unasked"])
    assert codex["tools"]["exec_command"] == "Bash" and codex["tools"]["apply_patch"] == "Edit"
    assert result.stderr == ""
    claude_acp = agents["claude-acp"]
    assert claude_acp["installed"] is True and claude_acp["version"] == "0.23.1"
    assert claude_acp["modes"] == {m: "ask-all" for m in ("default", "acceptEdits", "plan", "bypassPermissions")}
    gemini = agents["gemini"]
    assert gemini["installed"] is True and gemini["version"] == "0.61.0"
    # Gemini CLI runs its safe commands unasked: only a mode that allows them is enforceable.
    assert gemini["modes"] == {"default": None, "acceptEdits": None, "plan": None, "bypassPermissions": "ask-all"}
    assert any("`echo hi`" in probe for probe in gemini["native_settings"][0]["unasked"])
    opencode = agents["opencode"]
    assert opencode["installed"] is True and opencode["version"] == "1.18.33"
    assert opencode["modes"] == {m: "ask-all" for m in ("default", "acceptEdits", "plan", "bypassPermissions")}
    qwen = agents["qwen"]
    assert qwen["installed"] is True and qwen["version"] == "0.24.4"
    assert qwen["package"] == "@qwen-code/qwen-code@0.24.4" and Path(qwen["command"][0]).is_file()
    assert qwen["modes"] == {m: "ask-all" for m in ("default", "acceptEdits", "plan", "bypassPermissions")}
    assert qwen["tools"]["run_shell_command"] == "Bash" and qwen["tools"]["write_file"] == "Write"
    kilo = agents["kilo"]
    assert kilo["installed"] is True and kilo["version"] == "7.7.7" and Path(kilo["command"][0]).is_file()
    assert kilo["modes"] == {m: "ask-all" for m in ("default", "acceptEdits", "plan", "bypassPermissions")}
    # Only baton's Claude adapter runs an approval's edited input; the ACP agents run what they proposed.
    assert {name: agent["applies_edits"] for name, agent in agents.items()} == {
        "claude": True, "codex": False, "claude-acp": False, "gemini": False, "opencode": False, "qwen": False,
        "kilo": False,
    }  # fmt: skip
    # The repository's instruction files each is given (docs/agents.md "Repository instructions").
    assert {name: agent["instruction_files"] for name, agent in agents.items()} == {
        "claude": ["CLAUDE.md", "AGENTS.md"], "codex": ["AGENTS.md"], "claude-acp": ["CLAUDE.md", "AGENTS.md"],
        "gemini": ["GEMINI.md", "AGENTS.md"], "opencode": ["AGENTS.md"], "qwen": ["QWEN.md", "AGENTS.md"],
        "kilo": ["AGENTS.md"],
    }  # fmt: skip


def test_agents_fits_80_columns_one_line_an_agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = invoke_in_process(monkeypatch, tmp_path / "home", "agents", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.describe()
    lines = result.stdout.splitlines()
    assert len(lines) <= 12, result.stdout
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), result.stdout
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:8]}
    assert set(rows) == {"claude", "codex", "claude-acp", "gemini", "opencode", "qwen", "kilo"}
    assert rows["qwen"] == ["installed", "0.24.4", "all"]
    assert rows["kilo"] == ["installed", "7.7.7", "all"]
    assert rows["gemini"] == ["installed", "0.61.0", "bypassPermissions"]
    assert rows["codex"] == ["installed", "0.16.0", "all"]
    assert "baton agents NAME" in lines[-1]


@pytest.mark.parametrize("columns", [80, 50])
def test_one_agent_shows_its_mode_matrix_wrapped_to_the_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, columns: int
) -> None:
    result = invoke_in_process(monkeypatch, tmp_path / "home", "agents", "gemini", env={"COLUMNS": str(columns)})
    assert result.returncode == 0, result.describe()
    lines = result.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), result.stdout
    assert lines[0] == "gemini · installed · 0.61.0"
    assert "  mode default: not enforceable" in lines and "  mode bypassPermissions: ask-all" in lines
    text = " ".join(line.strip() for line in lines)
    assert "- run `echo hi` (a command Gemini CLI calls safe, in the workspace)" in text
    assert "test_gemini_modes.py::test_ask_all_sends_every_call_but_safe_commands_to_the_gatekeeper" in text.replace(
        " ", ""
    )


def test_an_unknown_agent_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = invoke_in_process(monkeypatch, tmp_path / "home", "agents", "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("baton: invalid_argument: unknown agent 'nope'"), result.stderr


def test_agents_overview_says_which_agents_run_an_edited_approval(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = invoke_in_process(monkeypatch, tmp_path / "home", "agents", env={"COLUMNS": "80"})
    assert result.returncode == 0
    assert "edited approvals are run by: claude (the others refuse them: edit_not_supported)" in result.stdout


def test_one_agent_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    as_json = invoke_in_process(monkeypatch, tmp_path / "home", "agents", "codex", "--json")
    assert as_json.returncode == 0, as_json.describe()
    codex = json.loads(as_json.stdout)
    assert codex["name"] == "codex" and codex["applies_edits"] is False
    table = invoke_in_process(monkeypatch, tmp_path / "home", "agents", "claude")
    assert table.returncode == 0 and "runs the edit" in table.stdout and "codex" not in table.stdout
    unknown = invoke_in_process(monkeypatch, tmp_path / "home", "agents", "nope")
    assert unknown.returncode == 2 and unknown.stderr.startswith("baton: invalid_argument: unknown agent 'nope'")
