"""Fixtures for the CLI tests: a ``baton`` command with a private ``BATON_HOME``."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI


@pytest.fixture
def baton(tmp_path: Path) -> BatonCLI:
    return BatonCLI(tmp_path / "baton-home")
