"""``baton gc --runs``: retention for whole runs, and ``baton gc`` keeping a real run's unmerged
branch. Real Claude Code runs on baton's scripted model (an in-place run and a worktree run, each
with its log, snapshots and archives), real git: the ended runs older than ``--older-than``
(default ``[runs] retention``) go as ``baton rm`` removes them; one whose workspace holds an
unmerged, unpushed branch stays unless ``--force``; a live run is never touched; ``--dry-run``
removes nothing; the branch itself is never deleted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process
from tests.workspaces.conftest import fingerprint, git, load_settings

from baton.config import Settings
from baton.errors import NotFoundError, UsageError
from baton.runs import Baton, RunSpec
from baton.snapshots.blobs import LocalBlobStore
from baton.store import Store

pytestmark = pytest.mark.claude

WRITE = {"scenario": "write-prompt-file", "permission_mode": "acceptEdits"}


def _gc_runs(monkeypatch: pytest.MonkeyPatch, settings: Settings, *args: str) -> tuple[int, object]:
    done = invoke_in_process(monkeypatch, settings.home, "gc", "--runs", *args, "--json", env={"BATON_WORKSPACE": ""})
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


async def _archives(settings: Settings, run_id: str) -> list[Path]:
    async with Store.open(settings.resolved_database_url) as store:
        keys = [str(s["archive_key"]) for s in await store.list_snapshots(run_id) if s.get("archive_key")]
    return [LocalBlobStore(settings.home / "blobs").path_of(key) for key in keys]


async def _exists(settings: Settings, run_id: str) -> bool:
    async with Store.open(settings.resolved_database_url) as store:
        try:
            await store.get_run(run_id)
        except NotFoundError:
            return False
        return True


@pytest.mark.slow(seconds=30)
def test_gc_runs_removes_old_ended_runs_entirely_and_keeps_an_unmerged_branchs_run(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(tmp_path / "home")

    async def two_runs() -> tuple[str, str, str]:
        async with Baton(settings) as baton:
            in_place = await baton.run(RunSpec(prompt="a.txt", repo=repo, workspace="in-place", **WRITE))  # type: ignore[arg-type]
            worktree = await baton.run(RunSpec(prompt="b.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
            assert (in_place.status, worktree.status) == ("finished", "finished")
            live = await baton.store.create_run(agent="claude", repo=str(repo), cwd=str(repo), request={"prompt": "x"})
            await baton.store.update_run(live.id, status="running")  # as its executor would
            return in_place.run_id, worktree.run_id, live.id

    in_place, worktree, live = asyncio.run(two_runs())
    archives = asyncio.run(_archives(settings, in_place))
    assert archives and all(path.is_file() for path in archives)
    workspace = settings.workspace_dir(worktree)
    branch = f"baton/{worktree[-8:]}"
    assert workspace.is_dir() and git(repo, "rev-parse", "--verify", branch)
    before = fingerprint(repo)

    # The run's branch is its result's (runs.result): `baton workspaces` names it and `baton gc`
    # keeps the workspace of an unmerged, unpushed one.
    listed = invoke_in_process(monkeypatch, settings.home, "workspaces", "--json", env={"BATON_WORKSPACE": ""})
    assert [(entry["run_id"], entry["branch"]) for entry in json.loads(listed.stdout)] == [(worktree, branch)]
    gc = invoke_in_process(monkeypatch, settings.home, "gc", "--json", env={"BATON_WORKSPACE": ""})
    assert gc.returncode == 0 and json.loads(gc.stdout)["removed"] == [], gc.describe()
    assert json.loads(gc.stdout)["kept"][0]["reason"] == f"branch {branch} is neither merged nor pushed"
    assert workspace.is_dir()

    # no --older-than and no [runs] retention: refused (it removes runs entirely)
    code, refused = _gc_runs(monkeypatch, settings)
    assert code == 2 and "give --older-than" in str(refused), refused

    code, recent = _gc_runs(monkeypatch, settings, "--older-than", "1d")
    assert code == 0 and isinstance(recent, dict) and recent["removed"] == []
    assert {entry["run_id"]: entry["reason"] for entry in recent["kept"]} == {
        in_place: "ended too recently (--older-than)",
        worktree: "ended too recently (--older-than)",
    }  # the running run is no candidate at all

    code, dry = _gc_runs(monkeypatch, settings, "--older-than", "0s", "--dry-run")
    assert code == 0 and isinstance(dry, dict) and dry["dry_run"]
    assert [entry["run_id"] for entry in dry["removed"]] == [in_place]
    [kept] = dry["kept"]
    assert kept["run_id"] == worktree
    assert kept["reason"] == f"its workspace {workspace}: branch {branch} is neither merged nor pushed"
    assert asyncio.run(_exists(settings, in_place)) and all(path.is_file() for path in archives)  # nothing removed

    code, done = _gc_runs(monkeypatch, settings, "--older-than", "0s")
    assert code == 0 and isinstance(done, dict) and not done["dry_run"]
    [removed] = done["removed"]
    assert removed["run_id"] == in_place and removed["status"] == "finished"
    assert removed["blobs_removed"] == len(set(archives)) and removed["workspace_removed"] is None
    assert not asyncio.run(_exists(settings, in_place))
    assert not settings.run_dir(in_place).exists() and not any(path.exists() for path in archives)
    assert asyncio.run(_exists(settings, worktree)) and workspace.is_dir()
    assert asyncio.run(_exists(settings, live))

    code, forced = _gc_runs(monkeypatch, settings, "--older-than", "0s", "--force")
    assert code == 0 and isinstance(forced, dict)
    assert [(entry["run_id"], entry["workspace_removed"]) for entry in forced["removed"]] == [
        (worktree, str(workspace))
    ]
    assert not workspace.exists() and not asyncio.run(_exists(settings, worktree))
    assert str(workspace) not in git(repo, "worktree", "list")  # pruned
    assert git(repo, "rev-parse", "--verify", branch)  # never a branch
    assert asyncio.run(_exists(settings, live))  # a live run: never
    assert fingerprint(repo) == before


def test_runs_retention_is_the_default_and_the_text_output_names_what_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "baton.toml").write_text('[runs]\nretention = "30d"\n')
    settings = Settings.load({"BATON_HOME": str(home)})
    assert settings.run_retention_seconds == 30 * 86400

    async def recorded() -> tuple[str, str]:
        async with Store.open(settings.resolved_database_url) as store:
            old = await store.create_run(agent="claude", repo=str(tmp_path), cwd=str(tmp_path), request={"prompt": "x"})
            new = await store.create_run(agent="claude", repo=str(tmp_path), cwd=str(tmp_path), request={"prompt": "y"})
            for run, at in ((old, "2020-01-01T00:00:00Z"), (new, "2999-01-01T00:00:00Z")):
                await store.update_run(run.id, status="running")
                await store.update_run(run.id, status="failed", finished_at=at)
            return old.id, new.id

    old, new = asyncio.run(recorded())
    dry = invoke_in_process(monkeypatch, home, "gc", "--runs", "--dry-run")
    assert dry.returncode == 0, dry.describe()
    assert dry.stdout.splitlines() == [
        f"would remove run {old} (failed, ended 2020-01-01T00:00:00Z)",
        f"kept run {new}: ended too recently (--older-than)",
        "would remove 1 run(s), kept 1",
    ]
    done = invoke_in_process(monkeypatch, home, "gc", "--runs")
    assert (
        done.returncode == 0
        and done.stdout.splitlines()[0] == f"removed run {old} (failed, ended 2020-01-01T00:00:00Z)"
    )
    assert not asyncio.run(_exists(settings, old)) and asyncio.run(_exists(settings, new))
    (home / "baton.toml").write_text('[runs]\nretention = "later"\n')
    with pytest.raises(UsageError) as caught:
        Settings.load({"BATON_HOME": str(home)})
    assert caught.value.code == "config_invalid" and "runs.retention" in caught.value.message
