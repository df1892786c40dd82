"""Run lifecycle and the ``Baton`` Python API."""

from baton.runs.api import Baton, RunHandle
from baton.runs.spec import EXIT_CODES, RunOutcome, RunSpec

__all__ = ["EXIT_CODES", "Baton", "RunHandle", "RunOutcome", "RunSpec"]
