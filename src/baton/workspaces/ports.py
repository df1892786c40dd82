"""``BATON_PORT_BASE``: a block of 10 free TCP ports of a run's own, for the dev servers of runs
working side by side (docs/workspaces.md).

A block is claimed by a file ``BATON_HOME/ports/<base>`` holding the run id (``O_EXCL``: two
runs never get one block) and every port of it is checked free on 127.0.0.1 when claimed. The
claim lasts until the run's workspace is removed (``baton gc``, ``baton rm``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from pathlib import Path
from typing import Final

from baton.errors import WorkspaceError

__all__ = ["PORT_BLOCK", "claim_ports", "release_ports"]

PORT_BLOCK: Final = 10
_FIRST: Final = 20000
_BLOCKS: Final = 3000  # 20000 … 49999, below the usual ephemeral range


def _free(port: int) -> bool:
    """Nothing listens on or holds ``port``; a port left in ``TIME_WAIT`` by a closed connection
    counts as free, as it does for the servers that set ``SO_REUSEADDR`` (nearly all)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def claim_ports(home: Path, run_id: str) -> int:
    """The base of a block of ``PORT_BLOCK`` free ports claimed for ``run_id`` (its own claim again
    if it has one)."""
    folder = home / "ports"
    folder.mkdir(parents=True, exist_ok=True)
    for claim in folder.iterdir():
        with contextlib.suppress(OSError, ValueError):
            if claim.read_text().strip() == run_id:
                return int(claim.name)
    start = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") % _BLOCKS
    for step in range(_BLOCKS):
        base = _FIRST + ((start + step) % _BLOCKS) * PORT_BLOCK
        claim = folder / str(base)
        try:
            descriptor = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(descriptor, "w") as out:
            out.write(run_id + "\n")
        if all(_free(port) for port in range(base, base + PORT_BLOCK)):
            return base
        claim.unlink(missing_ok=True)
    last = _FIRST + _BLOCKS * PORT_BLOCK - 1
    raise WorkspaceError(
        "workspace_failed",
        f"no block of {PORT_BLOCK} free ports is left in {_FIRST}–{last} for BATON_PORT_BASE: each kept "
        "workspace holds one until it is removed (baton gc, baton rm)",
    )


def release_ports(home: Path, run_id: str) -> None:
    folder = home / "ports"
    if not folder.is_dir():
        return
    for claim in folder.iterdir():
        with contextlib.suppress(OSError):
            if claim.read_text().strip() == run_id:
                claim.unlink()
