"""Waiting without polling: wake-ups from another process (the doorbell on SQLite, LISTEN on
Postgres) reach a parked run's waiter and an inbox reader; the doorbell's own behaviour; the
per-process run slots that replaced the DBOS queue.

Each waiter is given a poll far longer than the test's timeout, so only a wake-up can deliver
in time (the code before polled: these fail there).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.executors import this_executor_id
from baton.runs.inbox import InboxCommand, InboxReader
from baton.runs.parking import wait_for_decisions
from baton.runs.workflows import Slots
from baton.store import Store
from baton.store.doorbell import Doorbell, doorbell_dir, ring

pytestmark = pytest.mark.timeout(90)

NEVER = 600.0  # a poll no test waits for

# Another process: decides the run's pending gate, or posts a message to the run.
_OTHER = """
import asyncio, sys
from baton.gates.ledger import GateLedger
from baton.runs.inbox import post_command
from baton.store import Store

async def main(url, run_id, what):
    store = await asyncio.to_thread(Store.open, url)
    async with store:
        if what == "decide":
            ledger = GateLedger(store)
            (gate,) = await ledger.list(run_id=run_id, status="pending")
            binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
            await ledger.decide(gate.id, {"decision": "approve", **binding}, decided_by="elsewhere")
        else:
            await post_command(store, run_id, "user_message", {"content": what})

asyncio.run(main(*sys.argv[1:]))
"""


async def _other_process(url: str, run_id: str, what: str) -> None:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", _OTHER, url, run_id, what)
    assert await asyncio.wait_for(process.wait(), 60) == 0


async def _gate(store: Store, run_id: str) -> GateRecord:
    gate, _ = await GateLedger(store).open(
        run_id,
        "tool",
        summary="Bash: touch a",
        tool_name="Bash",
        tool_call_id="toolu_a",
        bound_call_id="toolu_a",
        bound_input_hash="0" * 64,
        input={"command": "touch a"},
    )
    return gate


async def test_a_decision_from_another_process_wakes_a_parked_run_at_once(store_url: str) -> None:
    store = await asyncio.to_thread(Store.open, store_url)
    async with store:
        run = await store.create_run(agent="claude")
        gate = await _gate(store, run.id)
        await store.update_run(run.id, status="running", status_reason="started")
        await store.update_run(run.id, status="paused", status_reason=gate.id)
        waiting = asyncio.create_task(wait_for_decisions(store, run.id, poll_seconds=NEVER, fallback_seconds=NEVER))
        await asyncio.sleep(0.3)  # waiting (on Postgres: LISTEN up); either way the rows decide
        assert not waiting.done()
        await _other_process(store_url, run.id, "decide")
        assert await asyncio.wait_for(waiting, 30) is True
        assert (await GateLedger(store).get(gate.id)).status == "approved"


async def test_a_message_from_another_process_reaches_the_sqlite_reader_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    store = await asyncio.to_thread(Store.open, url)
    received: list[InboxCommand] = []
    arrived = asyncio.Event()

    async def on_command(command: InboxCommand) -> None:
        received.append(command)
        arrived.set()

    async with store:
        run = await store.create_run(agent="claude", run_mode="interactive")
        await store.update_run(run.id, status="running", executor_id=this_executor_id())
        async with InboxReader(store, run.id, taken_by="reader", interval=NEVER, on_command=on_command):
            for text in ("one", "two"):
                arrived.clear()
                await _other_process(url, run.id, text)
                await asyncio.wait_for(arrived.wait(), 30)
    assert [command.payload["content"] for command in received] == ["one", "two"]


async def test_the_doorbell_wakes_once_per_ring_and_cleans_up_after_itself(tmp_path: Path) -> None:
    directory = doorbell_dir(str(tmp_path / "baton.db"))
    woken = asyncio.Event()
    bell = Doorbell.join(directory, woken)
    assert bell is not None
    [fifo] = list(directory.iterdir())
    assert fifo.name.startswith(f"{os.getpid()}-")
    stale = directory / "1-dead"  # a FIFO whose process is gone: no reader
    os.mkfifo(stale)
    making = directory / ".2-being-made"  # not in place yet: never rung, never removed
    os.mkfifo(making)

    await asyncio.to_thread(ring, directory)
    await asyncio.wait_for(woken.wait(), 10)
    assert not stale.exists() and making.exists() and fifo.exists()
    woken.clear()
    await asyncio.sleep(0.2)  # the ringer has closed its end: the read end must not report a hang-up
    assert not woken.is_set()

    bell.leave(woken)
    assert not fifo.exists()
    making.unlink()
    await asyncio.to_thread(ring, directory)  # nobody waits: nothing to do, nothing fails


async def test_slots_hand_a_freed_slot_to_the_next_waiter_and_a_dropped_one_never_starts() -> None:
    slots = Slots(2)
    assert await slots.take("a") and await slots.take("b")
    third = asyncio.create_task(slots.take("c"))
    fourth = asyncio.create_task(slots.take("d"))
    fifth = asyncio.create_task(slots.take("e"))
    await asyncio.sleep(0)
    assert not (third.done() or fourth.done() or fifth.done())
    slots.drop("d")
    assert await fourth is False
    slots.release()  # "a" ends: "c" (first in line) starts
    assert await third is True and not fifth.done()
    fifth.cancel()  # cancelled while waiting: its place goes
    with pytest.raises(asyncio.CancelledError):
        await fifth
    slots.release()
    slots.release()
    assert slots.held == 0
    assert await slots.take("f") and slots.held == 1


def test_a_doorbell_ring_reaches_a_reader_in_another_process(tmp_path: Path) -> None:
    """The ring crosses processes: a child process waits on the doorbell, this one rings."""
    directory = doorbell_dir(str(tmp_path / "baton.db"))
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import asyncio, sys\n"
            "from pathlib import Path\n"
            "from baton.store.doorbell import Doorbell\n"
            "async def main():\n"
            "    woken = asyncio.Event()\n"
            "    Doorbell.join(Path(sys.argv[1]), woken)\n"
            "    print('ready', flush=True)\n"
            "    await woken.wait()\n"
            "asyncio.run(main())\n",
            str(directory),
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            ring(directory)
            assert child.wait(timeout=30) == 0
        finally:
            if child.poll() is None:
                child.kill()
