"""``make fleet-demo``: a fleet on this machine (docs/fleet.md "Trying it").

A throwaway Postgres (``TemporaryPostgres``), moto's S3 server (``TemporaryS3``), one
``baton serve --no-execute`` and two ``baton worker --concurrency 1``, each with a home of its
own, all on 127.0.0.1. Three tasks are posted to the API (``POST /v1/runs``) on the sample
repository; Claude Code executes them on the workers against baton's scripted model (offline).
It prints the web app's sign-in address, follows the runs to their end, stays up
``BATON_FLEET_DEMO_LINGER`` seconds (default 60) for a look, and stops everything — at once on
Ctrl-C. Nothing is kept: every home and both servers' data live in a temporary folder.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["TASKS", "main"]

TASKS = (
    "Say hello, then list the files of this repository.",
    "Explain what this repository does in one sentence.",
    "Find the failing test and say which file it is in.",
)
_MODEL_KEY = "sk-scripted-fleet-demo-0123456789abcdef"
_TERMINAL = ("finished", "failed", "cancelled")


class _Process:
    """A started ``baton`` process whose stderr lines are read (and collected) by a thread."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.lines: list[str] = []
        self._new = threading.Condition()
        self.process = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._new:
                self.lines.append(line)
                self._new.notify_all()

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        with self._new:
            while True:
                for line in self.lines:
                    if found := re.search(pattern, line):
                        return found
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not print {pattern!r}:\n{''.join(self.lines)[-2000:]}")
                self._new.wait(0.5)

    def terminate(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        """After :meth:`terminate`: its end, or SIGKILL after 20 s."""
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _baton() -> list[str]:
    script = Path(sys.executable).parent / "baton"
    return [str(script)] if script.is_file() else [sys.executable, "-c", "from baton.cli import main; main()"]


def main() -> int:
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, or SIGTERM, even where SIGINT was ignored
        signal.signal(signum, signal.default_int_handler)
    try:
        return _demo()
    except KeyboardInterrupt:
        print("\nbaton fleet demo: stopped")
        return 130


def _demo() -> int:
    import httpx

    from baton.demo import prepare_sample_repo
    from baton.snapshots.blobs import blob_store_for
    from baton.testing import ScriptedModelServer
    from baton.testing.postgres import TemporaryPostgres
    from baton.testing.s3 import TemporaryS3

    linger = float(os.environ.get("BATON_FLEET_DEMO_LINGER", "60"))
    processes: list[_Process] = []
    with (
        tempfile.TemporaryDirectory(prefix="baton-fleet-demo-") as scratch,
        TemporaryPostgres() as database_url,
        TemporaryS3() as s3,
        ScriptedModelServer("plain") as model,
    ):
        root = Path(scratch)
        repo = prepare_sample_repo(root / "calc")
        blob_url = s3.blob_url("baton-fleet-demo")
        blobs = blob_store_for(blob_url, root, s3.environ)
        blobs.create_bucket()  # type: ignore[attr-defined]  # an S3BlobStore here
        shared = {
            "BATON_DATABASE_URL": database_url,
            "BATON_BLOB_URL": blob_url,
            **s3.environ,
            "ANTHROPIC_BASE_URL": model.base_url,
            "ANTHROPIC_API_KEY": _MODEL_KEY,
        }

        def environ(home: str) -> dict[str, str]:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("BATON_", "ANTHROPIC_"))}
            env.update(shared, BATON_HOME=str(root / home))
            return env

        try:
            print(f"baton fleet demo: Postgres {database_url}, S3 {s3.endpoint}, all on 127.0.0.1")
            server = _Process("api", [*_baton(), "serve", "--no-execute", "--port", "0"], environ("api"))
            processes.append(server)
            url = server.wait_for(r"Uvicorn running on (http://127\.0\.0\.1:\d+)").group(1)
            sign_in = server.wait_for(r"^Sign in: (\S+)").group(1)
            for name in ("worker-1", "worker-2"):
                worker = _Process(name, [*_baton(), "worker", "--concurrency", "1"], environ(name))
                processes.append(worker)
                worker.wait_for(r"taking fleet runs")
                print(f"baton fleet demo: {name} is up (home {root / name})")
            token = subprocess.run(
                [*_baton(), "token"], env=environ("api"), capture_output=True, text=True, check=True
            ).stdout.strip()
            headers = {"Authorization": f"Bearer {token}"}
            run_ids = []
            for prompt in TASKS:
                body = {"prompt": prompt, "repo": str(repo), "permission_mode": "acceptEdits"}
                created = httpx.post(f"{url}/v1/runs", json=body, headers=headers, timeout=30)
                created.raise_for_status()
                run_ids.append(created.json()["id"])
            print(f"\nWatch them in the web app: {sign_in}")
            print(f"(the API: {url}/v1/runs; Ctrl-C stops everything)\n")
            seen: dict[str, str] = {}
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                for run_id in run_ids:
                    run = httpx.get(f"{url}/v1/runs/{run_id}", headers=headers, timeout=30).json()
                    said = f"{run['status']} ({run.get('status_reason') or ''})"
                    if seen.get(run_id) != said:
                        seen[run_id] = said
                        print(f"  {run_id}: {said}")
                if all(said.split()[0] in _TERMINAL for said in seen.values()) and len(seen) == len(run_ids):
                    break
                time.sleep(1)
            print(f"\nAll three have ended. Staying up {linger:g} s for a look (Ctrl-C stops now).")
            time.sleep(linger)
        finally:
            for process in processes:  # all at once, then each one's end
                process.terminate()
            for process in processes:
                process.stop()
    print("baton fleet demo: stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
