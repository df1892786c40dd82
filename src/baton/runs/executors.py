"""Who executes a run, and whether that executor is still alive.

A process that executes a run records an executor id on it: ``local:<host>:<boot>:<pid>:<start>``
— the host name, the kernel's boot id, the process id and its start time in clock ticks since
boot (``/proc/<pid>/stat`` field 22). A local executor is dead the moment its process is gone:
the pid no longer exists, or it now belongs to a process that started at another time (pids
are reused), or the machine rebooted since. Nothing waits for a timeout.

An executor on another host is judged by the run's ``heartbeat_at``: alive while it is
younger than ``REMOTE_HEARTBEAT_SECONDS``, dead when it is older or was never written.
"""

from __future__ import annotations

import functools
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

__all__ = [
    "REMOTE_HEARTBEAT_SECONDS",
    "effective_status",
    "executor_alive",
    "process_start_ticks",
    "this_executor_id",
]

REMOTE_HEARTBEAT_SECONDS: Final = 120.0


@functools.cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:16]
    except OSError:
        return "unknown"


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None  # a zombie has ended; only its parent has not reaped it
    return int(fields[19])


def this_executor_id() -> str:
    """This process's executor id."""
    pid = os.getpid()
    return f"local:{socket.gethostname()}:{_boot_id()}:{pid}:{process_start_ticks(pid)}"


def executor_alive(executor_id: str | None, heartbeat_at: str | None = None, *, now: datetime | None = None) -> bool:
    """Whether the executor named by ``executor_id`` may still be executing its run."""
    if not executor_id:
        return False
    parts = executor_id.split(":")
    if len(parts) != 5 or parts[0] != "local":
        return _heartbeat_fresh(heartbeat_at, now)
    _, host, boot, pid_text, start_text = parts
    if host != socket.gethostname():
        return _heartbeat_fresh(heartbeat_at, now)
    if boot != _boot_id() or not pid_text.isdigit():
        return False
    ticks = process_start_ticks(int(pid_text))
    return ticks is not None and str(ticks) == start_text


def _heartbeat_fresh(heartbeat_at: str | None, now: datetime | None) -> bool:
    if not heartbeat_at:
        return False
    try:
        beat = datetime.fromisoformat(heartbeat_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    age = ((now or datetime.now(UTC)) - beat).total_seconds()
    return age < REMOTE_HEARTBEAT_SECONDS


def effective_status(status: str, executor_id: str | None, heartbeat_at: str | None = None) -> str:
    """``interrupted`` for a run recorded as ``running`` whose executor is dead; else ``status``.

    A ``paused`` run stays ``paused``: it waits for a decision whoever executes it.
    """
    if status == "running" and not executor_alive(executor_id, heartbeat_at):
        return "interrupted"
    return status
