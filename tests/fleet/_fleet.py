"""A fleet on one host for tests and the benchmark: ``baton serve --no-execute`` and ``baton worker``s,
each a "machine" of its own — its own UTS namespace and host name (``unshare --uts``), its own
``BATON_HOME`` (so its own workspaces and mirror cache) — sharing only Postgres and the blob store.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cli._baton_cli import baton_command, cli_environment

from baton.events.entry import LogEntry
from baton.store import Redactor, RunRecord, SessionLog, Store

__all__ = ["TRIVIAL_AGENT", "Fleet", "Proc", "host_of", "read_runs", "until_ended"]

SCRIPT = Path(__file__).resolve().parents[1] / "agents" / "acp_script_agent.py"
TRIVIAL_AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(SCRIPT))} echo 3"


@dataclass
class Proc:
    """A started ``baton`` process and the stderr lines it has printed (read by a thread)."""

    name: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _seen: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def join(self) -> None:
        """Once the process has ended: the rest of its stderr read, the pipe closed."""
        self._reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._seen:
                self.lines.append(line)
                self._seen.notify_all()
        with self._seen:
            self._seen.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first stderr line matching ``pattern``; fails when the process ends or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while True:
                for line in self.lines:
                    if match := re.search(pattern, line):
                        return match
                if self.process.poll() is not None and not self._reading():
                    raise AssertionError(f"{self.name} ended ({self.process.returncode}):\n{self.output}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no line matching {pattern!r} in {timeout} s:\n{self.output}")
                self._seen.wait(min(left, 0.5))

    def _reading(self) -> bool:
        return self.process.stderr is not None and not self.process.stderr.closed and self.process.poll() is None

    @property
    def output(self) -> str:
        return "".join(self.lines)


class Fleet:
    """The processes of one fleet; :meth:`close` ends those still running (SIGTERM, then SIGKILL)."""

    def __init__(self, root: Path, database_url: str, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.database_url = database_url
        self.extra = dict(env or {})
        self.procs: list[Proc] = []

    def environ(self, home: Path, **more: str) -> dict[str, str]:
        env = cli_environment(home)
        env.pop("BATON_WORKSPACE", None)  # a fleet run works in a clone on its worker anyway
        env.update(self.extra)
        env["BATON_DATABASE_URL"] = self.database_url
        env.update(more)
        return env

    def start(self, name: str, *args: str, host: str | None = None, netns: str | None = None, **env: str) -> Proc:
        """``baton ARGS`` in home ``root/name``; ``host``: in a UTS namespace of its own with that host
        name; ``netns``: in that network namespace (``ip netns``)."""
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        command = [*baton_command(), *args]
        if host is not None:
            script = f"hostname {shlex.quote(host)} && exec {shlex.join(command)}"
            command = ["unshare", "--uts", "sh", "-c", script]
        if netns is not None:
            command = ["ip", "netns", "exec", netns, *command]
        process = subprocess.Popen(
            command,
            env=self.environ(home, **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        proc = Proc(name, process)
        self.procs.append(proc)
        return proc

    def server(self) -> tuple[Proc, str]:
        """``baton serve --no-execute`` on a free port; the process and its URL."""
        proc = self.start("api", "serve", "--no-execute", "--port", "0")
        url = proc.wait_for(r"Uvicorn running on (http://127\.0\.0\.1:\d+)").group(1)
        proc.wait_for(r"^Sign in: ")
        return proc, url

    def worker(self, name: str, *args: str, netns: str | None = None, **env: str) -> Proc:
        """``baton worker`` in a "machine" named ``name``, once it takes fleet runs."""
        proc = self.start(name, "worker", "--interval", "0.2", *args, host=name, netns=netns, **env)
        proc.wait_for(r"taking fleet runs")
        return proc

    def baton(self, home: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        path = self.root / home
        path.mkdir(parents=True, exist_ok=True)
        return subprocess.run(
            [*baton_command(), *args],
            env=self.environ(path),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def queue(self, repo: str, prompt: str = "say hello", *, agent_cmd: str = TRIVIAL_AGENT) -> str:
        """``baton run --queue`` of the trivial ACP agent; the run id."""
        done = self.baton(
            "client", "run", prompt, "--repo", repo, "--agent-cmd", agent_cmd, "--trust-agent-permissions", "--queue"
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def close(self) -> None:
        running = [proc.process for proc in self.procs if proc.process.poll() is None]
        for process in running:
            with _suppress():
                os.killpg(process.pid, 15)
        for process in running:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with _suppress():
                    os.killpg(process.pid, 9)
                process.wait()
        for proc in self.procs:
            proc.join()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> bool:
        return kind is not None and issubclass(kind, ProcessLookupError)


def read_runs(url: str, run_ids: list[str]) -> dict[str, tuple[RunRecord, list[LogEntry]]]:
    """Each run's record and its whole log, from the shared store."""

    async def read() -> dict[str, tuple[RunRecord, list[LogEntry]]]:
        async with Store.open(url) as store, SessionLog(store, Redactor()) as log:
            return {run_id: (await store.get_run(run_id), await log.read(run_id)) for run_id in run_ids}

    return asyncio.run(read())


def until_ended(url: str, run_ids: list[str], timeout: float = 120) -> dict[str, RunRecord]:
    """Poll the store until every run has ended; their records."""
    deadline = time.monotonic() + timeout

    async def poll() -> dict[str, RunRecord]:
        async with Store.open(url) as store:
            while True:
                records = {run_id: await store.get_run(run_id) for run_id in run_ids}
                if all(record.is_terminal for record in records.values()) or time.monotonic() > deadline:
                    return records
                await asyncio.sleep(0.2)

    return asyncio.run(poll())


def host_of(executor_id: str | None) -> str | None:
    """The host name in an executor id (``local:<host>:…``)."""
    return executor_id.split(":")[1] if executor_id and executor_id.count(":") == 4 else None
