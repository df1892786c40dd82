"""CPU used by idle baton processes: a parked ``baton run``, an idle ``baton serve``, an idle ``baton worker``.

The real processes, started as a user would (the ``baton`` script of this environment), each on a home of its own,
against baton's scripted model; measured over ``SECONDS`` from ``/proc/PID/stat`` (utime +
stime, and cutime + cstime for children it reaped) of the process and every descendant, in % of
one core. The three are measured at the same time (CPU time is per process, so they do not
count each other's). Target ≤ 1 % each.

- ``idle_cpu_run_parked_pct``: ``baton run --scenario gate-park`` (grace 0.5 s) once it
  parked on its gate and waits for a decision (the agent stopped; DBOS launched). After the
  window the gate is approved from this process; the run must then finish (exit 0): the
  wake-up is checked, not timed.
- ``idle_cpu_serve_pct``: ``baton serve`` after it executed one run to its end over HTTP (so
  DBOS is launched), with no run and no client.
- ``idle_cpu_worker_pct``: ``baton worker`` on an empty home (DBOS launched, scanning).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baton.gates.ledger import GateLedger
from baton.store import Store
from baton.testing import ScriptedModelServer

from . import Metric

__all__ = ["METRICS", "run", "tree_cpu_seconds"]

METRICS = ("idle_cpu_run_parked_pct", "idle_cpu_serve_pct", "idle_cpu_worker_pct")
SECONDS = 60.0
KEY = "sk-bench-idle-0123456789abcdef"
_HZ = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> dict[int, float]:
    """CPU seconds of ``root`` and each descendant (own time plus reaped children's), by pid."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        times[int(entry.name)] = sum(int(value) for value in fields[11:15]) / _HZ  # utime stime cutime cstime
    found: dict[int, float] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in times:
            found[pid] = times[pid]
        todo.extend(children.get(pid, ()))
    return found


def _used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two snapshots: a process that appeared counts whole; one that ended
    and was reaped counts in its parent's cutime."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# idle\n")
    git = ["git", "-C", str(path), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run([*git, *args], check=True)
    return path


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("BATON_", "ANTHROPIC_"))}
    return {**env, "BATON_HOME": str(home), **extra}


def _baton(*args: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("baton")), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _until(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s")
        time.sleep(0.2)
    return found


def _paused(store: Store) -> list[str]:
    from sqlalchemy import select

    from baton.store.tables import runs

    with store.engine.connect() as connection:
        rows = connection.execute(select(runs.c.id).where(runs.c.status == "paused", runs.c.executor_id.is_(None)))
        return [str(row[0]) for row in rows]


def _serve_url(log: Path) -> str | None:
    for line in log.read_text(errors="replace").splitlines():
        if "Uvicorn running on " in line:
            return line.split("Uvicorn running on ", 1)[1].split()[0]
    return None


def _http(method: str, url: str, token: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _run_ended(url: str, token: str, run_id: str) -> bool:
    return _http("GET", f"{url}/v1/runs/{run_id}", token)["status"] in ("finished", "failed", "cancelled")


async def _approve(home: Path, run_id: str) -> None:
    store = Store.open(f"sqlite:///{home / 'baton.db'}")
    async with store:
        ledger = GateLedger(store)
        (gate,) = await ledger.list(run_id=run_id, status="pending")
        binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
        await ledger.decide(gate.id, {"decision": "approve", **binding}, decided_by="bench")


def _measure(tmp: Path) -> dict[str, float]:
    import asyncio

    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: tmp / f"{name}.log" for name in ("run", "serve", "worker")}
    with ScriptedModelServer("plain") as plain:
        try:
            run_home = tmp / "run-home"
            processes["run"] = _baton(
                "run",
                "touch a file",
                "--repo",
                str(_repo(tmp / "run-repo")),
                "--scenario",
                "gate-park",
                env=_env(run_home, BATON_GATE_GRACE_SECONDS="0.5"),
                log=logs["run"],
            )
            serve_home = tmp / "serve-home"
            model = {"ANTHROPIC_BASE_URL": plain.base_url, "ANTHROPIC_API_KEY": KEY}
            processes["serve"] = _baton("serve", "--port", "0", env=_env(serve_home, **model), log=logs["serve"])
            processes["worker"] = _baton("worker", env=_env(tmp / "worker-home"), log=logs["worker"])

            url = _until("baton serve listening", lambda: _serve_url(logs["serve"]))
            token = _until("the server's token", lambda: _token(serve_home))
            body = {"prompt": "hello", "repo": str(_repo(tmp / "serve-repo"))}
            started = _http("POST", f"{url}/v1/runs", token, body)
            _until("the served run ending", lambda: _run_ended(url, token, started["id"]))
            parked = _until("the run parking", lambda: next(iter(_paused_ids(run_home)), None))
            _until("the worker scanning", lambda: "scanning every" in logs["worker"].read_text(errors="replace"))
            time.sleep(3)  # the parked run's agent gone and reaped, the served run's too
            for name, process in processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"baton {name} exited early: {logs[name].read_text(errors='replace')}")
            before = {name: tree_cpu_seconds(process.pid) for name, process in processes.items()}
            start = time.monotonic()
            time.sleep(SECONDS)
            after = {name: tree_cpu_seconds(process.pid) for name, process in processes.items()}
            elapsed = time.monotonic() - start
            used = {name: 100 * _used(before[name], after[name]) / elapsed for name in processes}

            asyncio.run(_approve(run_home, parked))  # the wake-up must still work: the run finishes
            code = processes["run"].wait(timeout=120)
            if code != 0:
                raise RuntimeError(f"the parked run ended {code}: {logs['run'].read_text(errors='replace')}")
            return used
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()
            for process in processes.values():
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _token(home: Path) -> str | None:
    path = home / "api-token"
    return path.read_text().strip() if path.exists() else None


def _paused_ids(home: Path) -> list[str]:
    database = home / "baton.db"
    if not database.exists():
        return []
    store = Store.open(f"sqlite:///{database}")
    try:
        return _paused(store)
    finally:
        store.close()


def _metric(value: float) -> Metric:
    return {"value": round(value, 2), "unit": "% of a core", "target": 1.0, "better": "lower", "reference": None}


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-idle-cpu-") as tmp:
        used = _measure(Path(tmp))
    return {
        "idle_cpu_run_parked_pct": _metric(used["run"]),
        "idle_cpu_serve_pct": _metric(used["serve"]),
        "idle_cpu_worker_pct": _metric(used["worker"]),
    }
