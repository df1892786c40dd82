"""The OpenAI Responses API of the scripted model server, over real HTTP, shaped as Codex reads it.

Requests are built like the ones codex-acp 0.16.0 sent in a recorded session (docs/scenarios.md,
"What Codex sends"; ``input`` items: developer and user messages, ``<environment_context>``, function calls and
their outputs; ``tools`` with ``exec_command`` and the freeform ``apply_patch``).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from baton.testing import Scenario, ScriptedModelServer
from baton.testing._responses import read_conversation

TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
]


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def body(*extra: dict[str, Any], prompt: str = "go", tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "model": "gpt-5.5",
        "stream": True,
        "tools": TOOLS if tools is None else tools,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex"}]},
            user("<environment_context>\n  <cwd>/srv/work</cwd>\n  <shell>bash</shell>\n</environment_context>"),
            user(prompt),
            *extra,
        ],
    }


def result(call_id: str, output: str, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": output}


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer("write-and-run") as running:
        yield running


def post(server: ScriptedModelServer, payload: dict[str, Any]) -> tuple[int, list[dict[str, Any]] | dict[str, Any]]:
    address = urlsplit(server.base_url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
    try:
        connection.request("POST", "/v1/responses", json.dumps(payload).encode(), {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    if response.getheader("Content-Type", "").startswith("text/event-stream"):
        events = []
        for block in data.decode().split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "data" in lines:
                event = json.loads(lines["data"])
                assert event["type"] == lines["event"]
                events.append(event)
        return response.status, events
    return response.status, json.loads(data)


def items(events: Any) -> list[dict[str, Any]]:
    return [event["item"] for event in events if event["type"] == "response.output_item.done"]


def test_the_first_step_is_text_and_a_freeform_apply_patch(server: ScriptedModelServer) -> None:
    status, events = post(server, body())
    assert status == 200
    types = [event["type"] for event in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    message, patch = items(events)
    assert message["content"][0]["text"] == "I'll create hello.txt first."
    assert patch["type"] == "custom_tool_call" and patch["name"] == "apply_patch"
    assert patch["input"] == "*** Begin Patch\n*** Add File: hello.txt\n+hello from baton\n*** End Patch\n"
    usage = events[-1]["response"]["usage"]
    assert usage["input_tokens"] == 100 and usage["output_tokens"] == 20 and usage["total_tokens"] == 120
    assert server.requests[-1].step == 0 and server.requests[-1].path == "/v1/responses"


def test_tool_outputs_advance_the_scenario_and_fill_placeholders(server: ScriptedModelServer) -> None:
    patch_call = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "…"}
    _, events = post(server, body(patch_call, result("c1", "Success", "custom_tool_call_output")))
    [_, command] = items(events)
    assert command["type"] == "function_call" and command["name"] == "exec_command"
    assert json.loads(command["arguments"]) == {"cmd": "echo hi"}
    exec_call = {"type": "function_call", "call_id": "c2", "name": "exec_command", "arguments": "{}"}
    _, events = post(
        server,
        body(patch_call, result("c1", "Success", "custom_tool_call_output"), exec_call, result("c2", "Output:\nhi\n")),
    )
    [final] = items(events)
    assert final["content"][0]["text"] == "Created hello.txt and ran `echo hi`, which printed: Output:\nhi\n"
    assert [r.step for r in server.requests] == [1, 2]


def test_edit_and_read_map_onto_codex_tools_and_function_patches_when_offered() -> None:
    scenario = Scenario.from_dict(
        {
            "steps": [
                {
                    "tools": [
                        {"name": "Read", "input": {"file_path": "/srv/work/calc.js"}},
                        {
                            "name": "Edit",
                            "input": {"file_path": "/srv/work/calc.js", "old_string": "a - b", "new_string": "a + b"},
                        },
                    ]
                }
            ]
        },
        name="map",
    )
    function_patch = [TOOLS[0], {"type": "function", "name": "apply_patch", "parameters": {}}]
    with ScriptedModelServer(scenario) as server:
        _, events = post(server, body(tools=function_patch))
    read, edit = items(events)
    assert json.loads(read["arguments"]) == {"cmd": "cat calc.js"}
    assert edit["type"] == "function_call" and edit["name"] == "apply_patch"
    patch = json.loads(edit["arguments"])["input"]
    assert patch == "*** Begin Patch\n*** Update File: calc.js\n@@\n-a - b\n+a + b\n*** End Patch\n"


def test_errors_carry_openai_bodies() -> None:
    with ScriptedModelServer("api-error-500") as server:
        step_call = {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"}
        status, error = post(server, body(step_call, result("c1", "step1")))
    assert status == 500
    assert error == {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


def test_the_conversation_reader_skips_codex_context_messages() -> None:
    conversation = read_conversation(
        body(
            {"type": "function_call", "call_id": "a", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "exec_command", "arguments": "{}"},
            result("a", "one"),
            result("b", "two"),
            prompt="[scenario:plain] hello",
        )
    )
    assert conversation.prompts == ("[scenario:plain] hello",)
    assert conversation.cwd == "/srv/work"
    assert conversation.result_groups == (("one", "two"),)
    assert conversation.offers_tools
