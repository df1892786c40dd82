"""Finding and ending the processes of a run.

Every agent process baton starts carries ``BATON_RUN_ID`` in its environment; tool processes
inherit it. Claude Code starts each Bash tool in a session of its own, so killing the agent's
process group is not enough: the run's processes are found by that variable in ``/proc``, among
the processes of this host's UTS namespace: fleet tests run "machines" on one kernel, each in a
UTS namespace of its own, and a worker ending a run it lost must not kill the run's agent on the
"machine" that took it over.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

__all__ = ["RUN_ID_VARIABLE", "kill_process_group", "kill_run_processes", "run_process_ids"]

RUN_ID_VARIABLE = "BATON_RUN_ID"


def run_process_ids(run_id: str, *, exclude: frozenset[int] = frozenset()) -> list[int]:
    """Live processes whose environment holds ``BATON_RUN_ID=<run_id>`` (zombies excluded)."""
    marker = f"{RUN_ID_VARIABLE}={run_id}".encode()
    found: list[int] = []
    here = _uts_namespace("self")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in exclude:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            continue
        if marker in environ.split(b"\0") and _uts_namespace(entry.name) == here:
            found.append(pid)
    return found


def _uts_namespace(pid: str) -> str | None:
    try:
        return str(Path(f"/proc/{pid}/ns/uts").readlink())
    except OSError:
        return None


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_run_processes(run_id: str, *, exclude: frozenset[int] = frozenset(), wait: float = 2.0) -> int:
    """SIGKILL every process of the run (and its group); returns how many were found."""
    exclude = exclude | {os.getpid()}
    pids = run_process_ids(run_id, exclude=exclude)
    for pid in pids:
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            continue
        if pgid != os.getpgid(0):
            kill_process_group(pgid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while pids and time.monotonic() < deadline:
        if not run_process_ids(run_id, exclude=exclude):
            break
        time.sleep(0.02)
    return len(pids)
