"""Every permission mode × tool group, with no rules: what the mode alone decides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import baton.gates
from baton.errors import RefusedError, UsageError
from baton.gates import MODES, Gatekeeper, Policy, ToolCall, tool_group

A = "allow"
D = "deny"
Q = "ask"

# (tool name, input relative to the workspace) -> group
CALLS: dict[str, tuple[str, dict[str, object]]] = {
    "Read": ("read", {"file_path": "src/app.py"}),
    "NotebookRead": ("read", {"notebook_path": "nb.ipynb"}),
    "LS": ("read", {"path": "src"}),
    "Glob": ("search", {"pattern": "**/*.py"}),
    "Grep": ("search", {"pattern": "TODO", "path": "src"}),
    "Write": ("write", {"file_path": "src/new.py", "content": "x"}),
    "Edit": ("write", {"file_path": "src/app.py", "old_string": "a", "new_string": "b"}),
    "MultiEdit": ("write", {"file_path": "src/app.py", "edits": []}),
    "NotebookEdit": ("write", {"notebook_path": "nb.ipynb", "new_source": ""}),
    "Bash": ("bash", {"command": "ls"}),
    "BashOutput": ("bash", {"bash_id": "1"}),
    "KillShell": ("bash", {"shell_id": "1"}),
    "WebFetch": ("web", {"url": "https://example.com/", "prompt": "p"}),
    "WebSearch": ("web", {"query": "q"}),
    "Task": ("agent", {"subagent_type": "Explore", "prompt": "p"}),
    "Agent": ("agent", {"subagent_type": "Explore", "prompt": "p"}),
    "mcp__files__read": ("mcp", {}),
    "TodoWrite": ("meta", {"todos": []}),
    "ExitPlanMode": ("interaction", {"plan": "p"}),
    "AskUserQuestion": ("interaction", {"questions": []}),
    "SomethingNew": ("unknown", {}),
}

#                  default acceptEdits plan bypassPermissions
MATRIX: dict[str, tuple[str, str, str, str]] = {
    "read": (A, A, A, A),
    "search": (A, A, A, A),
    "write": (Q, A, D, A),
    "bash": (Q, Q, D, A),
    "web": (Q, Q, Q, A),
    "agent": (Q, Q, Q, A),
    "mcp": (Q, Q, Q, A),
    "meta": (A, A, A, A),
    "interaction": (Q, Q, Q, Q),
    "unknown": (Q, Q, Q, Q),
}

OUTSIDE: dict[str, tuple[str, str, str, str]] = {
    "Read": (Q, Q, Q, A),
    "Grep": (Q, Q, Q, A),
    "Write": (Q, Q, D, A),
    "Edit": (Q, Q, D, A),
}


def gatekeeper(mode: str, workspace: Path) -> Gatekeeper:
    return Gatekeeper(Policy.build(mode, agent_runs_unprivileged=True), workspace)


def test_modes_are_the_four_documented() -> None:
    assert MODES == ("default", "acceptEdits", "plan", "bypassPermissions")


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_tool_groups(tool: str) -> None:
    assert tool_group(tool) == CALLS[tool][0]


@pytest.mark.parametrize("mode_index", range(4), ids=list(MODES))
@pytest.mark.parametrize("tool", sorted(CALLS))
def test_mode_by_group_inside_workspace(tool: str, mode_index: int, tmp_path: Path) -> None:
    mode = MODES[mode_index]
    group, data = CALLS[tool]
    decision = gatekeeper(mode, tmp_path).decide(ToolCall(tool, dict(data), "call-1"))
    assert decision.behavior == MATRIX[group][mode_index]
    expected_reason = f"unknown_tool:{tool}" if group == "unknown" else f"mode:{mode}"
    assert decision.reason == expected_reason
    assert decision.message


@pytest.mark.parametrize("mode_index", range(4), ids=list(MODES))
@pytest.mark.parametrize("tool", sorted(OUTSIDE))
def test_mode_outside_workspace(tool: str, mode_index: int, tmp_path: Path) -> None:
    mode = MODES[mode_index]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    key = "path" if tool == "Grep" else "file_path"
    decision = gatekeeper(mode, workspace).decide(ToolCall(tool, {key: str(tmp_path / "elsewhere.txt")}))
    assert decision.behavior == OUTSIDE[tool][mode_index]
    if decision.behavior == "ask":
        assert decision.reason == f"outside_workspace:{tmp_path / 'elsewhere.txt'}"
    elif decision.behavior == "deny":
        assert decision.reason == "mode:plan"


def test_plan_denies_with_a_clear_message(tmp_path: Path) -> None:
    decision = gatekeeper("plan", tmp_path).decide(ToolCall("Bash", {"command": "make"}))
    assert (decision.behavior, decision.reason) == ("deny", "mode:plan")
    assert "read-only" in decision.message


def test_write_tool_without_a_path_asks(tmp_path: Path) -> None:
    decision = gatekeeper("acceptEdits", tmp_path).decide(ToolCall("Write", {"content": "x"}))
    assert (decision.behavior, decision.reason) == ("ask", "unresolvable_path")


def test_decisions_are_deterministic(tmp_path: Path) -> None:
    keeper = gatekeeper("default", tmp_path)
    call = ToolCall("Bash", {"command": "npm test"}, "c")
    assert keeper.decide(call) == keeper.decide(call)


def test_kind_is_never_trusted(tmp_path: Path) -> None:
    decision = gatekeeper("default", tmp_path).decide(ToolCall("shell", {}, "c", kind="read"))
    assert decision.behavior == "ask"


def test_invalid_mode() -> None:
    with pytest.raises(UsageError) as caught:
        Policy.build("yolo")
    assert caught.value.code == "invalid_argument"
    assert "yolo" in caught.value.message


def test_set_mode_changes_the_rest_of_the_run(tmp_path: Path) -> None:
    keeper = gatekeeper("default", tmp_path)
    edit = ToolCall("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"})
    assert keeper.decide(edit).behavior == "ask"
    keeper.set_mode("acceptEdits")
    assert keeper.policy.mode == "acceptEdits"
    assert keeper.decide(edit).behavior == "allow"
    keeper.set_mode("plan")
    assert keeper.decide(edit).behavior == "deny"
    with pytest.raises(UsageError):
        keeper.set_mode("nope")
    assert keeper.policy.mode == "plan"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only as root: checks the root refusal")


@needs_root
def test_bypass_refused_as_root() -> None:
    with pytest.raises(RefusedError) as caught:
        Policy.build("bypassPermissions")
    assert caught.value.code == "bypass_refused_as_root"
    assert Policy.build("bypassPermissions", agent_runs_unprivileged=True).mode == "bypassPermissions"


@needs_root
def test_set_mode_to_bypass_refused_as_root(tmp_path: Path) -> None:
    keeper = Gatekeeper(Policy.build("default"), tmp_path)
    with pytest.raises(RefusedError) as caught:
        keeper.set_mode("bypassPermissions")
    assert caught.value.code == "bypass_refused_as_root"
    assert keeper.policy.mode == "default"


def test_public_names() -> None:
    for name in baton.gates.__all__:
        assert hasattr(baton.gates, name), name
    assert {"Decision", "Gatekeeper", "Policy", "ToolCall", "Rule", "parse_rule"} <= set(baton.gates.__all__)
