"""baton's benchmarks: ``make bench`` (``python -m bench [--only NAME]``).

Each benchmark module exposes ``run() -> dict[str, Metric]`` timing the entry point production
uses; :mod:`bench.__main__` runs them, prints a table beside the reference figures and writes
``bench/results.json``. Timed tests never gate merges; these numbers are read by people.
Shared: :func:`median_seconds`, :func:`percentile`, and ``bench/_loopback.py`` (the server on
127.0.0.1 in a thread, and Debian's Chromium through Playwright).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from typing import Literal, NotRequired, TypedDict

__all__ = ["MODULES", "Metric", "median_seconds", "percentile"]

# Benchmark modules, by the name ``--only`` accepts (a metric name works too).
MODULES: dict[str, str] = {
    "append": "bench.append",
    "blob": "bench.blob",
    "convert": "bench.convert",
    "fleet": "bench.fleet",
    "gates": "bench.gates",
    "handoff": "bench.handoff",
    "http": "bench.http",
    "idle_cpu": "bench.idle_cpu",
    "idle_run": "bench.idle_run",
    "inbox": "bench.inbox",
    "mcp_call_overhead": "bench.mcp_call_overhead",
    "otel_export_overhead": "bench.otel_export",
    "replay": "bench.replay",
    "resume": "bench.resume",
    "sandbox_proxy": "bench.sandbox_proxy",
    "sandbox": "bench.sandbox",
    "snapshot": "bench.snapshot",
    "sse_fanout": "bench.sse_fanout",
    "startup": "bench.startup",
    "subprocess_acp": "bench.subprocess_acp",
    "web": "bench.web",
    "web_decision": "bench.web_decision",
    "workflows": "bench.workflows",
    "workspaces": "bench.workspaces",
}


class Metric(TypedDict):
    value: float
    unit: str
    target: float | None  # None: a figure reported, with no target (a scaling curve)
    better: Literal["higher", "lower"]
    reference: float | None
    # True: ``reference`` was measured in this run on the same inputs (bench/_reference.py);
    # False (the default :mod:`bench.__main__` writes): a fixed figure from a note.
    reference_measured: NotRequired[bool]


def median_seconds(
    work: Callable[[], object],
    *,
    runs: int = 5,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median time of ``runs`` calls of ``work`` after ``warmup`` untimed calls.

    ``clock=time.process_time`` measures CPU time: for single-threaded CPU-bound work on a
    shared, noisy machine it is the figure "on one core" without the neighbours' noise.
    """
    for _ in range(warmup):
        work()
    times = []
    for _ in range(runs):
        start = clock()
        work()
        times.append(clock() - start)
    return statistics.median(times)


def percentile(values: Iterable[float], pct: float) -> float:
    """The ``pct``-th percentile of ``values`` (nearest rank, the sample at or above it)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]
