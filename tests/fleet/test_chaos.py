"""Chaos (issue 22 §3): three workers, each a "machine" of its own, one of them SIGKILLed at random
every 5–10 s and started again, while tasks run: every task ends ``finished`` exactly once, every
log is gapless, after each takeover only the new executor's agent is in the log, and no run is
left ``running`` without a live executor. The trivial ACP agent (``--agent-cmd``: turns of
chunks, each naming the host that sent it); the slow test runs 30 tasks, the quick one 4.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from tests.conftest import make_git_repo
from tests.fleet._fleet import TRIVIAL_AGENT, Fleet, Proc, read_runs
from tests.fleet.test_failures import hosts_after

from baton.store import Store
from baton.store.liveness import executor_key
from baton.testing.postgres import TemporaryPostgres

WORKERS = ("m1", "m2", "m3")


def chaos(tmp_path: Path, url: str, tasks: int, seed: int) -> None:
    chance = random.Random(seed)
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# chaos\n"})
    with Fleet(tmp_path / "fleet", url, {"BATON_BLOB_URL": f"file://{tmp_path / 'blobs'}"}) as fleet:
        workers: dict[str, Proc] = {name: fleet.worker(name, "--concurrency", "2") for name in WORKERS}
        agent = f"{TRIVIAL_AGENT.removesuffix(' 3')} 24 4"  # turns of 6 s
        done = threading.Event()
        kills: list[str] = []

        def killer() -> None:
            while not done.wait(chance.uniform(5, 10)):
                name = chance.choice(WORKERS)
                os.killpg(workers[name].process.pid, signal.SIGKILL)
                workers[name].process.wait()
                kills.append(name)
                workers[name] = fleet.worker(name, "--concurrency", "2")

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()  # while the tasks are queued too: queueing 30 takes about as long as running them
        try:
            run_ids = [fleet.queue(str(repo), f"task {n}", agent_cmd=agent) for n in range(tasks)]
            records = until_finished(url, run_ids, timeout=60 + tasks * 12)
        finally:
            done.set()
            thread.join()
        outputs = "\n".join(proc.output for proc in fleet.procs)
        assert kills, "nothing was killed"
        stored = read_runs(url, run_ids)
        for run_id, (record, entries) in stored.items():
            assert records[run_id] == "finished", (record.status, record.error_code, record.error_message, outputs)
            assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1)), run_id
            statuses = [e["payload"]["params"]["status"] for e in entries if e["method"] == "_baton/status"]
            assert statuses.count("finished") == 1 and statuses[-1] == "finished", (run_id, statuses)
            resumes = [int(str(e["seq"])) for e in entries if e["method"] == "_baton/resume"]
            for resumed, following in zip(resumes, [*resumes[1:], None], strict=False):
                hosts = hosts_after(entries, resumed) - (hosts_after(entries, following) if following else set())
                assert len(hosts) <= 1, (run_id, hosts)  # one executor between two takeovers
        continued = sum(1 for _, entries in stored.values() if any(e["method"] == "_baton/resume" for e in entries))
        ended = asyncio.run(transitions(url, run_ids))
        assert all(count == 1 for count in ended.values()), ended  # finished exactly once
    print(f"\n{tasks} tasks finished through {len(kills)} kills ({', '.join(kills)}); {continued} continued elsewhere")


def until_finished(url: str, run_ids: list[str], timeout: float) -> dict[str, str]:
    """Poll until every run has ended; meanwhile no run stays ``running`` without a live executor
    for longer than a takeover takes."""
    deadline = time.monotonic() + timeout

    async def poll() -> dict[str, str]:
        orphaned: dict[str, float] = {}
        async with Store.open(url) as store:
            while True:
                records = {run_id: await store.get_run(run_id) for run_id in run_ids}
                live = await store.live_executor_keys()
                now = time.monotonic()
                for run_id, record in records.items():
                    dead = record.status == "running" and (
                        record.executor_id is None or executor_key(record.executor_id) not in live
                    )
                    since = orphaned.setdefault(run_id, now) if dead else orphaned.pop(run_id, None)
                    assert since is None or now - since < 30, f"{run_id} running without a live executor"
                if all(record.is_terminal for record in records.values()) or now > deadline:
                    return {run_id: record.status for run_id, record in records.items()}
                await asyncio.sleep(0.5)

    return asyncio.run(poll())


async def transitions(url: str, run_ids: list[str]) -> dict[str, int]:
    async with Store.open(url) as store:
        return {
            run_id: sum(t.to_status == "finished" for t in await store.list_transitions(run_id)) for run_id in run_ids
        }


@pytest.mark.timeout(240)
def test_chaos_with_a_few_tasks(tmp_path: Path, postgres_server: TemporaryPostgres) -> None:
    chaos(tmp_path, postgres_server.create_schema(), tasks=4, seed=1)


@pytest.mark.slow(seconds=120)
@pytest.mark.timeout(900)
def test_chaos(tmp_path: Path, postgres_server: TemporaryPostgres) -> None:
    chaos(tmp_path, postgres_server.create_schema(), tasks=30, seed=int(time.time()))
