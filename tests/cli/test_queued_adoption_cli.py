"""A queued run whose process died before it started (docs/design.md "Runs across processes"): a burst
queued behind ``BATON_CONCURRENCY=1`` in one process, SIGKILLed while the second run waits. The
second run is taken over by ``baton worker`` (two racing: one wins) or ``baton resume`` and
starts from its beginning exactly once. Real processes, the real Claude Code, the scripted model;
the worker case on SQLite and on Postgres.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI, Started
from tests.conftest import make_git_repo
from tests.runs.test_resume_crash import kill_whole_run

from baton.agents.processes import run_process_ids
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs.executors import effective_status
from baton.store import Redactor, RunRecord, SessionLog, Store
from baton.testing import ScriptedModelServer
from baton.testing.postgres import TemporaryPostgres

pytestmark = [pytest.mark.claude, pytest.mark.timeout(120)]

MODEL_KEY = "sk-scripted-queued-key-0123456789abcdef"

# One process, a limit of one: an interactive run holds the only slot, a second waits queued.
BURST = """
import asyncio, sys
from pathlib import Path
from baton.runs import Baton, RunSpec

async def main() -> None:
    async with Baton() as baton:
        first = await baton.start(RunSpec(prompt="first", repo=Path(sys.argv[1]), run_mode="interactive"))
        while (await baton.store.get_run(first.run_id)).status != "running":
            await asyncio.sleep(0.01)
        second = await baton.start(RunSpec(prompt="second", repo=Path(sys.argv[2]), allow=("Bash(echo:*)",)))
        print(first.run_id, second.run_id, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.fixture
def model(baton: BatonCLI) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer("plain") as server:
        baton.env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=MODEL_KEY)
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def database(request: pytest.FixtureRequest, baton: BatonCLI) -> str:
    """The store (and DBOS's system database) every process of the test shares."""
    if request.param == "sqlite":
        return f"sqlite:///{baton.home / 'baton.db'}"
    server: TemporaryPostgres = request.getfixturevalue("postgres_server")
    url = server.create_schema()
    baton.env["BATON_DATABASE_URL"] = url
    return url


def stored(url: str, run_id: str) -> tuple[RunRecord, list[LogEntry]]:
    async def read() -> tuple[RunRecord, list[LogEntry]]:
        async with Store.open(url) as store, SessionLog(store, Redactor()) as log:
            return await store.get_run(run_id), await log.read(run_id)

    return asyncio.run(read())


def queued_then_killed(baton: BatonCLI, url: str, tmp_path: Path) -> tuple[str, str]:
    """The burst above, SIGKILLed (its whole session, Claude Code included) while the second run
    waits; the two run ids."""
    repos = [make_git_repo(tmp_path / name, {"README.md": f"# {name}\n"}) for name in ("held", "queued")]
    process = subprocess.Popen(
        [sys.executable, "-c", BURST, *map(str, repos)],
        env={**baton.env, "BATON_CONCURRENCY": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        kill_whole_run(process, None)
        pytest.fail(
            f"the burst ended before both runs were started:\n{process.stderr.read() if process.stderr else ''}"
        )
    first, second = line.split()
    time.sleep(0.3)  # six polls of the queue: the second run is still waiting for the slot
    record, entries = stored(url, second)
    assert (record.status, entries) == ("queued", [])
    kill_whole_run(process, first)
    assert not run_process_ids(first)
    return first, second


def until_ready(worker: Started) -> str:
    """The worker's stderr up to its "scanning every" line (its signal handlers are in place).

    Read a byte at a time from the pipe itself: a buffered read would keep what follows the line
    out of reach of the ``communicate`` that reads the rest.
    """
    _, process = worker
    assert process.stderr is not None
    seen = bytearray()
    while not seen.endswith(b"\n") or b"scanning every" not in seen.splitlines()[-1]:
        byte = os.read(process.stderr.fileno(), 1)
        if not byte:
            break
        seen += byte
    return seen.decode()


def assert_started_once_from_its_beginning(url: str, run_id: str) -> None:
    record, entries = stored(url, run_id)
    assert record.status == "finished", record
    methods = [entry["method"] for entry in entries]
    assert methods.count("_baton/run_started") == 1 and "_baton/resume" not in methods
    [opening] = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/run_started"]
    assert (opening["prompt"], opening["allow"]) == ("second", ["Bash(echo:*)"])  # its request, kept
    prompts = [
        entry["payload"]["params"]["prompt"][0]["text"]
        for entry in entries
        if entry["method"] == "session/prompt" and entry["direction"] == "to_agent"
    ]
    assert prompts == ["second"]
    types = [event["type"] for event in project(entries)]
    assert types.count("task.started") == 1 and types[-1] == "task.finished"
    assert not run_process_ids(run_id)


def test_two_workers_race_for_a_queued_run_whose_process_died_and_one_starts_it(
    baton: BatonCLI, model: ScriptedModelServer, database: str, tmp_path: Path
) -> None:
    first, second = queued_then_killed(baton, database, tmp_path)
    workers = [baton.start("worker", "--interval", "0.1") for _ in range(2)]
    try:
        # Both ready before either is told to stop: a SIGTERM before a worker's handlers are in
        # place ends it with -15 (one worker can finish the run while the other still imports).
        early = [until_ready(worker) for worker in workers]
        deadline = time.monotonic() + 60
        while stored(database, second)[0].status != "finished":
            assert time.monotonic() < deadline, "the queued run was not adopted"
            time.sleep(0.1)
        for _, process in workers:
            process.send_signal(signal.SIGTERM)
        stopped = [baton.finish(worker, timeout=30) for worker in workers]
    finally:
        baton.stop(workers)
    stopped = [replace(one, stderr=before + one.stderr) for before, one in zip(early, stopped, strict=True)]
    assert [one.returncode for one in stopped] == [0, 0], [one.describe() for one in stopped]
    adopted = [one for one in stopped if f"adopted run {second}" in one.stderr]
    assert len(adopted) == 1, [one.stderr for one in stopped]
    assert all(one.stderr.count(f"adopted run {second}") <= 1 for one in stopped)
    assert_started_once_from_its_beginning(database, second)
    # The interactive run that held the slot has nothing to do: it stays interrupted, not adopted.
    held, _ = stored(database, first)
    assert effective_status(held.status, held.executor_id, held.heartbeat_at) == "interrupted"
    assert not any(f"adopted run {first}" in one.stderr for one in stopped)


def test_baton_resume_starts_a_queued_run_whose_process_died(
    baton: BatonCLI, model: ScriptedModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{baton.home / 'baton.db'}"
    _, second = queued_then_killed(baton, url, tmp_path)
    resumed = baton("resume", second)
    assert resumed.returncode == 0, resumed.describe()
    assert f"started queued run {second}" in resumed.stdout
    assert_started_once_from_its_beginning(url, second)
    with sqlite3.connect(baton.home / "dbos.sqlite") as connection:
        attempts = connection.execute(
            "SELECT workflow_uuid, status FROM workflow_status WHERE workflow_uuid LIKE ? ORDER BY created_at",
            (f"{second}:%",),
        ).fetchall()
    # The dead process's attempt, never dequeued, is cancelled: nothing may recover it behind baton's back.
    assert attempts == [(f"{second}:1", "CANCELLED"), (f"{second}:2", "SUCCESS")]
    again = baton.here(monkeypatch, "resume", second)  # finished: nothing to resume without a prompt
    assert again.returncode == 3 and "run_ended" in again.stderr, again.describe()
