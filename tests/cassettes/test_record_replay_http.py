"""Recording through the model proxy (the scripted model server standing in for the real
endpoint) and replaying with the scripted server alone, over real HTTP on loopback."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton.cassettes import CassettePaths, CassetteRecorder, load_cassette
from baton.errors import BatonError
from baton.sandbox import ModelProxy, ModelUpstream
from baton.store.redact import Redactor
from baton.testing import CassettePlayer, ScriptedModelServer

CANARY = "sk-ant-real-CANARY-5e1f0a"
PROMPT_CANARY = "canary-secret-in-a-prompt-77a1"  # a value the redactor knows, sent in a body
WORKSPACE = "/work/recorded-repo"


def _messages(prompt: str, *, results: list[dict[str, Any]] | None = None, tools: bool = True) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nToday is 2026-12-02T04:05:06Z\n</system-reminder>"},
                {"type": "text", "text": prompt},
            ],
        },
        {"role": "system", "content": f"Primary working directory: {WORKSPACE}\n - Platform: linux"},
    ]
    messages.extend(results or [])
    body: dict[str, Any] = {"model": "claude-scripted", "max_tokens": 64, "stream": True, "messages": messages}
    if tools:
        body["tools"] = [{"name": "Write", "input_schema": {"type": "object"}}, {"name": "Bash"}]
    return body


def _blocks(stream: bytes) -> list[str]:
    """What a streamed Messages answer says, block by block (deltas joined), and how it stops."""
    blocks: list[str] = []
    for line in stream.decode().splitlines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        if event["type"] == "content_block_start":
            blocks.append(json.dumps(event["content_block"], sort_keys=True))
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            blocks[event["index"]] += delta.get("text", "") + delta.get("partial_json", "")
        elif event["type"] == "message_delta":
            blocks.append(json.dumps(event["delta"], sort_keys=True))
    return blocks


@contextlib.asynccontextmanager
async def _replaying(player: CassettePlayer) -> AsyncIterator[httpx.AsyncClient]:
    with ScriptedModelServer.replaying(player) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            yield client


async def _post(client: httpx.AsyncClient, body: dict[str, Any], key: str) -> httpx.Response:
    return await client.post("/v1/messages?beta=true", json=body, headers={"x-api-key": key})


async def _record(path: Path, redactor: Redactor) -> list[bytes]:
    """Two requests of a write-and-run conversation and one side request, through the proxy."""
    bodies: list[bytes] = []
    with ScriptedModelServer("write-and-run") as server:
        recorder = CassetteRecorder(
            path, redactor=redactor, agent="claude", endpoint=server.base_url, paths=CassettePaths(WORKSPACE, None)
        )
        async with (
            ModelProxy(ModelUpstream(server.base_url, CANARY), tcp=("127.0.0.1", 0), observer=recorder) as proxy,
            httpx.AsyncClient(base_url="http://{}:{}".format(*proxy.tcp_address)) as client,
        ):
            first = await _post(client, _messages(f"Create hello.txt {PROMPT_CANARY}"), proxy.placeholder)
            bodies.append(first.content)
            tool_id = next(
                json.loads(line[5:])["content_block"]["id"]
                for line in first.text.splitlines()
                if line.startswith("data:") and '"tool_use"' in line
            )
            result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]}
            bodies.append(
                (
                    await _post(
                        client, _messages(f"Create hello.txt {PROMPT_CANARY}", results=[result]), proxy.placeholder
                    )
                ).content
            )
            bodies.append((await _post(client, _messages("Title please", tools=False), proxy.placeholder)).content)
        recorder.close()  # after the proxy closed: it observes an answer the agent got whole even then
    return bodies


async def test_a_recorded_conversation_replays_the_same_bytes_with_paths_rewritten(tmp_path: Path) -> None:
    cassette_path = tmp_path / "run.cassette.jsonl"
    redactor = Redactor([CANARY, PROMPT_CANARY])
    recorded = await _record(cassette_path, redactor)

    text = cassette_path.read_text()
    assert CANARY not in text and PROMPT_CANARY not in text  # the canaries never reach the file
    assert "[REDACTED]" in text
    cassette = load_cassette(cassette_path)
    assert cassette.version == 1 and cassette.paths.workspace == WORKSPACE
    assert [e.status for e in cassette.exchanges] == [200, 200, 200]
    assert all(e.headers["x-api-key"] == "[redacted]" for e in cassette.exchanges)
    assert WORKSPACE in cassette.exchanges[0].response_body.decode()  # the Write names {cwd}/hello.txt

    player = CassettePlayer(cassette)
    player.bind(workspace="/elsewhere/repo", agent_home=None)
    async with _replaying(player) as client:
        replay_prompt = "Create hello.txt [REDACTED]"  # what the cassette holds of the prompt
        # The side request first (Claude Code sends them concurrently): content decides, not order.
        side = await client.post("/v1/messages?beta=true", json=_messages("Title please", tools=False))
        body = _messages(replay_prompt)
        body["messages"][1]["content"] = "Primary working directory: /elsewhere/repo\n - Platform: linux"
        body["messages"][0]["content"][0]["text"] = (
            "<system-reminder>\nToday is 2027-01-01T00:00:00Z\n</system-reminder>"
        )
        first = await client.post("/v1/messages?beta=true", json=body)
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_other", "content": "ok"}]}
        second = await client.post("/v1/messages?beta=true", json=_messages(replay_prompt, results=[result]))
    assert _blocks(side.content) == _blocks(recorded[2])
    assert _blocks(first.content) == _blocks(recorded[0].replace(WORKSPACE.encode(), b"/elsewhere/repo"))
    assert '"/elsewhere/repo/hello.txt"' in _blocks(first.content)[1]
    assert _blocks(second.content) == _blocks(recorded[1])
    assert player.mismatches == [] and len(player.answered) == 3


async def test_a_changed_prompt_is_replay_mismatch_with_a_diff(tmp_path: Path) -> None:
    cassette_path = tmp_path / "run.cassette.jsonl"
    await _record(cassette_path, Redactor([CANARY]))
    player = CassettePlayer.load(cassette_path)
    async with _replaying(player) as client:
        answer = await client.post("/v1/messages?beta=true", json=_messages("Create goodbye.txt instead"))
    assert answer.status_code == 400
    assert answer.headers["x-baton-error"] == "replay_mismatch"
    message = answer.json()["error"]["message"]
    assert "matches no recorded request" in message
    assert f'-     "text": "Create hello.txt {PROMPT_CANARY}"' in message
    assert '+     "text": "Create goodbye.txt instead"' in message
    (mismatch,) = player.mismatches
    assert mismatch.expected is not None and mismatch.expected.position == 0


async def test_each_recorded_exchange_answers_once_and_an_extra_request_is_a_mismatch(tmp_path: Path) -> None:
    cassette_path = tmp_path / "run.cassette.jsonl"
    await _record(cassette_path, Redactor([CANARY]))
    player = CassettePlayer.load(cassette_path)
    body = _messages(f"Create hello.txt {PROMPT_CANARY}")
    async with _replaying(player) as client:
        assert (await client.post("/v1/messages?beta=true", json=body)).status_code == 200
        again = await client.post("/v1/messages?beta=true", json=body)
    assert again.status_code == 400 and again.headers["x-baton-error"] == "replay_mismatch"


async def test_real_timing_paces_the_pieces_and_fast_sends_them_at_once(tmp_path: Path) -> None:
    cassette_path = tmp_path / "run.cassette.jsonl"
    recorded = await _record(cassette_path, Redactor([CANARY]))
    player = CassettePlayer.load(cassette_path, timing="real")
    async with _replaying(player) as client:
        answer = await client.post("/v1/messages?beta=true", json=_messages(f"Create hello.txt {PROMPT_CANARY}"))
    assert _blocks(answer.content) == _blocks(recorded[0])


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("", "is empty"),
        ('{"baton_cassette": 2}\n', "version 2"),
        ("not json\n", ":1 is not JSON"),
        ('{"baton_cassette": 1}\n{"seq": 0}\n', ":2 is not a cassette exchange"),
    ],
)
def test_a_bad_cassette_is_cassette_invalid(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(BatonError) as caught:
        load_cassette(path)
    assert caught.value.code == "cassette_invalid" and error in caught.value.message


def test_an_unknown_timing_is_invalid_argument(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"baton_cassette": 1}\n')
    with pytest.raises(BatonError) as caught:
        CassettePlayer.load(path, timing="slow")  # type: ignore[arg-type]
    assert caught.value.code == "invalid_argument"
