"""The host with a registry entry: Codex's calls in baton's names, decisions bound to the input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp.schema import PermissionOption, ToolCallUpdate
from tests.golden.build import GOLDEN

from baton.acp.host import BatonHost, annotate
from baton.agents.registry import CODEX, bound_input_hash, codex_bound_input
from baton.gates import Gatekeeper, Policy


def _sample_requests(name: str) -> list[dict[str, Any]]:
    lines = (GOLDEN / "samples" / f"{name}.jsonl").read_text().splitlines()
    messages = [json.loads(line)["msg"] for line in lines]
    return [m["params"] for m in messages if m.get("method") == "session/request_permission"]


async def _nothing() -> None:
    return None


def _options() -> list[PermissionOption]:
    return [
        PermissionOption(option_id="approved", name="Yes", kind="allow_once"),
        PermissionOption(option_id="abort", name="No", kind="reject_once"),
    ]


def _exec_call(command: str, call_id: str, turn_id: str) -> ToolCallUpdate:
    raw = {
        "call_id": call_id,
        "turn_id": turn_id,
        "started_at_ms": 1,
        "command": ["/bin/bash", "-lc", command],
        "cwd": "/w",
    }
    return ToolCallUpdate(tool_call_id=call_id, kind="execute", title=command, raw_input=raw)


async def test_a_command_is_decided_as_bash_and_bound_without_volatile_ids(tmp_path: Path) -> None:
    host = BatonHost(Gatekeeper(Policy.build("default", allow=["Bash(npm test:*)"]), tmp_path), _nothing, agent=CODEX)
    first = await host.request_permission(_options(), "s", _exec_call("npm test", "call_1", "turn_1"))
    again = await host.request_permission(_options(), "s", _exec_call("npm test", "call_2", "turn_2"))
    other = await host.request_permission(_options(), "s", _exec_call("rm -rf build", "call_3", "turn_2"))
    meta = [response.field_meta["baton"] for response in (first, again, other)]  # type: ignore[index]
    assert first.outcome.option_id == "approved" and other.outcome.option_id == "abort"  # type: ignore[union-attr]
    assert [m["decision"] for m in meta] == ["allow", "allow", "deny"]
    assert meta[0]["reason"] == "rule:Bash(npm test:*)" and meta[0]["tool_name"] == "Bash"
    assert meta[0]["bound_input_hash"] == meta[1]["bound_input_hash"] != meta[2]["bound_input_hash"]
    assert [m["bound_call_id"] for m in meta] == ["call_1", "call_2", "call_3"]


def test_the_recorded_patch_proposals_hash_by_content_not_by_ids() -> None:
    allow, reject = _sample_requests("codex-acp-allow")[0], _sample_requests("codex-acp-reject")[0]
    assert allow["toolCall"]["rawInput"]["call_id"] != reject["toolCall"]["rawInput"]["call_id"]
    bound = codex_bound_input(allow["toolCall"])
    assert bound == {
        "kind": "edit",
        "changes": {"/home/dev/acpwork2/hello.txt": {"type": "add", "content": "hello from fake model\n"}},
    }
    assert bound_input_hash(bound) == bound_input_hash(codex_bound_input(reject["toolCall"]))
    # RFC 8785: key order and number spelling do not change the hash.
    assert bound_input_hash({"b": 1.0, "a": [2]}) == bound_input_hash({"a": [2], "b": 1})


async def test_a_patch_of_several_files_takes_the_strictest_decision(tmp_path: Path) -> None:
    host = BatonHost(Gatekeeper(Policy.build("acceptEdits"), tmp_path), _nothing, agent=CODEX)
    changes = {
        str(tmp_path / "a.txt"): {"type": "add", "content": "a"},
        str(tmp_path / ".git" / "config"): {"type": "update", "unified_diff": "@@"},
    }
    call = ToolCallUpdate(
        tool_call_id="call_p", kind="edit", title="Edit", raw_input={"call_id": "call_p", "changes": changes}
    )
    response = await host.request_permission(_options(), "s", call)
    baton = response.field_meta["baton"]  # type: ignore[index]
    assert baton["decision"] == "deny" and baton["reason"] == "no_human"  # a host with nobody to ask
    assert "protected" in baton["message"] or ".git" in baton["message"]


async def test_a_cancelled_turn_answers_pending_requests_cancelled(tmp_path: Path) -> None:
    host = BatonHost(Gatekeeper(Policy.build("default", allow=["Bash"]), tmp_path), _nothing, agent=CODEX)
    host.cancel_pending()
    response = await host.request_permission(_options(), "s", _exec_call("echo hi", "call_c", "t"))
    assert response.outcome.outcome == "cancelled"
    assert response.field_meta["baton"]["reason"] == "cancelled"  # type: ignore[index]
    host.turn_started()
    response = await host.request_permission(_options(), "s", _exec_call("echo hi", "call_d", "t"))
    assert response.outcome.option_id == "approved"  # type: ignore[union-attr]


def test_argv_commands_are_normalized_into_one_string_for_the_projection() -> None:
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_x",
        "kind": "execute",
        "rawInput": {"command": ["/bin/bash", "-lc", "npm test 2>&1 | tail -5"], "call_id": "call_x"},
    }
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
    annotate(message, CODEX.tool_names)
    assert update["_meta"] == {"baton": {"command": "npm test 2>&1 | tail -5", "tool_name": "Bash"}}
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/request_permission",
        "params": {"sessionId": "s", "toolCall": {"toolCallId": "p", "rawInput": {"changes": {"/w/a": {}}}}},
    }
    annotate(request, CODEX.tool_names)
    assert request["params"]["_meta"] == {"baton": {"tool_name": "Edit"}}
