"""The log a run of baton would record for a recorded Claude SDK stream (golden fixtures).

A recorded stream (``samples/*.jsonl``) goes through :class:`ClaudeConverter`, and the entries
around it are the ones baton's host and Claude adapter log: ``_baton/run_started``,
``_baton/status running``, ``_baton/agent_session``, per turn a ``session/prompt`` request, the
``session/update`` notifications, a ``session/request_permission`` round trip for every tool call
(denied where the recording shows a denial), ``_baton/usage``, the prompt response (an error
for a failed turn) and ``_baton/turn_complete``, and last the ``_baton/status`` that ends the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.agents.claude.convert import ClaudeConverter, stop_reason_for, usage_params
from baton.events.entry import Direction, LogEntry

__all__ = ["GOLDEN", "RUN_ID", "SAMPLES", "EntryLog", "build_sample", "load_sample"]

GOLDEN = Path(__file__).parent
RUN_ID = "run-golden"
# The prompts of each recorded turn (the recordings hold only Claude's side).
SAMPLES: dict[str, list[str]] = {
    "claude-stream-basic": ["Create hello.txt and run echo hi"],
    "claude-permission-denied": ["SCENARIO:bash:touch marker1.txt"],
    "claude-error500": ["SCENARIO:plain hello"],
    "claude-multiturn-stdin": ["SCENARIO:plain hello", "Create hello.txt and run echo hi"],
    "claude-partial-messages": ["SCENARIO:plain hello"],
}


class EntryLog:
    """Log entries with ``seq`` 1, 2, 3 … and a deterministic ``ts`` (1 ms apart)."""

    def __init__(self, run_id: str = RUN_ID) -> None:
        self.run_id = run_id
        self.entries: list[LogEntry] = []

    def add(self, direction: Direction, method: str | None, payload: dict[str, Any]) -> LogEntry:
        seq = len(self.entries) + 1
        ts = f"2026-11-30T12:00:{seq // 1000:02d}.{seq % 1000:03d}Z"
        entry: LogEntry = {
            "run_id": self.run_id,
            "seq": seq,
            "ts": ts,
            "direction": direction,
            "method": method,
            "payload": payload,
        }
        self.entries.append(entry)
        return entry

    def baton(self, name: str, params: dict[str, Any]) -> LogEntry:
        return self.add("baton", f"_baton/{name}", {"jsonrpc": "2.0", "method": f"_baton/{name}", "params": params})

    def notify(self, method: str, params: dict[str, Any], direction: Direction = "from_agent") -> LogEntry:
        return self.add(direction, method, {"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, direction: Direction, method: str, request_id: Any, params: dict[str, Any]) -> LogEntry:
        return self.add(direction, method, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    def respond(
        self, direction: Direction, method: str, request_id: Any, result: Any = None, error: Any = None
    ) -> LogEntry:
        payload: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            payload["error"] = error
        else:
            payload["result"] = result
        return self.add(direction, method, payload)

    def run_started(self, cwd: str, *, model: str | None = "claude-opus-5-5", mode: str = "default") -> None:
        self.baton(
            "run_started",
            {
                "run_id": self.run_id,
                "task_id": None,
                "agent": "claude",
                "model": model,
                "cwd": cwd,
                "permission_mode": mode,
                "run_mode": "background",
            },
        )
        self.baton("status", {"status": "running", "reason": "started"})


def load_sample(name: str) -> list[dict[str, Any]]:
    lines = (GOLDEN / "samples" / f"{name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def build_sample(name: str) -> tuple[list[dict[str, Any]], list[LogEntry]]:
    """The sample's ACP updates (in order) and the log entries of the whole run."""
    messages = load_sample(name)
    prompts = iter(SAMPLES[name])
    init = next(m for m in messages if m.get("type") == "system" and m.get("subtype") == "init")
    cwd, session, mode = init["cwd"], init["session_id"], init["permissionMode"]
    denials = _denials(messages)
    log = EntryLog()
    log.run_started(cwd, model=init["model"], mode=mode)
    log.baton("agent_session", {"agent_session_id": session, "adapter": "claude"})
    converter = ClaudeConverter(cwd)
    updates: list[dict[str, Any]] = []
    prompt_id, permission_id = 1, 0
    in_turn = False
    last: dict[str, Any] | None = None
    for message in messages:
        if not in_turn and message.get("type") == "system" and message.get("subtype") == "init":
            prompt_id += 1
            prompt = [{"type": "text", "text": next(prompts)}]
            log.request("to_agent", "session/prompt", prompt_id, {"sessionId": session, "prompt": prompt})
            in_turn = True
        for update in converter.convert(message):
            updates.append(update)
            log.notify("session/update", {"sessionId": session, "update": update})
            if update["sessionUpdate"] == "tool_call":
                _permission(log, permission_id, session, update, denials, mode)
                permission_id += 1
        if message.get("type") == "result":
            in_turn = False
            last = message
            params = usage_params(message, session_id=session)
            log.notify("_baton/usage", params)
            if params["is_error"]:
                text = str(message.get("result") or message.get("subtype"))
                error = {"code": -32603, "message": text, "data": {"code": "agent_error", "message": text}}
                log.respond("from_agent", "session/prompt", prompt_id, error=error)
                status = {"status": "failed", "reason": "agent_error", "code": "agent_error", "message": text}
                status |= {"usage": params["usage"], "total_cost_usd": params["total_cost_usd"]}
                status["duration_ms"] = params["duration_ms"]
                log.baton("status", status)
                return updates, log.entries
            stop_reason = stop_reason_for(message, cancel_requested=False)
            log.respond("from_agent", "session/prompt", prompt_id, result={"stopReason": stop_reason})
            turn = {key: params[key] for key in ("usage", "total_cost_usd", "duration_ms")}
            log.baton("turn_complete", {"stop_reason": stop_reason, **turn})
    assert last is not None, f"{name} has no result"
    log.baton(
        "status",
        {
            "status": "finished",
            "reason": "end_turn",
            "stop_reason": stop_reason_for(last, cancel_requested=False),
            "num_turns": last.get("num_turns"),
            "result": last.get("result"),
            "usage": last.get("usage"),
            "total_cost_usd": last.get("total_cost_usd"),
            "duration_ms": last.get("duration_ms"),
        },
    )
    return updates, log.entries


def _denials(messages: list[dict[str, Any]]) -> dict[str, str]:
    """tool_use_id → Claude's denial message, wherever the recording shows one."""
    denied: dict[str, str] = {}
    for message in messages:
        if message.get("type") == "system" and message.get("subtype") == "permission_denied":
            denied[message["tool_use_id"]] = message.get("message", "")
        for meta in message.get("tool_result_meta") or ():
            if (meta.get("permission_decision") or {}).get("decision") == "reject":
                denied.setdefault(meta["id"], "rejected")
    return denied


def _permission(
    log: EntryLog, request_id: int, session: str, call: dict[str, Any], denials: dict[str, str], mode: str
) -> None:
    call_id = call["toolCallId"]
    tool_name = call["_meta"]["baton"]["tool_name"]
    params = {
        "sessionId": session,
        "toolCall": {
            "toolCallId": call_id,
            "title": call["title"],
            "kind": call["kind"],
            "rawInput": call["rawInput"],
            "status": "pending",
        },
        "options": [
            {"optionId": "allow", "kind": "allow_once", "name": "Allow"},
            {"optionId": "reject", "kind": "reject_once", "name": "Reject"},
        ],
        "_meta": {
            "baton": {
                "tool_name": tool_name,
                "input": call["rawInput"],
                "tool_use_id": call_id,
                "kind": call["kind"],
            }
        },
    }
    log.request("from_agent", "session/request_permission", request_id, params)
    denial = denials.get(call_id)
    option = "reject" if denial is not None else "allow"
    baton = {"decision": "deny" if denial is not None else "allow", "reason": f"mode:{mode}"}
    if denial is not None:
        baton["message"] = denial
    result = {"outcome": {"outcome": "selected", "optionId": option}, "_meta": {"baton": baton}}
    log.respond("to_agent", "session/request_permission", request_id, result=result)
