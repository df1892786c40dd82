"""One running run per workspace (DESIGN.md "Runs across processes"): ``workspace_busy``.

A workspace is a run's resolved repository. It is busy while another run in it is ``queued``,
``running`` or ``paused`` and that run's executor is alive — whichever process executes it
(the check reads the store, so it holds across processes; two starts racing in the same
instant can both pass it). A run whose executor died does not hold its workspace: it is
``interrupted`` and may be resumed, or another run started there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from baton.errors import RefusedError
from baton.runs.executors import executor_alive
from baton.store import Store
from baton.store.records import RunRecord

__all__ = ["HOLDING_STATUSES", "check_workspace_free", "runs_holding"]

HOLDING_STATUSES: Final = ("queued", "running", "paused")


async def runs_holding(store: Store, repo: Path, *, except_run: str | None = None) -> list[RunRecord]:
    """Live runs in ``repo`` (resolved), other than ``except_run``."""
    target = str(repo.resolve())
    holding = []
    for status in HOLDING_STATUSES:
        for record in await store.list_runs(status=status):
            if record.id == except_run or (record.repo or record.cwd) != target:
                continue
            if executor_alive(record.executor_id, record.heartbeat_at):
                holding.append(record)
    return holding


async def check_workspace_free(store: Store, repo: Path, *, except_run: str | None = None) -> None:
    """Refuse with ``workspace_busy`` while another live run works in ``repo``."""
    holding = await runs_holding(store, repo, except_run=except_run)
    if holding:
        other = holding[0]
        raise RefusedError(
            "workspace_busy",
            f"run {other.id} is {other.status} in {repo.resolve()}; one running run per workspace",
            details={"run_id": other.id, "status": other.status},
        )
