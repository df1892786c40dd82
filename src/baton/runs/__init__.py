"""Run lifecycle and the ``Baton`` Python API.

``Baton`` and ``RunHandle`` are imported on first use: they pull in the agents' SDKs, which
take seconds to import, and commands that only read the store should not pay for that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.lazy import lazy_exports
from baton.runs.spec import EXIT_CODES, RunOutcome, RunSpec

if TYPE_CHECKING:
    from baton.runs.api import Baton, RunHandle

__all__ = ["EXIT_CODES", "Baton", "RunHandle", "RunOutcome", "RunSpec"]


__getattr__ = lazy_exports(__name__, dict.fromkeys(("Baton", "RunHandle"), "baton.runs.api"))
