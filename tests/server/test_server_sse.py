"""Server-sent events from a real server on loopback, fed by a run whose entries the test appends.

The entries go through the server's own session log and store, exactly as an agent's would;
only the agent is left out, so these tests can make a run as long, as fast or as idle as needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.server._fake_run import FakeRun, events_url
from tests.server._server import RunningServer, SseMessage, SseReader, read_stream, running_server, wait_until

from baton.config import Settings
from baton.events.entry import Direction
from baton.events.project import project
from baton.gates.ledger import GateLedger
from baton.runs import Baton
from baton.server import ServerConfig
from baton.server.sse import FrameCache


@pytest.fixture
def server(settings: Settings) -> Iterator[RunningServer]:
    with running_server(settings, ServerConfig(sse_heartbeat_seconds=0.05)) as running:
        yield running


async def test_live_events_then_the_end_and_resume_from_any_id(server: RunningServer) -> None:
    run = FakeRun(server)
    run.say("before anyone watched", count=3)
    async with httpx.AsyncClient(timeout=30) as client:
        reading = asyncio.create_task(read_stream(client, events_url(server, run.id), server.headers()))
        await asyncio.to_thread(wait_until, lambda: server.streams.open == 1, 10, "the stream")
        for index in range(20):
            await asyncio.to_thread(run.say, f"live {index}")
        await asyncio.to_thread(run.finish)
        received = await asyncio.wait_for(reading, 20)
        expected = project(run.entries())
        assert [(m.id, m.event, m.data) for m in received] == [(e["seq"], e["type"], e) for e in expected]
        assert received[-1].event == "task.finished"  # and the server closed the stream after it
        for cut in (0, 1, 7, len(expected) - 1, len(expected)):
            headers = server.headers() | {"Last-Event-ID": str(cut)}
            rest = await read_stream(client, events_url(server, run.id), headers)
            assert [m.id for m in rest] == [e["seq"] for e in expected[cut:]]
        by_query = await read_stream(client, events_url(server, run.id, "?after=5"), server.headers())
        assert [m.id for m in by_query] == [e["seq"] for e in expected[5:]]
        acp = await read_stream(client, events_url(server, run.id, "?view=acp&after=2"), server.headers())
        entries = run.entries()
        assert [(m.id, m.event, m.data) for m in acp] == [(e["seq"], "entry", e) for e in entries[2:]]
        bad = await client.get(events_url(server, run.id), headers=server.headers() | {"Last-Event-ID": "x"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "request_invalid"
    assert server.streams.open == 0


async def test_the_streams_of_a_run_share_one_projection_of_its_log(server: RunningServer) -> None:
    run = FakeRun(server)
    run.say("before anyone watched", count=3)
    feeds = server.state.feeds
    started = feeds.started["events"]
    async with httpx.AsyncClient(timeout=30) as client:
        url = events_url(server, run.id)
        readers = [
            asyncio.create_task(read_stream(client, url, server.headers() | {"Last-Event-ID": str(after)}))
            for after in (0, 0, 2, 4, 5)
        ]
        await asyncio.to_thread(wait_until, lambda: server.streams.open == 5, 10, "the streams")
        assert feeds.active("events") == 1 and feeds.started["events"] == started + 1  # one for all five
        for index in range(30):
            await asyncio.to_thread(run.say, f"live {index}")
        await asyncio.to_thread(run.finish)
        received = await asyncio.wait_for(asyncio.gather(*readers), 20)
    expected = [(e["seq"], e["type"], e) for e in project(run.entries())]
    for after, messages in zip((0, 0, 2, 4, 5), received, strict=True):
        assert [(m.id, m.event, m.data) for m in messages] == expected[after:]
    await asyncio.to_thread(wait_until, lambda: feeds.active() == 0, 10, "the projection to be dropped")
    async with httpx.AsyncClient(timeout=30) as client:  # a later stream projects the stored log again
        again = await read_stream(client, events_url(server, run.id, "?after=1"), server.headers())
    assert [(m.id, m.event, m.data) for m in again] == expected[1:]
    assert feeds.started["events"] == started + 2 and feeds.active() == 0


async def test_heartbeats_keep_an_idle_stream_alive_and_a_leaving_client_ends_it(server: RunningServer) -> None:
    run = FakeRun(server)
    reader = SseReader()
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("GET", events_url(server, run.id), headers=server.headers()) as response,
    ):
        received = []
        async for line in response.aiter_lines():  # the run's only event, then only heartbeats
            if (message := reader.feed(line)) is not None:
                received.append(message)
            if received and reader.heartbeats >= 3:
                break
        assert [m.event for m in received] == ["task.started"]
        assert server.streams.open == 1
    # The client went away mid-run: the server's stream (and its log subscription) ends.
    await asyncio.to_thread(wait_until, lambda: server.streams.open == 0, 10, "the stream to end")
    assert server.streams.client_left == 1
    run.finish()


async def test_a_stalled_client_gets_overflow_and_the_run_is_not_slowed(settings: Settings) -> None:
    config = ServerConfig(sse_queue_size=2, sse_stall_seconds=0.2)
    with running_server(settings, config) as server:
        run = FakeRun(server)
        port = int(server.base_url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        request = f"GET /v1/runs/{run.id}/events?view=acp HTTP/1.1\r\nHost: x\r\n"
        request += f"Authorization: Bearer {server.token}\r\n\r\n"
        sock.sendall(request.encode())
        wait_until(lambda: server.streams.open == 1, 10, "the stream")
        # ~8 MB of entries while the client reads nothing: the socket buffers hold ~3 MB of it.
        run.say("x" * 4000, count=2000)  # returns once committed: the run never waited for the client
        wait_until(lambda: server.streams.overflowed == 1, 20, "the overflow")
        data = bytearray()
        sock.settimeout(20)
        while chunk := sock.recv(1 << 20):
            data += chunk
        sock.close()
        assert server.streams.open == 0
        head, _, body = bytes(data).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        text = _unchunk(body).decode()
        reader = SseReader()
        received = [m for line in text.split("\n") if (m := reader.feed(line)) is not None]
        assert received[-1].event == "overflow"
        ids = [m.id for m in received[:-1]]
        assert ids == list(range(1, len(ids) + 1)) and 2 < len(ids) < 2002  # a prefix, nothing skipped
        assert received[-1].data == {"reason": "slow_client", "last_id": ids[-1]}
        run.finish()


def _unchunk(body: bytes) -> bytes:
    """The payload of an HTTP/1.1 chunked body."""
    out = bytearray()
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += body[:size]
        body = body[size + 2 :]
    return bytes(out)


async def test_a_run_executed_by_another_process_is_tailed_from_the_store(
    server: RunningServer, settings: Settings
) -> None:
    # A second Baton on the same database stands for another process executing the run.
    async with Baton(settings) as elsewhere:
        record = await elsewhere.store.create_run(agent="claude", owner="local", repo="/work/repo")
        elsewhere.log.open_run(record.id)

        def note(method: str, params: dict[str, Any], direction: Direction = "baton") -> None:
            elsewhere.log.append(record.id, direction, method, {"jsonrpc": "2.0", "method": method, "params": params})

        note("_baton/run_started", {"run_id": record.id, "agent": "claude", "cwd": "/work/repo"})
        note("_baton/agent_session", {"agent_session_id": "s", "adapter": "claude"})
        await elsewhere.store.update_run(record.id, status="running")
        await elsewhere.log.flush()
        async with httpx.AsyncClient(timeout=30) as client:
            reading = asyncio.create_task(read_stream(client, events_url(server, record.id), server.headers()))
            await asyncio.to_thread(wait_until, lambda: server.streams.open == 1, 10, "the stream")
            for index in range(5):
                update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"t{index}"}}
                note("session/update", {"sessionId": "s", "update": update}, "from_agent")
                await elsewhere.log.flush()
                await asyncio.sleep(0.05)
            note("_baton/status", {"status": "finished", "reason": "end_turn"})
            await elsewhere.log.flush()
            await elsewhere.store.update_run(record.id, status="finished")
            elsewhere.log.close_run(record.id)
            received = await asyncio.wait_for(reading, 20)
        entries = await elsewhere.log.read(record.id)
    expected = json.loads(json.dumps(project(entries)))
    assert [(m.id, m.data) for m in received] == [(e["seq"], e) for e in expected]
    assert [m.event for m in received] == ["task.started", *["message"] * 5, "task.finished"]


async def test_open_streams_and_commands_are_limited_per_caller(settings: Settings) -> None:
    config = ServerConfig(sse_max_per_token=2, commands_per_minute=2)
    with running_server(settings, config) as server:
        run = FakeRun(server)
        url = events_url(server, run.id)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30, headers=server.headers()) as client:
            async with client.stream("GET", url) as first, client.stream("GET", url + "?view=acp") as second:
                assert first.status_code == second.status_code == 200
                third = await client.get(url)
                assert third.status_code == 429 and third.json()["error"]["code"] == "sse_limit"
            await asyncio.to_thread(wait_until, lambda: server.streams.open == 0, 10, "the streams to end")
            async with client.stream("GET", url) as again:
                assert again.status_code == 200  # the slots were given back
            command = {"jsonrpc": "2.0", "id": 1, "method": "close"}
            answers = [await client.post(f"/v1/runs/{run.id}/command", json=command) for _ in range(3)]
        assert [answer.status_code for answer in answers] == [200, 200, 429]
        assert answers[2].json()["error"]["code"] == "rate_limited"
        assert int(answers[2].headers["retry-after"]) >= 1
        run.finish()


async def test_streams_per_run_and_gate_decisions_are_limited(settings: Settings) -> None:
    config = ServerConfig(sse_max_per_run=1, decisions_per_minute=2)
    with running_server(settings, config) as server:
        run, other = FakeRun(server), FakeRun(server)

        async def open_gate() -> str:
            gate, _ = await GateLedger(server.baton.store).open(
                run.id, "tool", summary="Bash: ls", tool_name="Bash", bound_call_id="c1", bound_input_hash="h1"
            )
            return gate.id

        gate_id = server.call(open_gate)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30, headers=server.headers()) as client:
            async with client.stream("GET", events_url(server, run.id)) as first:
                assert first.status_code == 200
                second = await client.get(events_url(server, run.id, "?view=acp"))
                assert second.status_code == 429 and second.json()["error"]["code"] == "sse_limit"
                assert run.id in second.json()["error"]["message"]
                async with client.stream("GET", events_url(server, other.id)) as elsewhere:
                    assert elsewhere.status_code == 200  # the limit is per run
            deny = {"decision": "deny", "reason": "no", "bound_call_id": "c1", "bound_input_hash": "h1"}
            answers = [await client.post(f"/v1/gates/{gate_id}/decide", json=deny) for _ in range(3)]
        assert [answer.status_code for answer in answers] == [200, 200, 429]  # the second: the same decision
        assert answers[2].json()["error"]["code"] == "rate_limited"
        run.finish()
        other.finish()


async def test_reconnecting_at_random_points_while_the_run_writes_loses_and_repeats_nothing(
    server: RunningServer,
) -> None:
    run = FakeRun(server)
    rng = random.Random(9)

    def write() -> None:
        for index in range(300):
            run.say(f"chunk {index}")
        run.finish()

    writer = asyncio.create_task(asyncio.to_thread(write))
    received: list[tuple[int | None, Any]] = []
    reconnects = 0
    async with httpx.AsyncClient(timeout=30) as client:
        while not received or received[-1][1]["type"] != "task.finished":
            headers = server.headers()
            if received:
                headers["Last-Event-ID"] = str(received[-1][0])
            part = await read_stream(client, events_url(server, run.id), headers, stop_after=rng.randint(1, 40))
            received += [(m.id, m.data) for m in part]
            reconnects += 1
    await writer
    expected = json.loads(json.dumps(project(run.entries())))
    assert received == [(e["seq"], e) for e in expected]
    assert reconnects > 5


def test_the_local_token_never_reaches_a_log(server: RunningServer) -> None:
    run = FakeRun(server)
    assert server.token
    run.say(f"the agent saw {server.token} somewhere")
    text = json.dumps(run.entries())
    assert server.token not in text and "[REDACTED]" in text
    run.finish()


async def test_shutdown_ends_open_streams_cleanly(settings: Settings) -> None:
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server(settings, ServerConfig(sse_heartbeat_seconds=0.05)))
        run = FakeRun(server)
        async with httpx.AsyncClient(timeout=30) as client:
            so_far: list[SseMessage] = []
            reading = asyncio.create_task(
                read_stream(client, events_url(server, run.id), server.headers(), received=so_far)
            )
            await asyncio.to_thread(wait_until, lambda: server.streams.open == 1 and len(so_far) == 1, 10, "the stream")
            await asyncio.to_thread(stack.close)  # stop the server once the client holds the first event
            received = await asyncio.wait_for(reading, 10)  # the body ended: no error on the client
    # The stream was ended by the drain, not cut by uvicorn's graceful-shutdown timeout.
    assert server.streams.drained == 1 and server.streams.open == 0
    assert [m.event for m in received] == ["task.started"]


def test_the_shared_frame_cache_is_bounded_in_bytes() -> None:
    cache = FrameCache(max_bytes=16_000)
    for index in range(100):
        cache.frame("r", "acp", index, "entry", {"text": "x" * 500})
    assert cache.frame("r", "acp", 99, "entry", {"ignored": True}).startswith(b"id: 99\n")  # still cached
    assert b"ignored" in cache.frame("r", "acp", 0, "entry", {"ignored": True})  # evicted long ago
