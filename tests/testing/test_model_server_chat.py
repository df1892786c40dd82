"""The OpenAI Chat Completions API of the scripted model server, over real HTTP, shaped as Qwen Code
0.24 sends it (docs/scenarios.md, "Chat Completions"): a system prompt, a user message whose text
parts are Qwen Code's ``<system-reminder>`` context (with the working directory) and the prompt,
then assistant tool calls and ``tool`` results."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from baton.testing import Scenario, ScriptedModelServer
from baton.testing._chat import read_conversation

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {}}}
    for name in ("run_shell_command", "write_file", "edit", "read_file", "glob", "grep_search")
]
CONTEXT = (
    "<system-reminder>\nThis is the Qwen Code. We are setting up the context for our chat.\n"
    "I'm currently working in the directory: /srv/work\nHere is the folder structure\n</system-reminder>"
)


def body(*extra: dict[str, Any], prompt: str = "go", stream: bool = True) -> dict[str, Any]:
    parts = [
        {"type": "text", "text": "<system-reminder>\nskills\n</system-reminder>"},
        {"type": "text", "text": CONTEXT},
    ]
    return {
        "model": "qwen3-coder-plus",
        "stream": stream,
        "stream_options": {"include_usage": True},
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You are Qwen Code"},
            {"role": "user", "content": [*parts, {"type": "text", "text": prompt}]},
            *extra,
        ],
    }


def called(call_id: str, name: str) -> dict[str, Any]:
    function = {"name": name, "arguments": "{}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": [{"type": "text", "text": text}]}


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer("write-and-run") as running:
        yield running


def post(server: ScriptedModelServer, payload: dict[str, Any], path: str = "/v1/chat/completions") -> Any:
    address = urlsplit(server.base_url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
    try:
        connection.request("POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read().decode()
    finally:
        connection.close()
    if "text/event-stream" not in (response.getheader("Content-Type") or ""):
        return response.status, json.loads(data)
    lines = [line.removeprefix("data: ") for line in data.split("\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return response.status, [json.loads(line) for line in lines[:-1]]


def test_the_context_is_no_prompt_and_gives_the_cwd() -> None:
    conversation = read_conversation(body(called("c1", "write_file"), result("c1", "ok"), prompt="do it"))
    assert conversation.prompts == ("do it",)
    assert conversation.cwd == "/srv/work"
    assert conversation.result_groups == (("ok",),)
    assert conversation.offers_tools


def test_a_streamed_answer_is_text_then_the_offered_tool_then_the_finish_with_usage(
    server: ScriptedModelServer,
) -> None:
    status, chunks = post(server, body())
    assert status == 200
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    assert deltas[0]["role"] == "assistant"
    assert [d["content"] for d in deltas if d.get("content")] == ["I'll create hello.txt first."]
    [call] = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert call["index"] == 0 and call["function"]["name"] == "write_file"
    assert json.loads(call["function"]["arguments"]) == {
        "file_path": "/srv/work/hello.txt",
        "content": "hello from baton\n",
    }
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["prompt_tokens"] == 100 and chunks[-1]["usage"]["total_tokens"] == 120


def test_after_the_results_the_next_step_and_the_final_text(server: ScriptedModelServer) -> None:
    _, chunks = post(server, body(called("c1", "write_file"), result("c1", "written")))
    [call] = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert call["function"]["name"] == "run_shell_command"
    assert json.loads(call["function"]["arguments"]) == {"command": "echo hi", "description": "Print hi"}
    extra = (called("c1", "write_file"), result("c1", "written"), called("c2", "run_shell_command"), result("c2", "hi"))
    status, answer = post(server, body(*extra, stream=False), path="/chat/completions")
    assert status == 200 and answer["object"] == "chat.completion"
    [choice] = answer["choices"]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    assert choice["message"]["content"] == "Created hello.txt and ran `echo hi`, which printed: hi"


def test_an_injected_failure_is_an_openai_error() -> None:
    with ScriptedModelServer("api-error-500") as server:
        status, answer = post(server, body(called("c1", "run_shell_command"), result("c1", "step1"), stream=False))
    assert status == 500
    assert answer["error"]["type"] == "server_error" and answer["error"]["message"]


def _schema(*properties: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"} for name in properties}}


# Copilot CLI's functions (1.0.102): its file tools take ``path`` and their own argument names.
COPILOT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": _schema(*properties)}}
    for name, properties in (
        ("bash", ("command", "description", "mode", "shellId")),
        ("view", ("path", "view_range")),
        ("create", ("path", "file_text")),
        ("edit", ("path", "old_str", "new_str")),
        ("grep", ("pattern", "paths", "output_mode")),
    )
]


def test_copilots_functions_get_their_own_argument_names() -> None:
    steps = [
        {"tools": [{"name": "Read", "input": {"file_path": "/srv/work/README.md"}}]},
        {"tools": [{"name": "Write", "input": {"file_path": "/srv/work/new.txt", "content": "new\n"}}]},
        {"tools": [{"name": "Edit", "input": {"file_path": "/srv/work/a", "old_string": "x", "new_string": "y"}}]},
        {"tools": [{"name": "Grep", "input": {"pattern": "root", "path": "/etc/passwd", "output_mode": "count"}}]},
    ]
    scenario = Scenario.from_dict({"steps": steps, "final_text": "done"}, name="copilot")
    expected = [
        ("view", {"path": "/srv/work/README.md"}),
        ("create", {"path": "/srv/work/new.txt", "file_text": "new\n"}),
        ("edit", {"path": "/srv/work/a", "old_str": "x", "new_str": "y"}),
        ("grep", {"pattern": "root", "paths": "/etc/passwd"}),
    ]
    with ScriptedModelServer(scenario) as server:
        extra: list[dict[str, Any]] = []
        for index, (name, arguments) in enumerate(expected):
            _, answer = post(server, {**body(*extra, stream=False), "tools": COPILOT_TOOLS})
            [call] = answer["choices"][0]["message"]["tool_calls"]
            assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (name, arguments)
            extra += [called(f"c{index}", name), result(f"c{index}", "ok")]


@pytest.mark.parametrize(
    ("offered", "sent"), [("mcp__t__echo", "mcp__t__echo"), ("t_echo", "t_echo"), (None, "mcp__t__echo")]
)
def test_an_mcp_tool_is_named_as_the_request_offers_it(offered: str | None, sent: str) -> None:
    # Qwen Code offers ``mcp__t__echo``; an OpenCode-like agent ``t_echo``; not offered: sent as named.
    step = {"tools": [{"name": "mcp__t__echo", "input": {"text": "hi"}}]}
    scenario = Scenario.from_dict({"steps": [step], "final_text": "done"}, name="mcp")
    tools = [{"type": "function", "function": {"name": offered, "parameters": _schema("other")}}] if offered else []
    with ScriptedModelServer(scenario) as server:
        _, answer = post(server, {**body(stream=False), "tools": TOOLS + tools})
    [call] = answer["choices"][0]["message"]["tool_calls"]
    # Its input unchanged, even where the offered schema declares other arguments.
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (sent, {"text": "hi"})
