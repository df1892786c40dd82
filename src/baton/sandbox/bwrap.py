"""Whether bubblewrap can contain agents on this machine, asked once per process.

Containment is a PID namespace whose init dies with baton (``--unshare-pid
--die-with-parent``): when baton dies for any reason the kernel ends every process of the run.
The probe starts ``bwrap … true`` with exactly those flags; a machine where it fails (no
bubblewrap, no user namespaces for this user, macOS) gets :class:`Containment` with
``available=False`` and the reason, and baton falls back to a death signal per process
(``setpriv --pdeathsig``) and a sweep by ``BATON_RUN_ID``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BWRAP_VARIABLE", "UNAVAILABLE", "Containment", "containment"]

BWRAP_VARIABLE = "BATON_BWRAP"  # the bubblewrap binary (default: ``bwrap`` on PATH)
UNAVAILABLE = "containment_unavailable"  # the code baton reports where containment cannot be made
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Containment:
    """What the probe found: the binary, its version, and why it cannot be used (if not)."""

    available: bool
    bwrap: str | None = None
    version: str | None = None
    reason: str | None = None

    def describe(self) -> dict[str, str | bool | None]:
        body: dict[str, str | bool | None] = {"available": self.available, "bwrap": self.bwrap, "version": self.version}
        if not self.available:
            body["code"] = UNAVAILABLE
            body["reason"] = self.reason
        return body


def containment() -> Containment:
    """The containment this process can give its agents (probed once per binary)."""
    return _probe(os.environ.get(BWRAP_VARIABLE) or "bwrap")


@functools.cache
def _probe(name: str) -> Containment:
    binary = shutil.which(name)
    if binary is None:
        return Containment(False, reason=f"bubblewrap ({name}) is not installed; run `make bwrap`")
    binary = str(Path(binary).resolve())
    try:
        version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False
        ).stdout.strip()
        probe = subprocess.run(
            [binary, *_PROBE_ARGS, "true"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Containment(False, binary, reason=f"{binary} cannot run: {exc}")
    if probe.returncode != 0:
        said = probe.stderr.strip().splitlines()[-1:] or [f"exit status {probe.returncode}"]
        return Containment(False, binary, version or None, reason=f"{binary} cannot make namespaces: {said[0]}")
    return Containment(True, binary, version.removeprefix("bubblewrap ") or None)


_PROBE_ARGS = (
    "--unshare-pid",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--",
)
