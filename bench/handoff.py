"""``baton export`` and ``baton import`` of a long run: time, and the memory they add.

The run is :func:`bench.resume.build_entries`' realistic Claude log (prompts, streamed text,
tool calls and results, usage), committed to a SQLite store through
:class:`~baton.store.SessionLog`, plus an agent home holding a Claude Code transcript made of
the same turns (``bench.convert``'s stream-json lines, about the log's size). It is built twice:
50k and 200k entries.

Each export and import runs in a **child process** (``python -m bench.handoff``), timed from
the call of :func:`~baton.runs.handoff.export_run` / :func:`~baton.runs.handoff.import_run` to
its return; the child resets its resident-memory high-water mark first (``/proc/self/clear_refs``)
and reports ``VmHWM - VmRSS`` after: the peak resident memory the export or import **added**
(Python objects, SQLite's caches, zlib's buffers — what tracemalloc would not see).

- ``handoff_export_s``, ``handoff_import_s`` (200k entries): CPU time of the child (its store
  threads included; wall time on this shared 2-core machine measures the neighbours — printed
  beside it). Target 10 s each: at most about twice the whole-in-memory code's time (the
  reference). Streaming spools the rows to disk on export and stages them on import — time
  traded for memory — and a 200k-entry run is days of agent work moved by a one-off command.
- ``handoff_export_peak_mb``, ``handoff_import_peak_mb`` (200k): target 64 MB — one page of
  rows (5000 entries), 1 MiB read chunks and one record at a time, whatever the log's length,
  plus SQLite's page cache and zlib's buffers.
- ``handoff_export_peak_growth_mb``, ``handoff_import_peak_growth_mb``: the 200k peak minus the
  50k peak, target 8 MB — memory independent of the log's length.

References: the whole-in-memory ``baton-export/1`` code this replaced (commit 2a8e111),
measured with this bench's children run against that commit's ``src`` (``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baton.config import Settings
from baton.store import Redactor, SessionLog, Store

from . import Metric
from .convert import build_corpus
from .resume import RUN_ID, build_entries, stored_run

__all__ = ["METRICS", "run"]

SIZES = (50_000, 200_000)
METRICS = tuple(
    f"handoff_{direction}_{name}" for direction in ("export", "import") for name in ("s", "peak_mb", "peak_growth_mb")
)
# The whole-in-memory code (baton-export/1, commit 2a8e111), 200k entries, measured with this bench.
REFERENCE = {
    "export_s": 5.8,
    "import_s": 5.4,
    "export_peak_mb": 635.0,
    "import_peak_mb": 766.0,
    "export_peak_growth_mb": 474.0,
    "import_peak_growth_mb": 606.0,
}
_ROOT = Path(__file__).resolve().parent.parent


async def _build(home: Path, count: int) -> None:
    """A finished run of ``count`` log entries and a transcript in its agent home, in ``home``."""
    settings = Settings.load({"BATON_HOME": str(home)})
    home.mkdir(parents=True, exist_ok=True)
    rows = build_entries(count)
    store = Store.open(settings.resolved_database_url)
    async with store, SessionLog(store, Redactor()) as log:
        record = await stored_run(store, log, rows)
        log.close_run(record.id)
        await store.update_run(record.id, status="finished", status_reason="end_turn")
    del rows
    project = settings.run_dir(RUN_ID) / "agent-home" / ".claude" / "projects" / "-home-dev-work2"
    project.mkdir(parents=True)
    with (project / "sess-bench.jsonl").open("w") as transcript:
        for line in build_corpus(count // 2):
            transcript.write(line + "\n")


def _measure(step: str, *args: str) -> dict[str, float]:
    """One export or import in a fresh child process: its seconds and the resident memory it added."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.handoff", step, *args],
        cwd=_ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run() -> dict[str, Metric]:
    results: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="baton-bench-handoff-") as scratch:
        root = Path(scratch)
        for count in SIZES:
            source = root / f"source-{count}"
            asyncio.run(_build(source, count))
            gc.collect()
            out = root / f"run-{count}.tar.gz"
            exported = _measure("export", str(source), str(out))
            target = root / f"repo-{count}"
            target.mkdir()
            imported = _measure("import", str(root / f"target-{count}"), str(out), str(target))
            results[count] = {"export": exported, "import": imported}
            print(
                f"handoff {count:,} entries: {out.stat().st_size / 1e6:.1f} MB file; "
                + "; ".join(
                    f"{step} {f['cpu_s']:.2f} s CPU, {f['wall_s']:.2f} s wall, +{f['peak_mb']:.1f} MB peak"
                    for step, f in results[count].items()
                ),
                file=sys.stderr,
            )
            shutil.rmtree(source)
    small, large = results[SIZES[0]], results[SIZES[-1]]
    metrics: dict[str, Metric] = {}
    for step in ("export", "import"):
        metrics[f"handoff_{step}_s"] = {
            "value": round(large[step]["cpu_s"], 2),
            "unit": "s",
            "target": 10,
            "better": "lower",
            "reference": REFERENCE[f"{step}_s"],
        }
        metrics[f"handoff_{step}_peak_mb"] = {
            "value": round(large[step]["peak_mb"], 1),
            "unit": "MB",
            "target": 64,
            "better": "lower",
            "reference": REFERENCE[f"{step}_peak_mb"],
        }
        metrics[f"handoff_{step}_peak_growth_mb"] = {
            "value": round(large[step]["peak_mb"] - small[step]["peak_mb"], 1),
            "unit": "MB",
            "target": 8,
            "better": "lower",
            "reference": REFERENCE[f"{step}_peak_growth_mb"],
        }
    return metrics


# -- the child process -----------------------------------------------------------------------


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def _child(step: str, args: list[str]) -> dict[str, float]:
    from baton.runs.handoff import export_run, import_run

    home = Path(args[0])
    settings = Settings.load({"BATON_HOME": str(home)})
    home.mkdir(parents=True, exist_ok=True)
    async with Store.open(settings.resolved_database_url) as store:
        await store.list_runs()  # the store and its threads up before the baseline
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        baseline = _status_kb("VmRSS")
        started_wall, started_cpu = time.perf_counter(), _cpu()
        if step == "export":
            await export_run(store, settings, RUN_ID, Path(args[1]))
        else:
            await import_run(store, settings, Path(args[1]), repo=Path(args[2]))
        return {
            "wall_s": time.perf_counter() - started_wall,
            "cpu_s": _cpu() - started_cpu,
            "peak_mb": (_status_kb("VmHWM") - baseline) / 1024,
        }


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_child(sys.argv[1], sys.argv[2:]))))
