"""The server over real HTTP on loopback: SSE framing, JSON, failures, recording, lifecycle."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from baton.testing import Scenario, ScriptedModelServer

ENVIRONMENT = "Primary working directory: /srv/work\n"
MESSAGES = "/v1/messages?beta=true"


def request_body(*, stream: bool = True, tools: bool = True, text: str = "go", **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "stream": stream,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": text}]},
            {"role": "system", "content": ENVIRONMENT},
        ],
        "tools": [{"name": "Write"}, {"name": "Bash"}] if tools else [],
        **extra,
    }


Connect = Callable[[ScriptedModelServer], http.client.HTTPConnection]


@pytest.fixture
def connect() -> Iterator[Connect]:
    """Opens HTTP connections to a server, and closes them after the test."""
    opened: list[http.client.HTTPConnection] = []

    def open_connection(server: ScriptedModelServer) -> http.client.HTTPConnection:
        address = urlsplit(server.base_url)
        opened.append(http.client.HTTPConnection(address.hostname or "", address.port, timeout=10))
        return opened[-1]

    yield open_connection
    for connection in opened:
        connection.close()


def post(connection: http.client.HTTPConnection, body: Any, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", MESSAGES, payload, {"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    return response.status, response.read()


def parse_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in data.decode().split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def assemble(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Rebuild the message from the stream, as an SDK does."""
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        assert data["type"] == name
        if name == "message_start":
            message = data["message"]
        elif name == "content_block_start":
            message["content"].append(data["content_block"])
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif name == "content_block_stop" and data["index"] in partial:
            message["content"][data["index"]]["input"] = json.loads(partial[data["index"]])
        elif name == "message_delta":
            message.update(data["delta"])
            message["usage"] = data["usage"]
    return message


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer("write-and-run") as running:
        yield running


def test_a_streamed_reply_has_the_event_sequence_claude_expects(server: ScriptedModelServer, connect: Connect) -> None:
    status, data = post(connect(server), request_body())
    events = parse_sse(data)
    names = [name for name, _ in events]
    assert status == 200
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    message = assemble(events)
    text, write = message["content"]
    assert text == {"type": "text", "text": "I'll create hello.txt first."}
    assert write["type"] == "tool_use" and write["id"].startswith("toolu_")
    assert (write["name"], write["input"]["file_path"]) == ("Write", "/srv/work/hello.txt")
    assert (message["model"], message["stop_reason"], message["role"]) == (
        "claude-test",
        "tool_use",
        "assistant",
    )
    assert message["usage"]["input_tokens"] == 100 and message["usage"]["output_tokens"] == 20


def test_tool_use_ids_are_unique_per_response(connect: Connect) -> None:
    with ScriptedModelServer("two-tools") as server:
        connection = connect(server)
        first = assemble(parse_sse(post(connection, request_body())[1]))
        second = assemble(parse_sse(post(connection, request_body())[1]))
    ids = [b["id"] for m in (first, second) for b in m["content"] if b["type"] == "tool_use"]
    assert len(ids) == len(set(ids)) == 4


def test_a_non_streaming_request_gets_one_json_message(server: ScriptedModelServer, connect: Connect) -> None:
    status, data = post(connect(server), request_body(stream=False))
    message = json.loads(data)
    assert status == 200
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    assert [block["type"] for block in message["content"]] == ["text", "tool_use"]


def test_connections_are_kept_alive_across_requests(server: ScriptedModelServer, connect: Connect) -> None:
    connection = connect(server)
    for _ in range(3):
        assert post(connection, request_body())[0] == 200
    connection.request("HEAD", "/")
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b"")
    assert len(server.requests) == 4


def test_head_and_get_of_the_root_answer_200(server: ScriptedModelServer, connect: Connect) -> None:
    connection = connect(server)
    connection.request("HEAD", "/")
    head = connection.getresponse()
    assert (head.status, head.read()) == (200, b"")
    connection.request("GET", "/")
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())["scenario"]) == (200, "write-and-run")
    assert [(r.method, r.path) for r in server.requests] == [("HEAD", "/"), ("GET", "/")]


def test_side_requests_without_tools_get_text_and_do_not_advance(server: ScriptedModelServer, connect: Connect) -> None:
    connection = connect(server)
    side = json.loads(post(connection, request_body(stream=False, tools=False))[1])
    assert [block["type"] for block in side["content"]] == ["text"] and side["stop_reason"] == "end_turn"
    assert post(connection, request_body(stream=False))[0] == 200
    assert [(r.scenario, r.step) for r in server.requests] == [(None, None), ("write-and-run", 0)]


def test_secret_headers_are_masked_in_the_record(server: ScriptedModelServer, connect: Connect) -> None:
    secrets = {"x-api-key": "sk-secret-key-123456", "Authorization": "Bearer tok-secret-abcdef"}
    post(connect(server), request_body(), {**secrets, "anthropic-version": "2023-06-01"})
    (recorded,) = server.requests
    assert recorded.headers["x-api-key"] == recorded.headers["authorization"] == "[redacted]"
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    assert "secret" not in repr(server.requests)
    assert recorded.body == request_body() and recorded.path == MESSAGES


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (529, "overloaded_error", "Overloaded"),
        (500, "api_error", "Internal server error"),
        (429, "rate_limit_error", None),
    ],
)
def test_injected_http_failures_carry_the_provider_error_body(
    status: int, kind: str, message: str | None, connect: Connect
) -> None:
    scenario = Scenario.from_yaml(f"steps:\n  - error: {status}\n", name="failing")
    with ScriptedModelServer(scenario) as server:
        answered, data = post(connect(server), request_body())
    body = json.loads(data)
    assert answered == status
    assert (body["type"], body["error"]["type"]) == ("error", kind)
    assert message is None or body["error"]["message"] == message


def test_the_api_error_scenario_fails_after_its_first_tool_call(connect: Connect) -> None:
    with ScriptedModelServer("api-error") as server:
        connection = connect(server)
        assert post(connection, request_body())[0] == 200
        later = request_body()
        later["messages"] += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "step1"}],
            },
        ]
        assert [post(connection, later)[0] for _ in range(2)] == [529, 529]


def test_a_once_failure_lets_the_retry_succeed(connect: Connect) -> None:
    scenario = Scenario.from_yaml("steps:\n  - {error: 529, once: true}\n  - text: recovered\n", name="once")
    with ScriptedModelServer(scenario) as server:
        connection = connect(server)
        assert post(connection, request_body())[0] == 529
        status, data = post(connection, request_body(stream=False))
    assert (status, json.loads(data)["content"][0]["text"]) == (200, "recovered")


def test_a_dropped_connection_gets_no_answer(connect: Connect) -> None:
    scenario = Scenario.from_yaml("steps:\n  - drop: true\n", name="drop")
    with ScriptedModelServer(scenario) as server:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            post(connect(server), request_body())
        assert len(server.requests) == 1


def test_a_delay_holds_the_answer_back(connect: Connect) -> None:
    scenario = Scenario.from_yaml("steps:\n  - {text: slow, delay: 0.3}\n", name="slow")
    with ScriptedModelServer(scenario) as server:
        started = time.monotonic()
        assert post(connect(server), request_body())[0] == 200
    assert time.monotonic() - started >= 0.3


def test_a_prompt_marker_picks_another_scenario(server: ScriptedModelServer, connect: Connect) -> None:
    connection = connect(server)
    message = json.loads(post(connection, request_body(stream=False, text="[scenario:plain] hi"))[1])
    assert message["content"][0]["text"].startswith("Hello from baton's scripted model")
    status, data = post(connection, request_body(text="[scenario:nope] hi"))
    assert status == 400 and json.loads(data)["error"]["type"] == "invalid_request_error"
    assert [r.scenario for r in server.requests] == ["plain", None]


def test_other_requests_are_answered_like_the_provider(server: ScriptedModelServer, connect: Connect) -> None:
    connection = connect(server)
    connection.request("POST", "/v1/messages/count_tokens?beta=true", json.dumps(request_body()))
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"input_tokens": 100})
    connection.request("POST", "/v1/complete", b"{}")
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())["error"]["type"]) == (404, "not_found_error")
    assert post(connection, b"not json")[0] == 400


def test_the_lifecycle_is_start_once_and_stop_idempotently(connect: Connect) -> None:
    server = ScriptedModelServer("plain")
    with pytest.raises(RuntimeError):
        _ = server.base_url
    server.start()
    address = urlsplit(server.base_url)
    idle = connect(server)
    idle.request("HEAD", "/")
    idle.getresponse().read()  # leaves a kept-alive connection open across the stop
    server.stop()
    server.stop()
    idle.close()
    with pytest.raises(RuntimeError):
        server.start()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address.hostname or "", address.port or 0), timeout=2).close()


def test_wait_for_requests_times_out_with_a_count(server: ScriptedModelServer) -> None:
    with pytest.raises(TimeoutError, match="0 of 1"):
        server.wait_for_requests(1, timeout=0.05)


async def test_it_serves_async_clients_with_chunked_streams(server: ScriptedModelServer) -> None:
    address = urlsplit(server.base_url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    payload = json.dumps(request_body()).encode()
    head = f"POST {MESSAGES} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    writer.write(head.encode() + payload)
    raw = await reader.read(-1)
    writer.close()
    await writer.wait_closed()
    headers, chunked = raw.split(b"\r\n\r\n", 1)
    assert b"Transfer-Encoding: chunked" in headers and b"text/event-stream" in headers
    body, rest = b"", chunked
    while True:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            break
        body, rest = body + rest[:size], rest[size + 2 :]
    assert assemble(parse_sse(body))["stop_reason"] == "tool_use"
    assert server.wait_for_requests(1)[0].step == 0
