"""baton: run AI coding agents on tasks in git repositories, observable, controllable, durable.

The public surface: ``from baton import Baton, RunSpec, Settings, BatonError`` (and ``Runs``,
the light queries). ``Baton`` and ``Runs`` are imported on first use: ``Baton`` pulls in the
agents' SDKs (seconds), and importing ``baton`` alone stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.config import VERSION, Settings
from baton.errors import BatonError
from baton.lazy import lazy_exports

if TYPE_CHECKING:
    from baton.runs.api import Baton
    from baton.runs.queries import Runs
    from baton.runs.spec import RunSpec

__all__ = ["Baton", "BatonError", "RunSpec", "Runs", "Settings", "__version__"]

__version__ = VERSION

_LAZY = {"Baton": "baton.runs.api", "RunSpec": "baton.runs.spec", "Runs": "baton.runs.queries"}


__getattr__ = lazy_exports(__name__, _LAZY)
