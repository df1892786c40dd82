"""Durable append through ``SessionLog.append`` (group commit), on SQLite and on Postgres.

The production path: a :class:`~baton.store.SessionLog` over a :class:`~baton.store.Store`
with a :class:`~baton.store.Redactor` holding a few secrets; ~300-byte ``session/update``
payloads. Postgres is a fresh local server (``TemporaryPostgres``, fsync on), SQLite a WAL
file on the same disk.

- Throughput: ``ENTRIES`` appends as fast as one producer can go (``await log.drain()``
  every 1000, as producers do), until ``flush()`` says all are committed. Median of ``RUNS``.
- Latency: append → a subscriber receives the entry (it is committed by then), at a steady
  ~10k entries/s in bursts of 100 every 10 ms; p99 over all entries of ``RUNS`` runs.

Targets from the issue: ≥ 80k entries/s on SQLite, ≥ 50k on Postgres, p99 ≤ 20 ms. The
reference is the TypeScript runtime's ~100k lines buffered per 0.45–1.2 s (not durable).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from baton.store import Redactor, SessionLog, Store
from baton.testing.postgres import TemporaryPostgres

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = (
    "append_sqlite_entries_per_s",
    "append_postgres_entries_per_s",
    "append_sqlite_p99_ms",
    "append_postgres_p99_ms",
)
ENTRIES = 200_000
RUNS = 3
LATENCY_SECONDS = 2.0
BURST = 100
SECRETS = ["sk-ant-bench-0123456789abcdef", "ghp_benchtoken0123456789", "baton-local-token-abcdef012345"]
REFERENCE_LINES_PER_S = 100_000 / 0.825  # TypeScript runtime, buffered, midpoint of 0.45–1.2 s


def payloads(count: int = 1000) -> list[dict[str, Any]]:
    """Distinct ~300-byte agent message chunks, as the ACP transport logs them."""
    return [
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "0f4c2a8e-5b1d-4e6f-9a3c-7d2b8e1f6a40",
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {
                        "type": "text",
                        "text": f"chunk {n}: the agent explains what it will change in src/app.py and why, "
                        "then runs the tests to check that nothing else broke along the way.",
                    },
                },
            },
        }
        for n in range(count)
    ]


async def _throughput(store: Store) -> float:
    messages = payloads()
    run_id = (await store.create_run(agent="bench")).id
    async with SessionLog(store, Redactor(SECRETS)) as log:
        log.open_run(run_id)
        append = log.append
        start = time.perf_counter()
        for block in range(0, ENTRIES, 1000):
            for n in range(block, block + 1000):
                append(run_id, "from_agent", "session/update", messages[n % 1000])
            await log.drain()
        await log.flush()
        elapsed = time.perf_counter() - start
    return ENTRIES / elapsed


async def _latencies(store: Store) -> list[float]:
    messages = payloads()
    run_id = (await store.create_run(agent="bench")).id
    appended: dict[int, float] = {}
    seen: list[float] = []
    async with SessionLog(store, Redactor(SECRETS)) as log:
        log.open_run(run_id)

        async def follow() -> None:
            async with contextlib.aclosing(log.subscribe(run_id)) as entries:
                async for entry in entries:
                    seen.append(time.perf_counter() - appended[entry["seq"]])

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.05)
        deadline = time.perf_counter() + LATENCY_SECONDS
        tick = time.perf_counter()
        n = 0
        while time.perf_counter() < deadline:
            for _ in range(BURST):
                appended[log.append(run_id, "from_agent", "session/update", messages[n % 1000])] = time.perf_counter()
                n += 1
            tick += 0.01
            await asyncio.sleep(max(0.0, tick - time.perf_counter()))
        log.close_run(run_id)
        await follower
    return seen


def _p99_ms(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] * 1000


async def _measure(url: str) -> tuple[float, float]:
    store = await asyncio.to_thread(Store.open, url)
    async with store:
        await _throughput(store)  # warm-up: imports, caches, the server's buffers
        rates = [await _throughput(store) for _ in range(RUNS)]
        latencies: list[float] = []
        for _ in range(RUNS):
            latencies += await _latencies(store)
    return statistics.median(rates), _p99_ms(latencies)


def _metrics(backend: str, rate: float, p99: float, rate_target: float) -> dict[str, Metric]:
    return {
        f"append_{backend}_entries_per_s": {
            "value": round(rate),
            "unit": "entries/s",
            "target": rate_target,
            "better": "higher",
            "reference": round(REFERENCE_LINES_PER_S),
        },
        f"append_{backend}_p99_ms": {
            "value": round(p99, 2),
            "unit": "ms",
            "target": 20.0,
            "better": "lower",
            "reference": None,
        },
    }


def run() -> dict[str, Metric]:
    results: dict[str, Metric] = {}
    with tempfile.TemporaryDirectory(prefix="baton-bench-append-") as tmp:
        rate, p99 = asyncio.run(_measure(f"sqlite:///{Path(tmp) / 'baton.db'}"))
        results.update(_metrics("sqlite", rate, p99, 80_000))
    with TemporaryPostgres() as url:
        rate, p99 = asyncio.run(_measure(url))
        results.update(_metrics("postgres", rate, p99, 50_000))
    return results


if __name__ == "__main__":
    for name, metric in run().items():
        print(f"{name}: {metric['value']:,} {metric['unit']} (target {metric['target']:,})")
