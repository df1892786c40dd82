"""Claude SDK stream → ACP updates → log entries → runner events, on one core.

The path production takes for every line Claude Code prints: :func:`baton.acp.wire.decode_json`
(the SDK's line parser is baton's, see ``baton.agents.claude.agent``) →
:meth:`ClaudeConverter.convert` → the ``session/update`` log entry (in memory) →
:meth:`Projector.feed`. The corpus is a realistic mix built from the recorded samples: per
turn ``system/init`` and ``status``, assistant text streamed as ``text_delta`` events and then
whole, tool calls (Write, Bash, Read, Edit) with their results, and the ``result``.
Timed in CPU time (median of 7 runs, one process, one thread). Reference: the TypeScript
runtime converts 40k parsed messages in 290–510 ms (~80–140k/s): a fixed figure
(``"reference_measured": false``), since the package's Claude message handlers are internal to
its agent's bundle, not among its exports (bench/_reference.py runs what is).
"""

from __future__ import annotations

import copy
import gc
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

from baton.acp.wire import decode_json
from baton.agents.claude.convert import ClaudeConverter, stop_reason_for, usage_params
from baton.events.entry import LogEntry
from baton.events.project import Projector

from . import Metric, median_seconds

__all__ = ["METRICS", "build_corpus", "run"]

METRICS = ("claude_convert_msgs_per_s", "claude_convert_peak_mb")
MESSAGES = 120_000
SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "golden" / "samples"
RUN_ID = "run-bench"
TS = "2026-11-30T12:00:00.000Z"


def _sample(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / f"{name}.jsonl").read_text().splitlines() if line]


def build_corpus(count: int = MESSAGES) -> list[str]:
    """``count`` JSON lines of whole turns, each with fresh message and tool ids."""
    basic = _sample("claude-stream-basic")
    partial = _sample("claude-partial-messages")
    init, result = basic[0], basic[-1]
    status = partial[1]
    start, block_start, text_delta = partial[2], partial[3], partial[4]
    block_stop, message_delta, message_stop = partial[8], partial[9], partial[10]
    text_msg, tool_msg, write_result, bash_result = basic[1], basic[2], basic[3], basic[6]
    cwd = init["cwd"]
    tools = [
        ("Write", {"file_path": f"{cwd}/src/app.js", "content": "export const x = 1;\n"}, write_result),
        ("Bash", {"command": "npm test 2>&1 | tail -5", "description": "Run tests"}, bash_result),
        ("Read", {"file_path": f"{cwd}/src/app.js"}, bash_result),
        ("Edit", {"file_path": f"{cwd}/src/app.js", "old_string": "1", "new_string": "2"}, write_result),
    ]
    words = [
        "Let",
        "me",
        "look",
        "at",
        "the",
        "failing",
        "test",
        "and",
        "fix",
        "the",
        "add",
        "function",
        "in",
        "calc.js",
        "now",
    ]
    lines: list[str] = []
    turn = 0
    while len(lines) < count:
        turn += 1
        lines += [json.dumps(init), json.dumps(status)]
        for step, (name, tool_input, result_template) in enumerate(tools):
            message_id = f"msg_{turn}_{step}"
            tool_id = f"toolu_{turn}_{step}"
            lines.append(json.dumps(_with(start, api_message_id=message_id)))
            lines.append(json.dumps(_with(block_start, api_message_id=message_id)))
            for word in words[:8]:
                delta = copy.deepcopy(text_delta)
                delta["event"]["delta"]["text"] = word + " "
                delta["api_message_id"] = message_id
                lines.append(json.dumps(delta))
            text = copy.deepcopy(text_msg)
            text["message"]["id"] = message_id
            text["message"]["content"][0]["text"] = " ".join(words[:8]) + " "
            lines += [json.dumps(text), json.dumps(_with(block_stop, api_message_id=message_id))]
            call = copy.deepcopy(tool_msg)
            call["message"]["id"] = message_id
            call["message"]["content"][0] = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
            lines += [json.dumps(call), json.dumps(message_delta), json.dumps(message_stop)]
            answer = copy.deepcopy(result_template)
            answer["message"]["content"][0]["tool_use_id"] = tool_id
            answer["tool_result_meta"][0]["id"] = tool_id
            lines.append(json.dumps(answer))
        final = copy.deepcopy(text_msg)
        final["message"]["id"] = f"msg_{turn}_final"
        final["message"]["content"][0]["text"] = "All tests pass now."
        lines += [json.dumps(final), json.dumps(result)]
    return lines[:count]


def _with(message: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**message, **changes}


def convert_and_project(lines: list[str]) -> int:
    """The production path for one session's stream; returns the number of runner events."""
    loads = decode_json
    converter = ClaudeConverter("/home/dev/work2")
    convert = converter.convert
    projector = Projector(RUN_ID, cwd="/home/dev/work2")
    feed = projector.feed
    session = "sess-bench"
    seq = 0
    produced = 0
    for line in lines:
        msg = loads(line)
        for update in convert(msg):
            seq += 1
            payload = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}
            entry: LogEntry = {
                "run_id": RUN_ID,
                "seq": seq,
                "ts": TS,
                "direction": "from_agent",
                "method": "session/update",
                "payload": payload,
            }
            produced += len(feed(entry))
        if msg.get("type") == "result":
            params = usage_params(msg, session_id=session)
            turn = {
                "stop_reason": stop_reason_for(msg, cancel_requested=False),
                "usage": params["usage"],
                "total_cost_usd": params["total_cost_usd"],
                "duration_ms": params["duration_ms"],
            }
            for direction, method, body in (
                ("from_agent", "_baton/usage", params),
                ("baton", "_baton/turn_complete", turn),
            ):
                seq += 1
                note = {"jsonrpc": "2.0", "method": method, "params": body}
                produced += len(
                    feed(
                        {
                            "run_id": RUN_ID,
                            "seq": seq,
                            "ts": TS,
                            "direction": direction,
                            "method": method,
                            "payload": note,
                        }
                    )  # type: ignore[typeddict-item]
                )
    return produced


def run() -> dict[str, Metric]:
    lines = build_corpus()
    seconds = median_seconds(lambda: convert_and_project(lines), runs=7, clock=time.process_time)
    gc.collect()
    tracemalloc.start()
    convert_and_project(lines)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "claude_convert_msgs_per_s": {
            "value": round(len(lines) / seconds),
            "unit": "msg/s",
            "target": 130_000,
            "better": "higher",
            "reference": 110_000,
        },
        "claude_convert_peak_mb": {
            "value": round(peak / 1e6, 2),
            "unit": "MB",
            "target": 32,
            "better": "lower",
            "reference": None,
        },
    }
