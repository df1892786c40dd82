"""``Results.at_end`` by workspace kind, on a real store and real repositories: the kinds of the
``runs.request.workspace`` contract (worktree, clone) get a branch without being asked, a clone's
is pushed to its origin by default, an in-place run's only when configured; a branch that
exists already is logged as an error and the run's end goes on."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.snapshots.conftest import git, init_repo

from baton.config import Settings
from baton.results import Results
from baton.snapshots import LocalBlobStore, ShadowRepo, build_archive
from baton.snapshots.recorder import STORED_FIELDS
from baton.store import Store

pytestmark = pytest.mark.timeout(60)


def _run_with_snapshot(tmp_path: Path, store: Store, workspace: Path, request: dict[str, Any]) -> str:
    """A run in ``workspace`` whose one snapshot adds hello.txt (its archive in the blob store)."""
    shadow = ShadowRepo(tmp_path / f"shadow-{len(list(tmp_path.iterdir()))}.git", workspace)
    shadow.prepare()
    (workspace / "hello.txt").write_text("hello\n")
    snapshot = shadow.capture()
    assert snapshot is not None
    archive = tmp_path / "archive.tar.gz"
    build_archive(shadow, snapshot, archive)
    key = LocalBlobStore(tmp_path / "home" / "blobs").put_file(archive)

    async def record() -> str:
        run = await store.create_run(agent="claude", repo=str(workspace), cwd=str(workspace), request=request)
        stored = {**snapshot.to_dict(since_base=False), "archive_key": key}
        await store.add_snapshot(run.id, {name: stored[name] for name in STORED_FIELDS})  # as the recorder does
        return run.id

    return asyncio.run(record())


def _at_end(store: Store, settings: Settings, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    notes: list[tuple[str, dict[str, Any]]] = []
    asyncio.run(Results(store, settings).at_end(run_id, lambda name, params: notes.append((name, params))))
    return notes


def test_worktree_and_clone_kinds_get_their_branch_in_place_only_when_configured(tmp_path: Path) -> None:
    settings = Settings.load({"BATON_HOME": str(tmp_path / "home")})
    store = Store.open(settings.resolved_database_url)
    try:
        user = init_repo(tmp_path / "user", {"README.md": "r\n"})
        base = git(user, "rev-parse", "HEAD").strip()
        worktree = tmp_path / "ws-worktree"
        git(user, "worktree", "add", "-q", "--detach", str(worktree))
        kind = {"kind": "worktree", "path": str(worktree), "base_commit": base, "repo": str(user)}
        run_id = _run_with_snapshot(tmp_path, store, worktree, {"prompt": "Say hello", "workspace": kind})
        notes = _at_end(store, settings, run_id)
        assert [name for name, _ in notes] == ["branch_created"]
        branch = f"baton/{run_id[-8:]}"
        assert notes[0][1]["branch"] == branch and notes[0][1]["repository"] == str(user.resolve())
        assert git(user, "show", f"{branch}:hello.txt") == "hello\n"
        workspace = asyncio.run(store.get_run(run_id)).workspace
        assert workspace == {"kind": "worktree", "path": str(worktree), "base_commit": base, "branch": branch,
                             "head_commit": notes[0][1]["commit"], "pull_request_url": None}  # fmt: skip
        again = _at_end(store, settings, run_id)  # the branch exists: logged, nothing moved
        assert [(name, params["code"]) for name, params in again] == [("error", "branch_exists")]

        origin = tmp_path / "origin.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(user), str(origin)], check=True)
        clone = tmp_path / "ws-clone"
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        kind = {"kind": "clone", "path": str(clone), "base_commit": base, "repo": f"file://{origin}"}
        cloned = _run_with_snapshot(tmp_path, store, clone, {"prompt": "Say hello", "workspace": kind})
        notes = _at_end(store, settings, cloned)
        assert [name for name, _ in notes] == ["branch_created", "branch_pushed"]  # result.push: on for clones
        assert git(origin, "rev-parse", f"baton/{cloned[-8:]}").strip() == notes[0][1]["commit"]
        assert subprocess.run(["git", "-C", str(user), "rev-parse", "-q", "--verify", f"baton/{cloned[-8:]}"],
                              capture_output=True).returncode == 1  # fmt: skip

        in_place = init_repo(tmp_path / "in-place", {"README.md": "r\n"})
        plain = _run_with_snapshot(tmp_path, store, in_place, {"prompt": "Say hello"})
        assert _at_end(store, settings, plain) == []  # the user's own files: not without being asked
        configured = Settings.load({"BATON_HOME": str(tmp_path / "home")}, result_branch_in_place=True)
        assert [name for name, _ in _at_end(store, configured, plain)] == ["branch_created"]
    finally:
        asyncio.run(store.aclose())
