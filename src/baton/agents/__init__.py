"""agents."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["AGENTS_DIR"]

AGENTS_DIR = Path(os.environ.get("BATON_AGENTS_DIR") or Path(__file__).resolve().parents[3] / "agents")
"""The npm prefix ``make setup`` installs pinned agents into (``BATON_AGENTS_DIR`` elsewhere)."""
