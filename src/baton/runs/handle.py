"""``RunHandle``: a run executing in this process, as :meth:`baton.runs.Baton.start` returns it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from baton.errors import RefusedError
from baton.runs.executor import RunExecution
from baton.runs.inbox import post_command
from baton.runs.parking import wait_for_decisions
from baton.runs.resume import ResumePlan
from baton.runs.spec import RunOutcome
from baton.store import RunRecord

if TYPE_CHECKING:
    from baton.runs.api import Baton

__all__ = ["RunHandle"]


async def _outcome_of(done: asyncio.Future[RunOutcome]) -> RunOutcome:
    return await done


class RunHandle:
    """A run executing in this process."""

    resume_plan: ResumePlan | None = None  # set when the run was resumed (docs/resume.md)

    def __init__(self, execution: RunExecution, done: asyncio.Future[RunOutcome], baton: Baton | None = None) -> None:
        self._execution = execution
        self._task = asyncio.create_task(_outcome_of(done), name=f"baton-run-{execution.run_id}")
        self._baton = baton
        self._stop_waiting = asyncio.Event()

    @property
    def run_id(self) -> str:
        return self._execution.run_id

    @property
    def executing(self) -> bool:
        """Whether this execution has not ended yet (a parked run's has)."""
        return not self._task.done()

    async def settled(self) -> None:
        """Wait for this execution to end, whatever its outcome (closing a ``Baton``)."""
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

    def cancel(self) -> None:
        """Ask the agent to stop its turn; the run ends as ``cancelled``."""
        self._execution.request_cancel()
        self._stop_waiting.set()

    async def send(self, text: str) -> int:
        """The next prompt of an interactive run, through its inbox; the inbox id."""
        return await post_command(self._execution.store, self.run_id, "user_message", {"content": text})

    async def close(self) -> int:
        """End an interactive run (``finished``) once the turns asked before are done."""
        return await post_command(self._execution.store, self.run_id, "close", {})

    async def wait(self, *, through_parks: bool = True) -> RunOutcome:
        """The run's outcome. A run that parks on a gate is waited through: once every gate is
        decided (from any process) it resumes here (``Baton.resume``) and this waits for that;
        ``through_parks=False`` returns the ``paused`` outcome at once (``--no-wait``)."""
        outcome = await asyncio.shield(self._task)
        while outcome.status == "paused" and through_parks:
            ended = await self.continue_parked(outcome)
            outcome = ended if ended is not None else await asyncio.shield(self._task)
        return outcome

    async def continue_parked(self, parked: RunOutcome) -> RunOutcome | None:
        """For a parked run: wait for its gates' decisions, then resume it in this process (this
        handle follows the new execution: ``wait`` again) and return None; or the run's outcome
        when it ended while parked (cancelled)."""
        if self._baton is None:
            return parked
        baton = self._baton
        if not await wait_for_decisions(baton.store, self.run_id, stop=self._stop_waiting):
            await baton.cancel_parked(self.run_id)  # cancelled here while parked
        record = await baton.store.get_run(self.run_id)
        if record.status != "paused":
            return _ended(record, parked)
        try:
            handle = await baton.resume(self.run_id)
        except RefusedError as exc:
            if exc.code != "run_ended":  # cancelled from another process just now
                raise
            return _ended(await baton.store.get_run(self.run_id), parked)
        self._follow(handle)
        return None

    def _follow(self, other: RunHandle) -> None:
        """This handle follows ``other``'s execution (the same run, resumed in this process)."""
        self._execution, self._task, self.resume_plan = other._execution, other._task, other.resume_plan


def _ended(record: RunRecord, parked: RunOutcome) -> RunOutcome:
    """The outcome of a parked run that ended without resuming (cancelled while parked)."""
    status = record.status if record.status in ("finished", "failed", "cancelled") else "cancelled"
    return RunOutcome(
        record.id,
        status,  # type: ignore[arg-type]
        stop_reason=record.status_reason or status,
        code=record.error_code,
        message=record.error_message,
        total_cost_usd=record.total_cost_usd,
        gate_id=parked.gate_id,
    )
