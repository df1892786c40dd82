"""Inbox latency: a command written by another process reaches the process executing the run.

The production path on both ends: a separate writer process queues ``cancel`` commands with
``baton.runs.inbox.post_command`` (the function ``baton send/close/cancel`` and the Python API
use), noting the wall-clock time when it returns (its commit); the executing process reads
the run's inbox with ``InboxReader`` at the default ``inbox_poll_seconds`` (20 ms) while its
``SessionLog`` appends ~2,000 entries/s for the same run (a busy agent), and stamps the time each
command is handed on. ``COMMANDS`` commands, 30–70 ms apart so that each one waits on its own.
SQLite (WAL, the default store; polled) and Postgres (``TemporaryPostgres``, fsync on; the
reader LISTENs and reads when NOTIFY names its run). Targets: p99 ≤ 50 ms on SQLite, ≤ 20 ms
on Postgres.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from baton.config import Settings
from baton.runs.executors import this_executor_id
from baton.runs.inbox import InboxCommand, InboxReader
from baton.store import Redactor, SessionLog, Store
from baton.testing.postgres import TemporaryPostgres

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("inbox_sqlite_p50_ms", "inbox_sqlite_p99_ms", "inbox_postgres_p50_ms", "inbox_postgres_p99_ms")
COMMANDS = 300
APPENDS_PER_SECOND = 2000

_WRITER = """
import asyncio, json, random, sys, time
from baton.runs.inbox import post_command
from baton.store import Store

async def main(url, run_id, count):
    store = await asyncio.to_thread(Store.open, url)
    committed = {}
    async with store:
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(count):
            await asyncio.sleep(random.uniform(0.03, 0.07))
            inbox_id = await post_command(store, run_id, "cancel", {})
            committed[inbox_id] = time.time()
        await post_command(store, run_id, "close", {})
    print(json.dumps(committed), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def _measure(url: str) -> list[float]:
    store = await asyncio.to_thread(Store.open, url)
    received: dict[int, float] = {}
    done = asyncio.Event()

    async def on_command(command: InboxCommand) -> None:
        received[command.id] = time.time()
        if command.kind == "close":
            done.set()

    async with store, SessionLog(store, Redactor()) as log:
        record = await store.create_run(agent="claude", run_mode="interactive")
        await store.update_run(record.id, status="running", executor_id=this_executor_id())
        log.open_run(record.id)
        writer = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WRITER,
            url,
            record.id,
            str(COMMANDS),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert writer.stdin is not None and writer.stdout is not None
        await writer.stdout.readline()  # its imports and store are ready

        async def busy_agent() -> None:
            payload = {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"text": "x" * 200}}}
            while True:
                for _ in range(APPENDS_PER_SECOND // 100):
                    log.append(record.id, "from_agent", "session/update", payload)
                await log.drain()
                await asyncio.sleep(0.01)

        interval = Settings().inbox_poll_seconds
        async with InboxReader(store, record.id, taken_by="bench", interval=interval, on_command=on_command):
            appender = asyncio.create_task(busy_agent())
            writer.stdin.write(b"go\n")
            await writer.stdin.drain()
            try:
                await asyncio.wait_for(done.wait(), COMMANDS * 0.1 + 60)
            finally:
                appender.cancel()
                await asyncio.gather(appender, return_exceptions=True)
        committed = json.loads(await writer.stdout.readline())
        await writer.wait()
        log.close_run(record.id)
    # The writer's clock stops when post_command returns (its commit), ours when the command is taken.
    return [(received[int(key)] - at) * 1000 for key, at in committed.items()]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _metrics(backend: str, latencies: list[float], p99_target: float) -> dict[str, Metric]:
    return {
        f"inbox_{backend}_p50_ms": {
            "value": round(statistics.median(latencies), 2),
            "unit": "ms",
            "target": p99_target,
            "better": "lower",
            "reference": None,
        },
        f"inbox_{backend}_p99_ms": {
            "value": round(_percentile(latencies, 0.99), 2),
            "unit": "ms",
            "target": p99_target,
            "better": "lower",
            "reference": None,
        },
    }


def run() -> dict[str, Metric]:
    random.seed(7)
    results: dict[str, Metric] = {}
    with tempfile.TemporaryDirectory(prefix="baton-bench-inbox-") as tmp:
        results |= _metrics("sqlite", asyncio.run(_measure(f"sqlite:///{Path(tmp) / 'baton.db'}")), 50.0)
    with TemporaryPostgres() as url:
        results |= _metrics("postgres", asyncio.run(_measure(url)), 20.0)
    return results
