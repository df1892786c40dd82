"""``otel_export_overhead``: the session log's append throughput with OpenTelemetry export on and off.

The production path: ``SessionLog.append`` over a SQLite store (as bench/append.py), with
``baton.observability.Telemetry`` installed as the commit hook the way ``Baton`` installs it
(logs, traces and metrics over OTLP/HTTP to a collector on loopback: a small server in another
process that reads each body and answers 200), or with nothing configured (no hook: what every
run pays when no endpoint is set).

- ``otel_export_off_entries_per_s`` / ``otel_export_on_entries_per_s``: ``ENTRIES`` appends as
  fast as one producer can go, until all are committed; median of ``RUNS``.
- ``otel_export_ratio``: on / off (target ≥ 0.8).
- ``otel_export_cpu_us_per_entry``: the process's CPU (every thread: the loop, the log writer,
  the SDK's exporter) per entry with export on, until everything is exported, minus the same
  with export off (target 50 µs: the issue sets none; at a run's tens of entries a second that
  is well under a per cent of a core).
- ``otel_export_lost``: entries the export dropped or failed to deliver in the "on" runs (target
  0: a ratio measured while entries are dropped would not count their export);
- ``otel_export_off_noise``: two "off" medians, the larger over the smaller: what "within
  noise" means on this machine for the off path (nothing configured costs one ``None`` check per
  commit group and per row built).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baton.observability import Telemetry, TelemetryConfig
from baton.store import Redactor, SessionLog, Store

from . import Metric
from .append import SECRETS, payloads

__all__ = ["METRICS", "run"]

METRICS = (
    "otel_export_off_entries_per_s",
    "otel_export_on_entries_per_s",
    "otel_export_ratio",
    "otel_export_cpu_us_per_entry",
    "otel_export_lost",
    "otel_export_off_noise",
)
ENTRIES = 50_000
RUNS = 5
COLLECTOR = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


async def _append(store: Store, telemetry: Telemetry | None) -> tuple[float, float]:
    """(entries/s until committed, CPU seconds until exported)."""
    messages = payloads()
    run_id = (await store.create_run(agent="bench")).id
    cpu = time.process_time()
    async with SessionLog(store, Redactor(SECRETS)) as log:
        if telemetry is not None:
            log.observe_commits(telemetry.committed)
            telemetry.begin_run(run_id, task_id=None, agent="bench", owner=None)
        log.open_run(run_id)
        append = log.append
        start = time.perf_counter()
        for block in range(0, ENTRIES, 1000):
            for n in range(block, block + 1000):
                append(run_id, "from_agent", "session/update", messages[n % 1000])
            await log.drain()
        await log.flush()
        elapsed = time.perf_counter() - start
    if telemetry is not None:
        await asyncio.to_thread(telemetry.flush)
    return ENTRIES / elapsed, time.process_time() - cpu


async def _measure(url: str, endpoint: str) -> dict[str, list[tuple[float, float]]]:
    store = await asyncio.to_thread(Store.open, url)
    config = TelemetryConfig.load({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": [], "off2": [], "lost": []}
    async with store:
        await _append(store, None)  # warm-up
        for _ in range(RUNS):
            results["off"].append(await _append(store, None))
            telemetry = Telemetry.start(config)
            assert telemetry is not None
            results["on"].append(await _append(store, telemetry))
            telemetry.shutdown(5.0)
            health = telemetry.health
            lost = health.emitted_items["logs"] - health.exported_items["logs"] + sum(health.lost_items.values())
            results["lost"].append((float(lost), 0.0))
            results["off2"].append(await _append(store, None))
    return results


def run() -> dict[str, Metric]:
    collector = subprocess.Popen([sys.executable, "-c", COLLECTOR], stdout=subprocess.PIPE, text=True)
    try:
        assert collector.stdout is not None
        endpoint = f"http://127.0.0.1:{collector.stdout.readline().strip()}"
        with tempfile.TemporaryDirectory(prefix="baton-bench-otel-") as tmp:
            results = asyncio.run(_measure(f"sqlite:///{Path(tmp) / 'baton.db'}", endpoint))
    finally:
        collector.terminate()
        collector.wait(10)
    off = statistics.median(rate for rate, _cpu in results["off"])
    off2 = statistics.median(rate for rate, _cpu in results["off2"])
    on = statistics.median(rate for rate, _cpu in results["on"])
    cpu_off = statistics.median(cpu for _rate, cpu in results["off"] + results["off2"])
    cpu_on = statistics.median(cpu for _rate, cpu in results["on"])
    return {
        "otel_export_off_entries_per_s": _metric(off, "entries/s", 80_000, "higher"),
        "otel_export_on_entries_per_s": _metric(on, "entries/s", 64_000, "higher"),
        "otel_export_ratio": _metric(on / off, "ratio", 0.8, "higher", digits=2),
        "otel_export_cpu_us_per_entry": _metric(
            (cpu_on - cpu_off) / ENTRIES * 1e6, "us/entry", 50.0, "lower", digits=1
        ),
        "otel_export_lost": _metric(sum(n for n, _ in results["lost"]), "entries", 0, "lower"),
        "otel_export_off_noise": _metric(max(off, off2) / min(off, off2), "ratio", 1.1, "lower", digits=2),
    }


def _metric(value: float, unit: str, target: float, better: str, *, digits: int = 0) -> Metric:
    rounded = round(value, digits) if digits else round(value)
    return {"value": rounded, "unit": unit, "target": target, "better": better, "reference": None}  # type: ignore[typeddict-item]


if __name__ == "__main__":
    for name, metric in run().items():
        print(f"{name}: {metric['value']:,} {metric['unit']} (target {metric['target']:,})")
