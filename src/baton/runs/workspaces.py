"""One running run per workspace (docs/design.md "Runs across processes"): ``workspace_busy``.

A workspace is a run's resolved repository. It is busy while another run in it is ``queued``,
``running`` or ``paused`` and that run's executor is alive (:func:`holds_workspace`) —
whichever process executes it. The claim itself is atomic in the store: ``Store.create_run``
and ``Store.claim_run`` given ``exclusive=holds_workspace`` check and write in one transaction
that holds the workspace (baton.store.workspaces), so of two processes starting a run in one
workspace at the same instant exactly one wins. :func:`check_workspace_free` is the early,
advisory check made before an agent is prepared. A run whose executor died does not hold its
workspace: it is ``interrupted`` and may be resumed, or another run started there.
"""

from __future__ import annotations

from pathlib import Path

from baton.runs.executors import executor_alive
from baton.store import Store
from baton.store.records import RunRecord
from baton.store.workspaces import HOLDING_STATUSES, busy_error

__all__ = ["HOLDING_STATUSES", "check_workspace_free", "holds_workspace", "runs_holding"]


def holds_workspace(record: RunRecord) -> bool:
    """Whether ``record`` (queued, running or paused) holds its workspace: its executor is alive."""
    return executor_alive(record.executor_id, record.heartbeat_at)


async def runs_holding(store: Store, repo: Path, *, except_run: str | None = None) -> list[RunRecord]:
    """Live runs in ``repo`` (resolved), other than ``except_run``."""
    target = str(repo.resolve())
    holding = []
    for status in HOLDING_STATUSES:
        for record in await store.list_runs(status=status):
            if record.id == except_run or (record.repo or record.cwd) != target:
                continue
            if holds_workspace(record):
                holding.append(record)
    return holding


async def check_workspace_free(store: Store, repo: Path, *, except_run: str | None = None) -> None:
    """Refuse with ``workspace_busy`` while another live run works in ``repo`` (advisory: the
    store's claim decides a race)."""
    holding = await runs_holding(store, repo, except_run=except_run)
    if holding:
        raise busy_error(holding[0], str(repo.resolve()))
