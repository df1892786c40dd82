"""DBOS's private names that baton relies on, in one place: DBOS 3.4.0 (pinned ``dbos==3.4.0``
in pyproject.toml). Nothing else in baton touches a private name of DBOS; a new DBOS version is
checked against this module (tests/runs/test_workflows.py drives both functions).
"""

from __future__ import annotations

from dbos import DBOS

__all__ = ["quiet", "workflows_active"]


def workflows_active() -> bool:
    """Whether DBOS's launched instance (if any) still has workflows recording their ends."""
    from dbos import _dbos

    dbos = _dbos._dbos_global_instance
    return dbos is not None and bool(dbos._active_workflows_set.activeList())


def quiet(dbos: DBOS, seconds: float) -> None:
    """Slow DBOS's loops that serve nothing baton uses (pinned DBOS: private names), before launch.

    Its internal queue (scheduled workflows, Kafka, ``resume_workflow``: none used) is polled,
    and its background jobs (delayed workflows, workflow timeouts: none used) run, every
    ``seconds`` instead of every second; its scheduler (no schedules) skips its
    first minute of polls every second (it polls every 30 s after). All stop at once on
    ``DBOS.destroy``.
    """
    from dbos import _scheduler, _workflow_commands

    dbos._registry.get_internal_queue()._polling_interval_sec = seconds
    _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC = seconds
    _scheduler._STARTUP_FAST_POLL_DURATION_SEC = 0.0
