"""``baton --version`` through the installed console script."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI

import baton

pytestmark = pytest.mark.timeout(60)


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    done = BatonCLI(tmp_path / "home")("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"baton {baton.__version__}\n", "")
