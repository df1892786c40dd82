"""``baton run``'s workspace options refused before a run is recorded, and the configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process
from tests.workspaces.conftest import bare_clone, fingerprint

from baton.config import Settings
from baton.errors import UsageError


@pytest.mark.parametrize(
    ("extra", "code", "exit_code"),
    [
        (("--base", "no-such-ref"), "ref_not_found", 1),
        (("--workspace", "nowhere"), "invalid_argument", 2),
        (("--workspace", "in-place", "--base", "main"), "invalid_argument", 2),
    ],
)
def test_run_refuses_a_workspace_it_cannot_make(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo: Path, extra: tuple[str, ...], code: str, exit_code: int
) -> None:
    before = fingerprint(repo)
    home = tmp_path / "home"
    args = ("run", "x", "--repo", str(repo), "--scenario", "plain", *extra)
    done = invoke_in_process(monkeypatch, home, *args, env={"BATON_WORKSPACE": "worktree"})
    assert done.returncode == exit_code and code in done.stderr, done.describe()
    assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())
    listed = invoke_in_process(monkeypatch, home, "runs", "--json")
    assert listed.stdout.strip() == "[]"  # nothing recorded
    assert fingerprint(repo) == before


def test_a_bare_repository_is_cloned_and_cannot_be_worked_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo: Path
) -> None:
    bare = bare_clone(repo, tmp_path / "bare.git")
    refused = invoke_in_process(
        monkeypatch,
        tmp_path / "home",
        "run",
        "x",
        "--repo",
        str(bare),
        "--workspace",
        "worktree",
        "--scenario",
        "plain",
    )
    assert refused.returncode == 2 and "is a bare repository (no working tree): use --workspace clone" in refused.stderr
    unreachable = invoke_in_process(
        monkeypatch, tmp_path / "home", "run", "x", "--repo", "file:///nonexistent/r.git", "--scenario", "plain"
    )
    assert unreachable.returncode == 1 and "clone_failed" in unreachable.stderr, unreachable.describe()


def test_the_configuration_names_the_kind_retention_and_trusted_repositories(tmp_path: Path) -> None:
    (tmp_path / "baton.toml").write_text('[workspace]\nkind = "in-place"\nretention = "12h"\ntrusted = ["/src/app"]\n')
    settings = Settings.load({"BATON_HOME": str(tmp_path)})
    assert (settings.workspace, settings.workspace_retention_seconds, settings.workspace_trusted) == (
        "in-place",
        43200.0,
        ("/src/app",),
    )
    assert Settings.load({"BATON_HOME": str(tmp_path), "BATON_WORKSPACE": "clone"}).workspace == "clone"
    for text, message in (
        ('workspace = "everywhere"', "workspace.kind must be one of"),
        ('[workspace]\nretention = "soon"', "is not a duration"),
    ):
        (tmp_path / "baton.toml").write_text(text + "\n")
        with pytest.raises(UsageError) as caught:
            Settings.load({"BATON_HOME": str(tmp_path)})
        assert caught.value.code == "config_invalid" and message in caught.value.message
