"""``Settings.load``: where baton keeps its state."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.config import Settings


def test_a_relative_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Agents start in their workspace: a home relative to where baton started would name nothing there.
    monkeypatch.chdir(tmp_path)
    settings = Settings.load({"BATON_HOME": ".baton-home"})
    assert settings.home == tmp_path / ".baton-home"
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / '.baton-home' / 'baton.db'}"
    assert Settings.load({}, home=Path("elsewhere")).home == tmp_path / "elsewhere"
