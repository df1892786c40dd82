"""Snapshots end to end: the real Claude Code writes and runs, baton captures, the CLI restores."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.conftest import make_git_repo

from .conftest import hash_every_file, work_tree_state

pytestmark = [pytest.mark.claude, pytest.mark.timeout(120)]


@dataclass(frozen=True)
class WrittenRun:
    cli: BatonCLI
    repo: Path
    run_id: str
    events: list[dict[str, Any]]
    git_before: dict[str, tuple[int, str]]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> WrittenRun:
    base = tmp_path_factory.mktemp("snapshots-e2e")
    repo = make_git_repo(base / "repo", {"README.md": "# a repository\n"})
    git_before = hash_every_file(repo / ".git")
    cli = BatonCLI(base / "home")
    run = cli(
        "run",
        "Create hello.txt and run echo hi",
        "--repo",
        str(repo),
        "--scenario",
        "write-and-run",
        "--mode",
        "acceptEdits",
        "--allow",
        "Bash(echo:*)",
        "--json",
    )
    assert run.returncode == 0, run.describe()
    events = run.json_lines()
    return WrittenRun(cli, repo, events[0]["run_id"], events, git_before)


def test_a_run_captures_snapshots_before_its_turn_ends(written: WrittenRun) -> None:
    types = [event["type"] for event in written.events]
    captured = [event for event in written.events if event["type"] == "snapshot.captured"]
    assert captured, types
    first = captured[0]["data"]
    assert first["snapshot_id"] == "s1"
    assert first["added"] == ["hello.txt"] and first["modified"] == [] and first["deleted"] == []
    assert len(first["tree_hash"]) == 40
    assert 1 <= first["log_seq_from"] <= first["log_seq_to"] < captured[0]["log_seq"]
    assert types.index("snapshot.captured") < types.index("turn.finished")
    changed = next(event for event in written.events if event["type"] == "file.changed")
    assert first["log_seq_to"] >= changed["log_seq"]
    assert hash_every_file(written.repo / ".git") == written.git_before  # the user's .git, byte for byte


def test_snapshots_diff_and_restore_through_the_cli(written: WrittenRun, tmp_path: Path) -> None:
    cli, run_id = written.cli, written.run_id
    fresh, exported = tmp_path / "fresh", tmp_path / "s1.tar.gz"
    listed, diff, restored, export, missing = cli.many(  # each is mostly interpreter start-up: run them at once
        ("snapshots", run_id, "--json"),
        ("diff", run_id),
        ("restore", run_id, "s1", "--to", str(fresh), "--json"),
        ("snapshot-export", run_id, "s1", "--out", str(exported)),
        ("restore", run_id, "s99", "--to", str(tmp_path / "x")),
    )
    assert listed.returncode == 0, listed.describe()
    (snapshot,) = json.loads(listed.stdout)
    assert snapshot["id"] == "s1" and snapshot["run_id"] == run_id and snapshot["added"] == ["hello.txt"]
    assert snapshot["archive_key"].startswith("sha256:")
    assert "+hello from baton" in diff.stdout and "b/hello.txt" in diff.stdout
    assert missing.returncode == 1 and "snapshot_not_found" in missing.stderr
    assert restored.returncode == 0, restored.describe()
    assert (fresh / "hello.txt").read_text() == "hello from baton\n"
    assert work_tree_state(fresh) == work_tree_state(written.repo)
    assert export.returncode == 0, export.describe()

    bare = tmp_path / "bare"
    (fresh / "hello.txt").write_text("edited by hand\n")
    from_archive, dirty = cli.many(
        ("restore", "--archive", str(exported), "--to", str(bare)),
        ("restore", run_id, "s1", "--to", str(fresh), "--json"),
    )
    assert from_archive.returncode == 0, from_archive.describe()
    assert "only the archive's 1 files were written" in from_archive.stdout
    assert sorted(p.name for p in bare.iterdir()) == ["hello.txt"]
    assert dirty.returncode == 3
    assert json.loads(dirty.stderr)["error"]["code"] == "workspace_dirty"
    assert (fresh / "hello.txt").read_text() == "edited by hand\n"
