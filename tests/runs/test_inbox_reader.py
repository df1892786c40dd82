"""``InboxReader`` on both backends: every command once, in order, soon after its commit.

The writer is another ``Store`` (its own engine and connections), as another process has.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from baton.errors import NotFoundError, RefusedError, UsageError
from baton.runs.executors import this_executor_id
from baton.runs.inbox import InboxCommand, InboxReader, RunCommands, post_command
from baton.store import Store
from baton.store.inbox_watch import SqliteInboxWatch

pytestmark = pytest.mark.timeout(60)


async def test_commands_reach_the_reader_in_order_once_each(store_url: str) -> None:
    reader_store = await asyncio.to_thread(Store.open, store_url)
    writer_store = await asyncio.to_thread(Store.open, store_url)
    received: list[tuple[InboxCommand, float]] = []
    arrived = asyncio.Event()

    async def on_command(command: InboxCommand) -> None:
        received.append((command, time.monotonic()))
        arrived.set()

    async with reader_store, writer_store:
        record = await writer_store.create_run(agent="claude", run_mode="interactive")
        await writer_store.update_run(record.id, status="running", executor_id=this_executor_id())
        early = await post_command(writer_store, record.id, "set_permission_mode", {"permission_mode": "plan"})
        # On Postgres the poll is slow on purpose: only the NOTIFY can make delivery quick.
        interval = 0.02 if store_url.startswith("sqlite") else 30.0
        async with InboxReader(reader_store, record.id, taken_by="reader", interval=interval, on_command=on_command):
            await asyncio.wait_for(arrived.wait(), 10)  # a command written before the reader started
            await asyncio.sleep(0.2)  # Postgres: LISTEN is up
            written = []
            for index in range(5):
                arrived.clear()
                written.append(time.monotonic())
                await post_command(writer_store, record.id, "user_message", {"content": f"m{index}"})
                await asyncio.wait_for(arrived.wait(), 5)
        assert await writer_store.inbox_pending(record.id) == []
    assert received[0][0].id == early
    assert [command.payload.get("content") for command, _ in received[1:]] == [f"m{i}" for i in range(5)]
    delays = [at - sent for (_, at), sent in zip(received[1:], written, strict=True)]
    assert max(delays) < 1.0, delays


async def test_post_command_refusals(store_url: str) -> None:
    store = await asyncio.to_thread(Store.open, store_url)
    async with store:
        with pytest.raises(NotFoundError):
            await post_command(store, "run_nope", "cancel", {})
        background = await store.create_run(agent="claude")
        await store.update_run(background.id, status="running", executor_id=this_executor_id())
        with pytest.raises(RefusedError) as not_interactive:
            await post_command(store, background.id, "user_message", {"content": "hi"})
        assert not_interactive.value.code == "run_not_interactive"
        record = await store.create_run(agent="claude", run_mode="interactive")
        with pytest.raises(UsageError):
            await post_command(store, record.id, "reboot", {})
        await store.update_run(record.id, status="running", executor_id="local:gone:0:1:2")
        with pytest.raises(RefusedError) as nobody:
            await post_command(store, record.id, "user_message", {"content": "hi"})
        assert nobody.value.code == "run_not_running"
        assert await post_command(store, record.id, "cancel", {}) > 0  # a resume takes it
        await store.update_run(record.id, status="paused", executor_id=this_executor_id())
        with pytest.raises(RefusedError) as paused:
            await post_command(store, record.id, "user_message", {"content": "hi"})
        assert paused.value.code == "run_paused"
        await store.update_run(record.id, status="finished")
        with pytest.raises(RefusedError) as ended:
            await post_command(store, record.id, "close", {})
        assert ended.value.code == "run_not_running"


async def test_a_command_the_agent_fails_to_take_is_refused_in_the_log_and_the_next_is_taken() -> None:
    notes: list[tuple[str, Any]] = []
    modes: list[str] = []

    async def set_mode(mode: str) -> None:
        if mode == "plan":
            raise ConnectionError("the agent is gone")
        modes.append(mode)

    commands = RunCommands(
        run_mode="interactive",
        note=lambda name, params: notes.append((name, params)),
        cancel=lambda: None,
        set_mode=set_mode,
    )
    await commands.handle(InboxCommand(1, "set_permission_mode", {"permission_mode": "plan"}))
    await commands.handle(InboxCommand(2, "set_permission_mode", {"permission_mode": "acceptEdits"}))
    await commands.handle(InboxCommand(3, "user_message", {"content": "next"}))
    await commands.handle(InboxCommand(4, "close", {}))
    await commands.handle(InboxCommand(5, "user_message", {"content": "after the close"}))
    assert modes == ["acceptEdits"]
    assert [name for name, _ in notes] == [
        "inbox",
        "inbox_refused",
        "inbox",
        "inbox",
        "inbox",
        "inbox",
        "inbox_refused",
    ]
    assert notes[1][1] == {
        "id": 1,
        "kind": "set_permission_mode",
        "code": "agent_error",
        "message": "the agent is gone",
    }
    assert notes[-1][1]["code"] == "run_not_running"
    assert await commands.next_prompt(1.0) == "next"
    assert await commands.next_prompt(1.0) is None
    assert notes[-1] == ("closed", {"reason": "close"})


async def test_runs_read_in_one_process_get_their_own_commands(store_url: str) -> None:
    store = await asyncio.to_thread(Store.open, store_url)
    received: dict[str, list[str]] = {"a": [], "b": []}
    done = asyncio.Event()

    def collect(name: str) -> Callable[[InboxCommand], Awaitable[None]]:
        async def on_command(command: InboxCommand) -> None:
            received[name].append(str(command.payload["content"]))
            if sum(map(len, received.values())) == 6:
                done.set()

        return on_command

    async with store:
        runs = {}
        for name in received:
            record = await store.create_run(agent="claude", run_mode="interactive")
            await store.update_run(record.id, status="running", executor_id=this_executor_id())
            runs[name] = record.id
        async with contextlib.AsyncExitStack() as stack:
            for name, run_id in runs.items():
                reader = InboxReader(store, run_id, taken_by="reader", interval=0.02, on_command=collect(name))
                await stack.enter_async_context(reader)
            if store_url.startswith("sqlite"):
                assert len(SqliteInboxWatch._open) == 1  # one poll for both runs
            for index in range(3):
                for name, run_id in runs.items():
                    await post_command(store, run_id, "user_message", {"content": f"{name}{index}"})
            await asyncio.wait_for(done.wait(), 10)
        assert SqliteInboxWatch._open == {}
    assert received == {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}
