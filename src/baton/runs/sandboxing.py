"""A run's sandbox from its spec and the settings (docs/sandbox.md).

The mode is the run's ``--sandbox`` if given, else the configured ``sandbox``, else ``bwrap``
where bubblewrap works; the extra paths are the configured ones and the run's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from baton.config import Settings
from baton.runs.spec import RunSpec
from baton.sandbox.plan import SandboxPlan, check_sandbox, plan_sandbox

__all__ = ["allowed_hosts", "check_run_sandbox", "run_sandbox"]


def check_run_sandbox(settings: Settings, spec: RunSpec) -> None:
    """Refuse, before the run is recorded, a sandbox it cannot have (see :func:`check_sandbox`)."""
    read_only, writable = _mounts(settings, spec)
    check_sandbox(spec.sandbox or settings.sandbox, read_only, writable, allow_net=allowed_hosts(settings, spec))


def run_sandbox(settings: Settings, spec: RunSpec, run_id: str, *, agent_paths: Iterable[Path] = ()) -> SandboxPlan:
    """The plan for one execution of ``run_id``: its workspace and agent home writable."""
    read_only, writable = _mounts(settings, spec)
    return plan_sandbox(
        spec.sandbox or settings.sandbox,
        workspace=Path(spec.repo),
        agent_home=settings.run_dir(run_id) / "agent-home",
        baton_home=settings.home,
        read_only=read_only,
        writable=writable,
        agent_paths=agent_paths,
        allow_net=allowed_hosts(settings, spec),
    )


def allowed_hosts(settings: Settings, spec: RunSpec) -> list[str]:
    """The hosts the run's sandboxed agent may reach: the configured ones and the run's own."""
    return [*settings.sandbox_allow_net, *spec.allow_net]


def _mounts(settings: Settings, spec: RunSpec) -> tuple[list[Path], list[Path]]:
    read_only = [*settings.sandbox_mount_ro, *(Path(path) for path in spec.mount_ro)]
    writable = [*settings.sandbox_mount_rw, *(Path(path) for path in spec.mount_rw)]
    return read_only, writable
