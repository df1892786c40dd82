"""``Settings.load``: where baton keeps its state."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.config import Settings
from baton.errors import UsageError


def test_a_relative_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Agents start in their workspace: a home relative to where baton started would name nothing there.
    monkeypatch.chdir(tmp_path)
    settings = Settings.load({"BATON_HOME": ".baton-home"})
    assert settings.home == tmp_path / ".baton-home"
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / '.baton-home' / 'baton.db'}"
    assert Settings.load({}, home=Path("elsewhere")).home == tmp_path / "elsewhere"


def test_the_result_table(tmp_path: Path) -> None:
    (tmp_path / "baton.toml").write_text(
        '[result]\nauthor = "Bot <bot@x>"\npush = true\non_branch = "gh pr create"\nbranch_in_place = true\n'
    )
    settings = Settings.load({"BATON_HOME": str(tmp_path)})
    assert (settings.result_author, settings.result_push) == ("Bot <bot@x>", True)
    assert settings.result_on_branch == "gh pr create" and settings.result_branch_in_place
    assert Settings.load({"BATON_HOME": str(tmp_path / "none")}).result_push is None  # default: clones only
    for bad in ("[result]\npush = 'yes'\n", "[result]\npr = 1\n", "result = 3\n"):
        (tmp_path / "baton.toml").write_text(bad)
        with pytest.raises(UsageError) as refused:
            Settings.load({"BATON_HOME": str(tmp_path)})
        assert refused.value.code == "config_invalid"
