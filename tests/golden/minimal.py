"""One minimal, hand-built entry sequence per runner-event type (``golden/events/<type>.json``).

Each sequence starts a run in ``/work/repo`` and contains just what produces its event type, so
the golden file shows the event next to the entries it comes from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .build import EntryLog

__all__ = ["MINIMAL"]

CWD = "/work/repo"
SESSION = "sess-1"


def _started() -> EntryLog:
    log = EntryLog("run-minimal")
    log.run_started(CWD)
    log.baton("agent_session", {"agent_session_id": SESSION, "adapter": "claude"})
    return log


def _set_up(*notes: dict[str, Any]) -> EntryLog:
    """A run whose workspace's setup logs ``notes`` before the agent's session starts."""
    log = EntryLog("run-minimal")
    log.run_started(CWD)
    for note in notes:
        log.baton("setup", note)
    log.baton("agent_session", {"agent_session_id": SESSION, "adapter": "claude"})
    return log


def setup_ran() -> EntryLog:
    """``--setup CMD``: its start, its output a line at a time, its end."""
    return _set_up(
        {"status": "started", "source": "option", "command": "npm ci"},
        {"status": "output", "text": "added 3 packages in 1s"},
        {"status": "output", "text": ""},
        {"status": "finished", "exit_code": 0, "duration_ms": 1042},
    )


def setup_failed() -> EntryLog:
    """A trusted repository's ``.baton/setup`` that exits 3: the run fails before its agent starts."""
    log = EntryLog("run-minimal")
    log.run_started(CWD)
    log.baton("setup", {"status": "started", "source": "trusted", "command": ".baton/setup"})
    log.baton("setup", {"status": "output", "text": "about to fail"})
    log.baton("setup", {"status": "failed", "exit_code": 3, "output": "about to fail\n", "duration_ms": 12})
    message = "the setup (.baton/setup) exited 3: about to fail"
    log.baton(
        "status",
        {"status": "failed", "reason": "workspace_setup_failed", "code": "workspace_setup_failed", "message": message},
    )
    return log


def setup_skipped() -> EntryLog:
    reason = ".baton/setup not run: /work/repo is not a trusted repository ([workspace] trusted)"
    hint = (
        'to run it, trust the repository: add "/work/repo" to trusted under [workspace] in '
        "/root/.baton/baton.toml; or give the run a setup command yourself: --setup CMD"
    )
    return _set_up({"status": "skipped", "reason": reason, "hint": hint})


def _with(method: str, params: dict[str, Any]) -> EntryLog:
    """A started run with one ``_baton/<method>`` entry."""
    log = _started()
    log.baton(method, params)
    return log


def _update(log: EntryLog, update: dict[str, Any]) -> None:
    log.notify("session/update", {"sessionId": SESSION, "update": update})


def _call(log: EntryLog, call_id: str, kind: str, title: str, raw_input: dict[str, Any], **extra: Any) -> None:
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": raw_input,
    }
    _update(log, update | extra)


def _bash(log: EntryLog, call_id: str, command: str) -> None:
    meta = {"baton": {"tool_name": "Bash", "command": command}}
    _call(log, call_id, "execute", f"`{command}`", {"command": command}, _meta=meta)


def _done(log: EntryLog, call_id: str, text: str, *, failed: bool = False, **meta: Any) -> None:
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed" if failed else "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": text}}],
        "_meta": {"baton": {"is_error": failed, **meta}},
    }
    _update(log, update)


def task_started() -> EntryLog:
    return _started()


def message() -> EntryLog:
    log = _started()
    log.request("to_agent", "session/prompt", 2, {"sessionId": SESSION, "prompt": [{"type": "text", "text": "hi"}]})
    _update(log, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello"}})
    log.add(
        "from_agent",
        "_baton/malformed_line",
        {
            "jsonrpc": "2.0",
            "method": "_baton/malformed_line",
            "params": {"line": "{not json", "stream": "stdout"},
        },
    )
    return log


def file_read() -> EntryLog:
    log = _started()
    path = f"{CWD}/src/calc.js"
    _call(log, "t1", "read", "Read src/calc.js", {"file_path": path}, locations=[{"path": path}])
    _call(log, "t2", "search", "Search `add`", {"pattern": "add"}, locations=[{"path": CWD}])
    _done(log, "t2", "src/calc.js")
    _done(log, "t1", "function add(a, b) {}")
    return log


def file_changed() -> EntryLog:
    log = _started()
    new, old = f"{CWD}/notes.txt", f"{CWD}/calc.js"
    diff_new = {"type": "diff", "path": new, "oldText": None, "newText": "hi\n"}
    diff_old = {"type": "diff", "path": old, "oldText": "a - b", "newText": "a + b"}
    _call(
        log,
        "t1",
        "edit",
        "Write notes.txt",
        {"file_path": new},
        locations=[{"path": new}],
        content=[diff_new],
    )
    _call(log, "t2", "edit", "Edit calc.js", {"file_path": old}, locations=[{"path": old}], content=[diff_old])
    _done(log, "t1", "File created")
    _done(log, "t2", "File edited")
    return log


def command_started() -> EntryLog:
    log = _started()
    _bash(log, "t1", "ls")
    return log


def command_finished() -> EntryLog:
    log = command_started()
    _done(log, "t1", "Exit code 2\nls: cannot access 'x'", failed=True)
    # A call a human approved with another command (``updated_input``): what ran is the edited one.
    _bash(log, "t2", "rm -rf one")
    _edited_approval(log, 7, "t2", {"command": "rm -rf one"}, {"command": "echo not-removing"})
    _done(log, "t2", "not-removing", exit_code=0)
    return log


def _edited_approval(
    log: EntryLog, request_id: int, call_id: str, proposed: dict[str, Any], updated: dict[str, Any]
) -> None:
    tool_call = {"toolCallId": call_id, "kind": "execute", "status": "pending", "rawInput": proposed}
    options = [{"optionId": "allow", "kind": "allow_once", "name": "Allow"}]
    asked = {"tool_name": "Bash", "input": proposed, "tool_use_id": call_id}
    params = {"sessionId": SESSION, "toolCall": tool_call, "options": options, "_meta": {"baton": asked}}
    log.request("from_agent", "session/request_permission", request_id, params)
    answer = {"decision": "allow", "reason": "human", "decided_by": "ada", "gate_id": "g7", "updated_input": updated}
    result = {"outcome": {"outcome": "selected", "optionId": "allow"}, "_meta": {"baton": answer}}
    log.respond("to_agent", "session/request_permission", request_id, result)


def test_result() -> EntryLog:
    log = _started()
    _bash(log, "t1", "cd app && npm test 2>&1 | tail -5")
    _done(log, "t1", "Tests:       1 failed, 3 passed, 4 total\nTime:        0.5 s", exit_code=0)
    return log


def gate_opened() -> EntryLog:
    return _with(
        "gate_opened",
        {
            "gate_id": "g1",
            "kind": "tool",
            "tool_call_id": "t1",
            "tool_name": "Bash",
            "bound_call_id": "t1",
            "bound_input_hash": "sha256:0f1e",
            "summary": "Bash: rm -rf build",
            "expires_at": "2026-12-01T12:00:00.000Z",
        },
    )


def gate_resolved() -> EntryLog:
    log = gate_opened()
    log.baton("gate_resolved", {"gate_id": "g1", "decision": "deny", "reason": "human", "decided_by": "ada"})
    return log


def snapshot_captured() -> EntryLog:
    return _with(
        "tree_snapshot",
        {
            "snapshot_id": "s1",
            "tree_hash": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
            "added": ["notes.txt"],
            "modified": ["calc.js"],
            "deleted": [],
            "log_seq_from": 1,
            "log_seq_to": 9,
        },
    )


def branch_created() -> EntryLog:
    """The branch a worktree run leaves, logged before its final status; the note after the status
    (a branch made once the run had ended) yields nothing: task.finished stays the last event."""
    created = {
        "branch": "baton/4r3p2n8q",
        "commit": "3f1c0d7e5b9a2c4d6e8f0a1b2c3d4e5f6a7b8c9d",
        "base": "9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c",
        "files_changed": 2,
        "insertions": 5,
        "deletions": 1,
        "skipped": [{"path": ".env", "reason": "secret"}],
        "snapshot_id": "s2",
        "repository": CWD,
    }
    log = _with("branch_created", created)
    log.baton("status", {"status": "finished", "reason": "end_turn", "stop_reason": "end_turn"})
    log.baton("branch_created", {**created, "branch": "baton/later", "commit": "0" * 40})
    return log


def mcp_called() -> EntryLog:
    """A tools/call through baton's MCP proxy: called (before its decision), then finished."""
    call = {"server": "tracker", "tool": "create_issue", "tool_call_id": "mcp_0a1b2c3d", "input": {"title": "t"}}
    log = _with("mcp_called", call)
    finished = {**call, "output": "issue #7", "is_error": False, "denied": False, "reason": "rule:mcp__tracker"}
    log.baton("mcp_finished", finished)
    return log


def mcp_finished() -> EntryLog:
    """A tools/call the policy denied: an error result for the agent, the call never made."""
    call = {"server": "tracker", "tool": "delete_repo", "tool_call_id": "mcp_9f8e7d6c", "input": {"name": "r"}}
    log = _with("mcp_called", call)
    message = "mcp__tracker__delete_repo is denied by the rule mcp__tracker__delete_*"
    denied = {**call, "output": message, "is_error": True, "denied": True, "reason": "rule:mcp__tracker__delete_*"}
    log.baton("mcp_finished", denied)
    return log


def turn_finished() -> EntryLog:
    usage = {"input_tokens": 100, "output_tokens": 20}
    return _with(
        "turn_complete", {"stop_reason": "end_turn", "usage": usage, "total_cost_usd": 0.0008, "duration_ms": 138}
    )


def task_finished() -> EntryLog:
    log = _started()
    log.baton(
        "status",
        {
            "status": "finished",
            "reason": "end_turn",
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 100, "output_tokens": 20},
            "total_cost_usd": 0.0008,
            "num_turns": 1,
            "duration_ms": 138,
            "result": "done",
        },
    )
    log.baton("turn_complete", {"stop_reason": "end_turn", "usage": None, "total_cost_usd": None, "duration_ms": 1})
    return log


def task_failed() -> EntryLog:
    return _with(
        "status",
        {
            "status": "failed",
            "reason": "agent_exited",
            "code": "agent_exited",
            "message": "Claude Code exited (1)",
        },
    )


MINIMAL: dict[str, Callable[[], EntryLog]] = {
    "setup.started": setup_ran,
    "setup.output": setup_ran,
    "setup.skipped": setup_skipped,
    "setup.finished": setup_failed,
    "task.started": task_started,
    "message": message,
    "file.read": file_read,
    "file.changed": file_changed,
    "command.started": command_started,
    "command.finished": command_finished,
    "test.result": test_result,
    "gate.opened": gate_opened,
    "gate.resolved": gate_resolved,
    "snapshot.captured": snapshot_captured,
    "branch.created": branch_created,
    "mcp.called": mcp_called,
    "mcp.finished": mcp_finished,
    "turn.finished": turn_finished,
    "task.finished": task_finished,
    "task.failed": task_failed,
}
