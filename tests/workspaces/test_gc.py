"""``baton workspaces``, ``baton gc`` and ``baton rm`` over runs recorded with real worktrees and
clones (no agent: the runs are recorded in the store as a run would be): ended runs' workspaces
go, unless their branch is neither merged nor pushed; live runs' stay; the user's repository is
never written but for the worktree's admin entry going."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process
from tests.workspaces.conftest import fingerprint, git

from baton.config import Settings
from baton.store import Store
from baton.workspaces.create import make_workspace, plan_workspace

OLD = "2020-01-01T00:00:00Z"


def _recorded(
    settings: Settings, repo: str, run_id: str, *, status: str = "finished", branch: str | None = None
) -> Path:
    """A run of ``repo`` in a workspace of its own, recorded with ``status`` (ended in 2020)."""
    record = make_workspace(settings, plan_workspace(settings, repo, kind=None), run_id)
    workspace = record.to_json() | ({"branch": branch} if branch else {})

    async def record_run() -> None:
        async with Store.open(settings.resolved_database_url) as store:
            request = {"prompt": "x", "workspace": workspace}
            await store.create_run(agent="claude", repo=record.path, cwd=record.path, run_id=run_id, request=request)
            await store.update_run(run_id, status="running")  # as its executor would, then its end
            await store.update_run(run_id, status=status, finished_at=OLD if status in ("finished", "failed") else None)

    asyncio.run(record_run())
    return Path(record.path)


def _commit_in(workspace: Path, name: str) -> str:
    (workspace / name).write_text(f"{name}\n")
    git(workspace, "add", name)
    git(workspace, "commit", "-qm", name)
    return git(workspace, "rev-parse", "HEAD")


def _baton(monkeypatch: pytest.MonkeyPatch, settings: Settings, *args: str) -> tuple[int, object]:
    done = invoke_in_process(monkeypatch, settings.home, *args, "--json")
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def test_gc_removes_ended_runs_workspaces_but_keeps_an_unmerged_branch_until_forced(
    ws_settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _recorded(ws_settings, str(repo), "run_01plain")
    merged = _recorded(ws_settings, str(repo), "run_02merged", branch="baton/merged")
    git(repo, "branch", "baton/merged", _commit_in(merged, "merged.txt"))
    unmerged = _recorded(ws_settings, str(repo), "run_03unmerged", branch="baton/unmerged")
    git(repo, "branch", "baton/unmerged", _commit_in(unmerged, "unmerged.txt"))
    live = _recorded(ws_settings, str(repo), "run_04live", status="interrupted")
    loose = _recorded(ws_settings, str(repo), "run_05loose")
    _commit_in(loose, "loose.txt")  # a commit on the detached HEAD that no ref reaches
    orphan = ws_settings.home / "workspaces" / "left-over"
    orphan.mkdir()
    git(repo, "merge", "-q", "--ff-only", "baton/merged")  # the user merged one branch
    before = fingerprint(repo)

    code, listed = _baton(monkeypatch, ws_settings, "workspaces")
    assert code == 0
    assert isinstance(listed, list)
    by_run = {entry["run_id"]: entry for entry in listed}
    assert by_run["run_03unmerged"]["branch"] == "baton/unmerged" and by_run["run_01plain"]["size_bytes"] > 0
    assert {entry["kind"] for entry in listed} == {"worktree", "orphan"}

    code, dry = _baton(monkeypatch, ws_settings, "gc", "--dry-run")
    assert code == 0 and isinstance(dry, dict) and dry["dry_run"]
    assert all(Path(entry["path"]).is_dir() for entry in dry["removed"])

    code, result = _baton(monkeypatch, ws_settings, "gc", "--older-than", "7d")
    assert code == 0 and isinstance(result, dict)
    assert {entry["path"] for entry in result["removed"]} == {str(plain), str(merged)}
    reasons = {entry["run_id"]: entry["reason"] for entry in result["kept"]}
    assert reasons == {
        None: "ended too recently (--older-than)",  # a folder no run names: by its age
        "run_03unmerged": "branch baton/unmerged is neither merged nor pushed",
        "run_04live": "run run_04live is interrupted",
        "run_05loose": "its HEAD holds commits no branch or tag reaches",
    }
    assert not plain.exists() and not merged.exists() and unmerged.is_dir() and live.is_dir()
    assert str(plain) not in git(repo, "worktree", "list")  # pruned
    assert fingerprint(repo) == before  # the branches stay, the user's tree, index and HEAD too

    code, forced = _baton(monkeypatch, ws_settings, "gc", "--force")
    assert code == 0 and isinstance(forced, dict)
    assert {entry["path"] for entry in forced["removed"]} == {str(unmerged), str(loose), str(orphan)}
    assert live.is_dir()
    assert git(repo, "rev-parse", "baton/unmerged")  # never a branch
    assert fingerprint(repo) == before


def test_gc_keeps_what_ended_recently_and_retention_is_its_default(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "baton.toml").write_text('[workspace]\nretention = "30d"\n')
    settings = Settings.load({"BATON_HOME": str(home)})
    assert settings.workspace_retention_seconds == 30 * 86400
    recent = _recorded(settings, str(repo), "run_recent")

    async def later() -> None:
        async with Store.open(settings.resolved_database_url) as store:
            await store.update_run("run_recent", finished_at="2999-01-01T00:00:00Z")

    asyncio.run(later())
    code, result = _baton(monkeypatch, settings, "gc")
    assert code == 0 and isinstance(result, dict) and not result["removed"]
    assert result["kept"][0]["reason"] == "ended too recently (--older-than)" and recent.is_dir()
    code, bad = _baton(monkeypatch, settings, "gc", "--older-than", "soon")
    assert code == 2 and "is not a duration" in str(bad)


def test_a_pushed_branch_of_a_clone_lets_its_workspace_go(
    ws_settings: Settings, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    clone = _recorded(ws_settings, f"file://{bare}", "run_clone", branch="baton/clone")
    _commit_in(clone, "work.txt")
    git(clone, "branch", "baton/clone")
    code, result = _baton(monkeypatch, ws_settings, "gc")
    assert code == 0 and isinstance(result, dict)
    assert result["kept"][0]["reason"] == "branch baton/clone is neither merged nor pushed"
    git(clone, "push", "-q", "origin", "baton/clone")
    code, result = _baton(monkeypatch, ws_settings, "gc")
    assert code == 0 and isinstance(result, dict) and [e["path"] for e in result["removed"]] == [str(clone)]
    assert not clone.exists()


def test_rm_removes_a_run_entirely_and_refuses_a_live_one(
    ws_settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = _recorded(ws_settings, str(repo), "run_ended")
    ws_settings.run_dir("run_ended").mkdir(parents=True)
    _recorded(ws_settings, str(repo), "run_queued", status="paused")
    before = fingerprint(repo)
    code, refused = _baton(monkeypatch, ws_settings, "rm", "run_queued")
    assert code == 3 and "run_active" in str(refused)
    code, removed = _baton(monkeypatch, ws_settings, "rm", "run_ended")
    assert code == 0 and isinstance(removed, dict) and removed["workspace_removed"] == str(ended)
    assert not ended.exists() and not ws_settings.run_dir("run_ended").exists()
    code, missing = _baton(monkeypatch, ws_settings, "rm", "run_ended")
    assert code == 1 and "run_not_found" in str(missing)
    assert fingerprint(repo) == before
