"""Log entries → runner events (docs/design.md "Runner events v1"; docs/events.md).

Pure and agent-agnostic: a :class:`Projector` reads one run's entries in ``seq`` order and
returns the events each one yields; the same entries always give the same events with the same
``seq``. Events of one entry keep the order of the event table; nothing follows
``task.finished`` or ``task.failed``; replayed history (``_meta.baton.replay``) yields nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, TypedDict, get_args

from baton.events._tool_calls import Produced, ToolCalls
from baton.events.entry import LogEntry

__all__ = ["EVENT_TYPES", "SETUP_LINE_CHARS", "SETUP_OUTPUT_LINES", "EventType", "Projector", "RunnerEvent", "project"]

EventType = Literal[
    "setup.started",
    "setup.output",
    "setup.skipped",
    "setup.finished",
    "task.started",
    "message",
    "file.read",
    "file.changed",
    "command.started",
    "command.finished",
    "test.result",
    "gate.opened",
    "gate.resolved",
    "snapshot.captured",
    "branch.created",
    "mcp.called",
    "mcp.finished",
    "turn.finished",
    "task.finished",
    "task.failed",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)


class RunnerEvent(TypedDict):
    run_id: str
    seq: int
    log_seq: int
    ts: str
    type: str
    data: dict[str, Any]
    raw: dict[str, Any]


_Handler = Callable[[dict[str, Any], str], Produced]
_REJECT_KINDS = frozenset({"reject_once", "reject_always"})
_CHUNK_ROLES = {"agent_message_chunk": "agent", "user_message_chunk": "user"}
# The setup's output as events: at most this many lines a setup (the log keeps every line), each
# at most this many characters; the lines left out are counted in ``setup.finished``.
SETUP_OUTPUT_LINES = 1000
SETUP_LINE_CHARS = 8 * 1024
# Notifications baton's gate and snapshot code log; their params are the event's data.
_PASS_THROUGH = {
    "_baton/gate_opened": (
        "gate.opened",
        (
            "gate_id",
            "kind",
            "tool_call_id",
            "tool_name",
            "bound_call_id",
            "bound_input_hash",
            "summary",
            "expires_at",
        ),
    ),
    "_baton/gate_resolved": ("gate.resolved", ("gate_id", "decision", "reason", "decided_by")),
    "_baton/tree_snapshot": (
        "snapshot.captured",
        ("snapshot_id", "tree_hash", "added", "modified", "deleted", "log_seq_from", "log_seq_to"),
    ),
    "_baton/branch_created": (
        "branch.created",
        ("branch", "commit", "base", "files_changed", "insertions", "deletions", "skipped"),
    ),
    # baton's MCP proxy (baton.mcp): a tools/call as the agent made it, and how it ended.
    "_baton/mcp_called": ("mcp.called", ("server", "tool", "tool_call_id", "input")),
    "_baton/mcp_finished": (
        "mcp.finished",
        ("server", "tool", "tool_call_id", "input", "output", "is_error", "denied", "reason"),
    ),
}


class Projector:
    """Stateful projection of one run; feed it every entry of the run in ``seq`` order."""

    def __init__(self, run_id: str, cwd: str | None = None) -> None:
        self.run_id = run_id
        self.seq = 0
        self.ended = False
        self._run: dict[str, Any] = {}
        self._started = False
        self._tools = ToolCalls(_normal(cwd))
        self._permissions: dict[Any, tuple[Any, Any, Any, dict[str, str], Any]] = {}
        self._setup_lines = 0  # lines of the current setup given as events
        self._setup_omitted = 0  # and those left out
        self._setup_ts: str | None = None  # when it started (a duration for an older note without one)
        self._handlers: dict[str, _Handler] = {
            "session/prompt": self._prompt,
            "session/request_permission": self._permission,
            "_baton/malformed_line": self._malformed,
            "_baton/run_started": self._run_started,
            "_baton/agent_session": self._agent_session,
            "_baton/turn_complete": self._turn_complete,
            "_baton/status": self._status,
            "_baton/net": self._net,
        }
        for method, (event_type, fields) in _PASS_THROUGH.items():
            self._handlers[method] = _pass_through(event_type, fields)

    @property
    def cwd(self) -> str | None:
        return self._tools.cwd

    def feed(self, entry: LogEntry) -> list[RunnerEvent]:
        if self.ended:
            return []
        payload = entry["payload"]
        params = payload.get("params")
        if params and type(params) is dict and params.get("_meta") and _replayed(params["_meta"]):
            return []
        method = entry["method"]
        if method == "session/update":  # most entries: keep this path short
            update = params.get("update") if type(params) is dict else None
            produced = self._session_update(update) if type(update) is dict else None
        elif method == "_baton/setup":
            produced = self._setup(_params(payload), entry["ts"])
        else:
            handler = self._handlers.get(method) if method is not None else None
            produced = handler(payload, entry["direction"]) if handler is not None else None
        if not produced:
            return []
        events: list[RunnerEvent] = []
        run_id, log_seq, ts = self.run_id, entry["seq"], entry["ts"]
        for event_type, data in produced:
            self.seq += 1
            events.append(
                {
                    "run_id": run_id,
                    "seq": self.seq,
                    "log_seq": log_seq,
                    "ts": ts,
                    "type": event_type,
                    "data": data,
                    "raw": payload,
                }
            )
            if event_type == "task.finished" or event_type == "task.failed":
                self.ended = True
                break
        return events

    # -- the ACP conversation ----------------------------------------------------------------

    def _session_update(self, update: dict[str, Any]) -> Produced | None:
        meta = update.get("_meta")
        if meta and type(meta) is dict:
            baton = meta.get("baton")
            if baton and type(baton) is dict and baton.get("replay") is True:
                return None
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" or kind == "user_message_chunk":
            content = update.get("content")
            text = content.get("text") if type(content) is dict else None
            if text and type(text) is str:
                return [("message", {"role": _CHUNK_ROLES[kind], "text": text})]
            return None
        if kind == "tool_call" or kind == "tool_call_update":
            return self._tools.on_update(update)
        return None

    def _prompt(self, payload: dict[str, Any], direction: str) -> Produced:
        params = payload.get("params")
        if direction != "to_agent" or not isinstance(params, dict):
            return []  # the response: the turn ends with _baton/turn_complete
        blocks = params.get("prompt")
        texts = [b["text"] for b in blocks or () if isinstance(b, dict) and isinstance(b.get("text"), str)]
        text = "\n".join(texts)
        return [("message", {"role": "user", "text": text})] if text else []

    def _permission(self, payload: dict[str, Any], direction: str) -> Produced:
        request_id = payload.get("id")
        params = payload.get("params")
        if isinstance(params, dict):  # the agent asks
            tool_call = params.get("toolCall")
            tool_call = tool_call if isinstance(tool_call, dict) else {}
            baton = _baton_meta(params)
            tool = baton.get("tool_name")
            options = {
                str(o.get("optionId")): str(o.get("kind")) for o in params.get("options") or () if isinstance(o, dict)
            }
            title = tool_call.get("title")
            proposed = baton.get("input") if isinstance(baton.get("input"), dict) else tool_call.get("rawInput")
            self._permissions[request_id] = (tool_call.get("toolCallId"), tool, title, options, proposed)
            self._tools.on_request(tool_call, baton.get("command"))
            return []
        call_id, tool, title, options, proposed = self._permissions.pop(request_id, (None, None, None, {}, None))
        result = payload.get("result")
        if not isinstance(result, dict):
            return []
        baton = _baton_meta(result)
        outcome = result.get("outcome")
        outcome = outcome if isinstance(outcome, dict) else {}
        decision = baton.get("decision")
        if decision is not None:
            denied = decision == "deny"
        elif outcome.get("outcome") == "cancelled":
            denied = True
        else:
            denied = options.get(str(outcome.get("optionId"))) in _REJECT_KINDS
        if not denied:
            updated = baton.get("updated_input")
            if decision == "allow" and isinstance(updated, dict) and updated != proposed:  # a human edited the call
                return self._tools.edit(call_id, updated, edited_by=baton.get("decided_by"), proposed=proposed)
            return []
        self._tools.deny(call_id)
        reason = baton.get("message") or baton.get("reason")  # the words shown to the agent first
        if not reason:
            reason = "cancelled" if outcome.get("outcome") == "cancelled" else "denied"
        tool = tool or self._tools.tool_name(call_id) or title
        return [("message", {"role": "user", "text": str(reason), "denied": True, "tool": tool})]

    def _net(self, payload: dict[str, Any], direction: str) -> Produced:
        """A connection the sandbox's allow-list proxy refused: the human sees it (docs/sandbox.md)."""
        params = payload.get("params")
        if not isinstance(params, dict) or params.get("allowed") is not False:
            return []
        reason = params.get("reason") or "not on the allow-list"
        return [("message", {"role": "user", "text": str(reason), "denied": True, "tool": "network"})]

    def _malformed(self, payload: dict[str, Any], direction: str) -> Produced:
        params = payload.get("params")
        line = params.get("line") if isinstance(params, dict) else None
        return [("message", {"role": "agent", "text": line if isinstance(line, str) else "", "malformed": True})]

    # -- baton's run-level notifications ----------------------------------------------------

    def _setup(self, params: dict[str, Any], ts: str) -> Produced:
        """The workspace's setup (docs/workspaces.md "Setup"): its start, its output a line at a
        time (bounded), its end; or why a repository's ``.baton/setup`` did not run."""
        status = params.get("status")
        if status == "started":
            self._setup_lines = self._setup_omitted = 0
            self._setup_ts = ts
            return [("setup.started", {"source": params.get("source"), "command": params.get("command")})]
        if status == "output":
            if self._setup_lines >= SETUP_OUTPUT_LINES:
                self._setup_omitted += 1
                return []
            self._setup_lines += 1
            text = params.get("text")
            return [("setup.output", {"text": text[:SETUP_LINE_CHARS] if isinstance(text, str) else ""})]
        if status == "finished" or status == "failed":
            duration = params.get("duration_ms")
            if not isinstance(duration, int) and self._setup_ts is not None:
                duration = _millis_between(self._setup_ts, ts)
            data = {
                "status": status,
                "exit_code": params.get("exit_code"),
                "duration_ms": duration if isinstance(duration, int) else None,
                "output_lines_omitted": self._setup_omitted,
            }
            self._setup_ts = None
            return [("setup.finished", data)]
        if status == "skipped":
            return [("setup.skipped", {"reason": params.get("reason"), "hint": params.get("hint")})]
        return []

    def _run_started(self, payload: dict[str, Any], direction: str) -> Produced:
        params = payload.get("params")
        if isinstance(params, dict):
            self._run = params
            cwd = params.get("cwd")
            if isinstance(cwd, str) and cwd:
                self._tools.cwd = _normal(cwd)
        return []

    def _agent_session(self, payload: dict[str, Any], direction: str) -> Produced:
        if self._started:
            return []  # a resumed session: the task started long ago
        self._started = True
        params = payload.get("params")
        session_id = params.get("agent_session_id") if isinstance(params, dict) else None
        run = self._run
        data = {
            "agent": run.get("agent"),
            "model": run.get("model"),
            "cwd": run.get("cwd", self._tools.cwd),
            "agent_session_id": session_id,
            "permission_mode": run.get("permission_mode"),
            "run_mode": run.get("run_mode"),
        }
        return [("task.started", data)]

    def _turn_complete(self, payload: dict[str, Any], direction: str) -> Produced:
        params = _params(payload)
        keys = ("stop_reason", "usage", "total_cost_usd", "duration_ms")
        return [("turn.finished", {key: params.get(key) for key in keys})]

    def _status(self, payload: dict[str, Any], direction: str) -> Produced:
        params = _params(payload)
        status = params.get("status")
        if status == "finished" or status == "cancelled":
            data: dict[str, Any] = {
                "stop_reason": params.get("stop_reason") or ("cancelled" if status == "cancelled" else None),
                "usage": params.get("usage"),
                "total_cost_usd": params.get("total_cost_usd"),
                "num_turns": params.get("num_turns"),
                "duration_ms": params.get("duration_ms"),
            }
            if params.get("result") is not None:
                data["result"] = params["result"]
            return [("task.finished", data)]
        if status == "failed":
            data = {"code": params.get("code") or "agent_error", "message": params.get("message") or ""}
            for key in ("usage", "total_cost_usd"):
                if params.get(key) is not None:
                    data[key] = params[key]
            return [("task.failed", data)]
        return []


def project(entries: Iterable[LogEntry]) -> list[RunnerEvent]:
    """Every runner event of one run's entries (the run id is the first entry's)."""
    projector: Projector | None = None
    events: list[RunnerEvent] = []
    for entry in entries:
        if projector is None:
            projector = Projector(entry["run_id"])
        events.extend(projector.feed(entry))
    return events


def _pass_through(event_type: str, fields: tuple[str, ...]) -> _Handler:
    def handle(payload: dict[str, Any], direction: str) -> Produced:
        params = _params(payload)
        return [(event_type, {key: params[key] for key in fields if key in params})]

    return handle


def _params(payload: dict[str, Any]) -> dict[str, Any]:
    params = payload.get("params")
    return params if isinstance(params, dict) else {}


def _baton_meta(holder: dict[str, Any]) -> dict[str, Any]:
    meta = holder.get("_meta")
    baton = meta.get("baton") if isinstance(meta, dict) else None
    return baton if isinstance(baton, dict) else {}


def _replayed(meta: Any) -> bool:
    baton = meta.get("baton") if isinstance(meta, dict) else None
    return isinstance(baton, dict) and baton.get("replay") is True


def _millis_between(start: str, end: str) -> int | None:
    try:
        took = datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(start.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(took.total_seconds() * 1000)


def _normal(cwd: str | None) -> str | None:
    return posixpath.normpath(cwd) if cwd else None
