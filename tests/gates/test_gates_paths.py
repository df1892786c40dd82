"""Protected paths under every mode, and paths that leave the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.gates import MODES, Gatekeeper, Policy, ToolCall


def keeper(mode: str, workspace: Path, allow: tuple[str, ...] = ()) -> Gatekeeper:
    return Gatekeeper(Policy.build(mode, allow=allow, agent_runs_unprivileged=True), workspace)


PROTECTED = [
    ".git/config",
    ".git/hooks/pre-commit",
    ".claude/settings.json",
    ".baton/policy.toml",
    "packages/app/.git/HEAD",
    "sub/.claude/x",
    ".GIT/config",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rel", PROTECTED)
@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit", "NotebookEdit"])
def test_protected_paths_always_open_a_gate(tmp_path: Path, mode: str, rel: str, tool: str) -> None:
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    gate = keeper(mode, tmp_path, allow=("Write", "Edit", f"Edit({rel})", "Edit(.git/**)"))
    decision = gate.decide(ToolCall(tool, {key: str(tmp_path / rel)}))
    if mode == "plan":
        assert (decision.behavior, decision.reason) == ("deny", "mode:plan")
    else:
        assert (decision.behavior, decision.reason) == ("ask", f"protected_path:{rel}")
        assert "protected" in decision.message


@pytest.mark.parametrize("mode", MODES)
def test_reading_protected_paths_is_a_read(tmp_path: Path, mode: str) -> None:
    decision = keeper(mode, tmp_path).decide(ToolCall("Read", {"file_path": ".git/config"}))
    assert decision.behavior == "allow"


def test_lookalikes_are_not_protected(tmp_path: Path) -> None:
    gate = keeper("acceptEdits", tmp_path)
    for rel in (".github/workflows/ci.yml", ".gitignore", "git/x", "src/.batonrc"):
        assert gate.decide(ToolCall("Write", {"file_path": rel})).behavior == "allow", rel


def test_symlink_into_git_is_protected(tmp_path: Path) -> None:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "hooks").symlink_to(tmp_path / ".git" / "hooks")
    decision = keeper("acceptEdits", tmp_path).decide(ToolCall("Write", {"file_path": "hooks/pre-commit"}))
    assert (decision.behavior, decision.reason) == ("ask", "protected_path:.git/hooks/pre-commit")


def test_symlink_out_of_git_is_still_protected(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / ".git" / "alias").symlink_to(tmp_path / "src")
    decision = keeper("acceptEdits", tmp_path).decide(ToolCall("Write", {"file_path": ".git/alias/a.py"}))
    assert decision.behavior == "ask"
    assert decision.reason.startswith("protected_path:")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return root


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_dotdot_escapes_the_workspace(workspace: Path, mode: str) -> None:
    gate = keeper(mode, workspace, allow=("Write(src/**)", "Write(**)"))
    decision = gate.decide(ToolCall("Write", {"file_path": "src/../../outside/x.txt"}))
    outside = workspace.parent / "outside" / "x.txt"
    assert (decision.behavior, decision.reason) == ("ask", f"outside_workspace:{outside}")
    assert "outside the workspace" in decision.message


def test_absolute_path_outside(workspace: Path) -> None:
    gate = keeper("acceptEdits", workspace)
    assert gate.decide(ToolCall("Edit", {"file_path": "/etc/hosts"})).behavior == "ask"
    assert keeper("plan", workspace).decide(ToolCall("Edit", {"file_path": "/etc/hosts"})).behavior == "deny"
    read = gate.decide(ToolCall("Read", {"file_path": "/etc/hosts"}))
    assert (read.behavior, read.reason) == ("ask", "outside_workspace:/etc/hosts")


def test_home_relative_path_is_outside(workspace: Path) -> None:
    decision = keeper("default", workspace).decide(ToolCall("Read", {"file_path": "~/.ssh/id_rsa"}))
    assert decision.behavior == "ask"
    assert decision.reason.startswith("outside_workspace:")


def test_symlink_pointing_out(workspace: Path) -> None:
    (workspace / "src" / "escape").symlink_to(workspace.parent / "outside")
    gate = keeper("acceptEdits", workspace, allow=("Write(src/**)",))
    decision = gate.decide(ToolCall("Write", {"file_path": "src/escape/x.txt"}))
    assert (decision.behavior, decision.reason) == (
        "ask",
        f"outside_workspace:{workspace.parent / 'outside' / 'x.txt'}",
    )
    assert gate.decide(ToolCall("Read", {"file_path": "src/escape/x.txt"})).behavior == "ask"


def test_symlink_pointing_out_is_denied_by_a_rule_on_the_written_path(workspace: Path) -> None:
    (workspace / "src" / "escape").symlink_to(workspace.parent / "outside")
    gate = Gatekeeper(Policy.build("default", deny=["Read(src/escape/**)"]), workspace)
    assert gate.decide(ToolCall("Read", {"file_path": "src/escape/x"})).behavior == "deny"


def test_workspace_given_through_a_symlink(tmp_path: Path, workspace: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(workspace)
    gate = keeper("acceptEdits", link)
    assert gate.decide(ToolCall("Write", {"file_path": str(workspace / "src" / "a.py")})).behavior == "allow"
    assert gate.decide(ToolCall("Write", {"file_path": str(link / "src" / "a.py")})).behavior == "allow"


def test_search_roots(workspace: Path) -> None:
    gate = keeper("default", workspace)
    assert gate.decide(ToolCall("Glob", {"pattern": "src/**/*.py"})).behavior == "allow"
    assert gate.decide(ToolCall("Grep", {"pattern": "x"})).behavior == "allow"
    assert gate.decide(ToolCall("Glob", {"pattern": "../outside/*"})).behavior == "ask"
    assert gate.decide(ToolCall("Glob", {"pattern": "/etc/**"})).behavior == "ask"
    assert gate.decide(ToolCall("Grep", {"pattern": "x", "path": "/etc"})).behavior == "ask"
    assert gate.decide(ToolCall("LS", {"path": str(workspace.parent)})).behavior == "ask"


def test_bare_allow_rules_stay_inside_the_workspace(workspace: Path) -> None:
    gate = keeper("default", workspace, allow=("Read", "Write", "Grep"))
    assert gate.decide(ToolCall("Write", {"file_path": "src/a.py"})).reason == "rule:Write"
    assert gate.decide(ToolCall("Write", {"file_path": "/etc/hosts"})).behavior == "ask"
    assert gate.decide(ToolCall("Write", {"content": "no path"})).behavior == "ask"
    assert gate.decide(ToolCall("Read", {"file_path": "/etc/hosts"})).behavior == "ask"
    assert gate.decide(ToolCall("Grep", {"pattern": "x", "path": "/etc"})).behavior == "ask"
    absolute = keeper("default", workspace, allow=("Read(//etc/**)",))
    assert absolute.decide(ToolCall("Read", {"file_path": "/etc/hosts"})).behavior == "allow"


def test_bare_deny_rules_reach_outside(workspace: Path) -> None:
    gate = Gatekeeper(Policy.build("default", deny=["Read"]), workspace)
    assert gate.decide(ToolCall("Read", {"file_path": "/etc/hosts"})).behavior == "deny"


def test_protected_directories_outside_the_workspace(workspace: Path) -> None:
    other = workspace.parent / "other" / ".git" / "hooks" / "pre-commit"
    decision = keeper("bypassPermissions", workspace).decide(ToolCall("Write", {"file_path": str(other)}))
    assert (decision.behavior, decision.reason) == ("ask", f"protected_path:{other}")
    plain = keeper("bypassPermissions", workspace).decide(ToolCall("Write", {"file_path": "/tmp/x"}))
    assert (plain.behavior, plain.reason) == ("allow", "mode:bypassPermissions")
