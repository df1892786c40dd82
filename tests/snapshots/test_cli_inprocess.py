"""The snapshot commands through the CLI entry point, on a run recorded here (no agent)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process

from baton.snapshots import LocalBlobStore, ShadowRepo, build_archive
from baton.snapshots.recorder import STORED_FIELDS
from baton.store import Store

from .conftest import init_repo

pytestmark = pytest.mark.timeout(60)


def record_run(home: Path, repo: Path) -> str:
    """A run with two snapshots, stored the way the recorder stores them."""

    async def create() -> str:
        home.mkdir(parents=True, exist_ok=True)
        async with Store.open(f"sqlite:///{home / 'baton.db'}") as store:
            run_id = (await store.create_run(agent="claude", repo=str(repo), cwd=str(repo))).id
            shadow = ShadowRepo(home / "runs" / run_id / "shadow.git", repo)
            shadow.prepare()
            blobs = LocalBlobStore(home / "blobs")
            for step, (name, text) in enumerate([("a.txt", "changed\n"), ("b.txt", "new\n")], start=1):
                (repo / name).write_text(text)
                snapshot = shadow.capture(log_seq_to=step * 10)
                assert snapshot is not None
                archive = home / f"{snapshot.id}.tar.gz"
                build_archive(shadow, snapshot, archive)
                record = {**snapshot.to_dict(), "archive_key": blobs.put_file(archive)}
                await store.add_snapshot(run_id, {k: record[k] for k in STORED_FIELDS if k in record})
            return run_id

    return asyncio.run(create())


def test_list_diff_restore_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    run_id = record_run(home, repo)

    listed = invoke_in_process(monkeypatch, home, "snapshots", run_id)
    assert listed.returncode == 0, listed.describe()
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["s1", "s2"]
    as_json = json.loads(invoke_in_process(monkeypatch, home, "snapshots", run_id, "--json").stdout)
    assert [(s["id"], s["added"], s["modified"]) for s in as_json] == [("s1", [], ["a.txt"]), ("s2", ["b.txt"], [])]

    step = invoke_in_process(monkeypatch, home, "diff", run_id, "--from", "s1", "--to", "s2")
    assert "+new" in step.stdout and "a.txt" not in step.stdout
    whole = invoke_in_process(monkeypatch, home, "diff", run_id)
    assert "+changed" in whole.stdout and "+new" in whole.stdout

    target = tmp_path / "restored"
    restored = invoke_in_process(monkeypatch, home, "restore", run_id, "s1", "--to", str(target))
    assert restored.returncode == 0, restored.describe()
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    assert (target / "a.txt").read_text() == "changed\n"

    out = tmp_path / "s2.tar.gz"
    assert invoke_in_process(monkeypatch, home, "snapshot-export", run_id, "s2", "--out", str(out)).returncode == 0
    assert out.stat().st_size > 0


def test_errors_have_their_codes_and_exit_statuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    run_id = record_run(home, repo)
    unknown_run = invoke_in_process(monkeypatch, home, "snapshots", "run_nope", "--json")
    assert unknown_run.returncode == 1
    assert json.loads(unknown_run.stderr)["error"]["code"] == "run_not_found"
    unknown_snapshot = invoke_in_process(monkeypatch, home, "diff", run_id, "--to", "s9")
    assert unknown_snapshot.returncode == 1 and "snapshot_not_found" in unknown_snapshot.stderr
    no_target = invoke_in_process(monkeypatch, home, "restore", run_id, "s1")
    assert no_target.returncode == 2 and "invalid_argument" in no_target.stderr
    both = invoke_in_process(monkeypatch, home, "restore", run_id, "s1", "--archive", "x", "--to", str(tmp_path / "t"))
    assert both.returncode == 2
    hostile = tmp_path / "hostile.tar.gz"
    hostile.write_bytes(b"not an archive")
    refused = invoke_in_process(monkeypatch, home, "restore", "--archive", str(hostile), "--to", str(tmp_path / "t"))
    assert refused.returncode == 1 and "archive_corrupt" in refused.stderr
    assert not (tmp_path / "t").exists()
