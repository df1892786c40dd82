"""The inbox reader's connections and its exit (baton.runs.inbox), and the Postgres LISTEN when
the connection drops: the reader exited at any moment leaves no connection open and no command
taken but unhandled; a terminated LISTEN backend and a restarted server are reconnected, and a
command written while the LISTEN was down is still read at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest
from sqlalchemy import text
from tests.conftest import open_connection_warnings

from baton.runs.executors import this_executor_id
from baton.runs.inbox import InboxCommand, InboxReader, RunCommands, post_command
from baton.store import Store
from baton.testing.postgres import TemporaryPostgres

pytestmark = pytest.mark.timeout(60)


async def running_run(store: Store) -> str:
    record = await store.create_run(agent="claude", run_mode="interactive")
    await store.update_run(record.id, status="running", executor_id=this_executor_id())
    return record.id


async def test_a_reader_exited_at_any_moment_leaves_no_connection_open_and_no_command_unhandled(
    store_url: str,
) -> None:
    """Exit after 0, 1, 2 … loop iterations, then after 0–20 ms (mid-connect, mid-LISTEN, mid-read),
    the store closed right after, as a process ending does: every command is handed on or still
    waits, and nothing the reader opened is collected open."""
    open_connection_warnings()  # what earlier tests left is not this test's
    points = [("iterations", n) for n in range(12)] + [("ms", n) for n in range(0, 21, 2)]
    lost: list[tuple[str, int, int]] = []
    async with await asyncio.to_thread(Store.open, store_url) as checker:
        for unit, amount in points:
            run_id = await running_run(checker)
            posted = [await post_command(checker, run_id, "cancel", {}) for _ in range(2)]
            handed: list[int] = []
            store = await asyncio.to_thread(Store.open, store_url)
            try:
                async with InboxReader(store, run_id, taken_by="reader", interval=0.001, on_command=collect(handed)):
                    if unit == "iterations":
                        for _ in range(amount):
                            await asyncio.sleep(0)
                    else:
                        await asyncio.sleep(amount / 1000)
            finally:
                store.close()  # at once: no await between the reader's exit and the close
            del store
            waiting = [int(row["id"]) for row in await checker.inbox_pending(run_id)]
            if sorted(handed + waiting) != posted:
                lost.append((unit, amount, len(set(posted) - set(handed) - set(waiting))))
    assert lost == []  # (unit, amount, commands taken but never handed on)
    assert open_connection_warnings() == []


async def test_a_message_close_or_cancel_handed_on_after_the_last_turn_is_refused_in_the_log() -> None:
    """What the reader's exit hands on (a read in flight when the run's turns ended) is logged as
    taken, then refused: no turn will take it, and a cancel does not turn a finished run cancelled."""
    notes: list[tuple[str, object]] = []
    cancelled: list[bool] = []

    async def set_mode(mode: str) -> None:
        pass

    commands = RunCommands(
        run_mode="interactive",
        note=lambda name, params: notes.append((name, params)),
        cancel=lambda: cancelled.append(True),
        set_mode=set_mode,
    )
    commands.end()
    await commands.handle(InboxCommand(1, "user_message", {"content": "late"}))
    await commands.handle(InboxCommand(2, "close", {}))
    await commands.handle(InboxCommand(3, "cancel", {}))
    refused = [params for name, params in notes if name == "inbox_refused"]
    assert [name for name, _ in notes] == ["inbox", "inbox_refused"] * 3
    assert refused == [
        {"id": id_, "kind": kind, "code": "run_not_running", "message": "the run has ended: no turn takes it"}
        for id_, kind in [(1, "user_message"), (2, "close"), (3, "cancel")]
    ]
    assert cancelled == []  # a finished run stays finished


def collect(ids: list[int]) -> Callable[[InboxCommand], Awaitable[None]]:
    async def on_command(command: InboxCommand) -> None:
        ids.append(command.id)

    return on_command


def listen_backends(url: str) -> list[int]:
    store = Store.open(url)
    try:
        with store.engine.connect() as connection:
            query = "SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN baton_inbox' AND pid <> pg_backend_pid()"
            return [int(pid) for (pid,) in connection.execute(text(query))]
    finally:
        store.close()


async def until(predicate: Callable[[], bool], within: float) -> None:
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(predicate):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


class Received:
    def __init__(self) -> None:
        self.contents: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, command: InboxCommand) -> None:
        self.contents.append(str(command.payload["content"]))
        self.arrived.set()

    async def after_posting(self, store: Store, run_id: str, content: str, within: float) -> float:
        """Seconds from the command's commit to its handing on."""
        self.arrived.clear()
        started = time.monotonic()
        await post_command(store, run_id, "user_message", {"content": content})
        await asyncio.wait_for(self.arrived.wait(), within)
        assert self.contents[-1] == content
        return time.monotonic() - started


@pytest.fixture
def own_postgres() -> Iterator[TemporaryPostgres]:
    """A server of this test's own, to restart (the session's serves the other tests)."""
    server = TemporaryPostgres(durable=False)
    with server:
        yield server


@pytest.mark.parametrize("how", ["terminated backend", "server restart"])
async def test_a_dropped_listen_comes_back_and_the_command_written_meanwhile_is_read(
    how: str, request: pytest.FixtureRequest
) -> None:
    # The reader polls every 30 s: only a LISTEN, and the read after it comes back, deliver in time.
    if how == "server restart":
        server: TemporaryPostgres = request.getfixturevalue("own_postgres")
        url = server.url
    else:
        url = request.getfixturevalue("_postgres_store")[0]
    store = await asyncio.to_thread(Store.open, url)
    received = Received()
    async with store:
        run_id = await running_run(store)
        async with InboxReader(store, run_id, taken_by="reader", interval=30.0, on_command=received):
            await until(lambda: len(listen_backends(url)) == 1, 10)
            assert await received.after_posting(store, run_id, "before", 5) < 1.0
            (backend,) = listen_backends(url)
            if how == "server restart":
                await asyncio.to_thread(server.restart)
            else:
                with store.engine.connect() as connection:
                    connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
            # Written while the LISTEN is down (its retry waits 0.5 s): read once it is back.
            assert await received.after_posting(store, run_id, "meanwhile", 10) < 5.0
            await until(lambda: listen_backends(url) not in ([], [backend]), 10)
            assert await received.after_posting(store, run_id, "after", 5) < 1.0
    assert received.contents == ["before", "meanwhile", "after"]
