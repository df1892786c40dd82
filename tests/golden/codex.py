"""The log baton records for a recorded codex-acp conversation (golden fixtures).

The recordings (``samples/codex-acp-*.jsonl``, ``{"t", "dir": "->"|"<-", "msg"}``) are the
wire between a probe client and the real codex-acp 0.16.0. Around them go the entries baton's
executor adds (``_baton/run_started``, ``status``, ``agent_session`` after ``session/new``,
``turn_complete`` after each prompt response, the closing ``status``); every message from the
agent is annotated as baton's host does (``_meta.baton.command`` / ``tool_name``), and
responses are logged with the method of the request they answer, as the tapping transport does.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from baton.acp.host import annotate
from baton.agents.registry import AGENTS, CODEX, AgentEntry
from baton.events.entry import LogEntry

from .build import GOLDEN, EntryLog

__all__ = ["ACP_SAMPLES", "CODEX_SAMPLES", "build_codex_sample"]

CODEX_SAMPLES = ("codex-acp-allow", "codex-acp-reject")
# Other agents' recordings, built the same way: sample name → registry agent.
ACP_SAMPLES = {"claude-agent-acp-allow": "claude-acp", "gemini-acp-allow": "gemini", "opencode-acp-allow": "opencode"}


def build_codex_sample(name: str, entry: AgentEntry | None = None) -> list[LogEntry]:
    entry = entry or (AGENTS[ACP_SAMPLES[name]] if name in ACP_SAMPLES else CODEX)
    lines = (GOLDEN / "samples" / f"{name}.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    log = EntryLog()
    cwd = next(r["msg"]["params"]["cwd"] for r in records if r["msg"].get("method") == "session/new")
    log.add("baton", "_baton/run_started", _run_started(cwd, entry.name))
    log.baton("status", {"status": "running", "reason": "started"})
    requests: dict[tuple[str, Any], str] = {}
    usage: dict[str, Any] | None = None
    stop_reason = "end_turn"
    for record in records:
        message = copy.deepcopy(record["msg"])
        direction = "to_agent" if record["dir"] == "->" else "from_agent"
        method = message.get("method")
        if method is not None and "id" in message:
            requests[(direction, message["id"])] = method
        if method is None:
            asker = "from_agent" if direction == "to_agent" else "to_agent"
            method = requests.pop((asker, message.get("id")), None)
        if direction == "from_agent":
            annotate(message, entry.tool_names, entry.annotation)
            update = (message.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate") == "usage_update":
                usage = {key: value for key, value in update.items() if key != "sessionUpdate"}
        log.add(direction, method, message)
        if method == "session/new" and direction == "from_agent":
            session = message["result"]["sessionId"]
            log.baton("agent_session", {"agent_session_id": session, "adapter": entry.name})
        if method == "session/prompt" and direction == "from_agent":
            stop_reason = message["result"]["stopReason"]
            turn = {"stop_reason": stop_reason, "usage": usage, "total_cost_usd": None, "duration_ms": None}
            log.baton("turn_complete", turn)
    log.baton(
        "status",
        {
            "status": "finished",
            "reason": stop_reason,
            "stop_reason": stop_reason,
            "num_turns": None,
            "result": None,
            "usage": usage,
            "total_cost_usd": None,
            "duration_ms": None,
        },
    )
    return log.entries


def _run_started(cwd: str, agent: str) -> dict[str, Any]:
    params = {
        "run_id": "run-golden",
        "task_id": None,
        "agent": agent,
        "model": None,
        "cwd": cwd,
        "permission_mode": "default",
        "run_mode": "background",
    }
    return {"jsonrpc": "2.0", "method": "_baton/run_started", "params": params}
