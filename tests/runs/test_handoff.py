"""``baton export`` / ``baton import`` without an agent: a run made of real rows (real store, real
snapshots in a real shadow repository, real blob store), moved between homes and databases, and
hostile export files refused with nothing written. The real Claude Code finishes imported runs in
test_handoff_claude.py."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text as sql
from tests.cli._baton_cli import invoke_in_process
from tests.conftest import make_git_repo

from baton.config import Settings
from baton.errors import BatonError
from baton.runs.executors import this_executor_id
from baton.runs.handoff import EXPORT_FORMAT, export_run, import_run
from baton.snapshots import LocalBlobStore, ShadowRepo, build_archive, shadow_for
from baton.snapshots.archive import ArchiveLimits
from baton.snapshots.recorder import STORED_FIELDS
from baton.store import Redactor, SessionLog, Store
from baton.store.transfer import read_run_rows

SECRET = "sk-handoff-secret-0123456789abcdef"


@dataclass
class Source:
    settings: Settings
    store: Store
    run_id: str
    repo: Path


def settings_for(home: Path, database_url: str | None = None) -> Settings:
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home), "PATH": os.environ.get("PATH", "")}
    )
    return replace(settings, database_url=database_url) if database_url else settings


async def make_source(tmp_path: Path, *, status: str = "running", database_url: str | None = None) -> Source:
    """A run as a crashed `baton run` leaves it: log, two snapshots with archives, an agent home.
    The exporting home knows the model key (as the machine that ran the run does)."""
    settings = replace(settings_for(tmp_path / "home-a", database_url), anthropic_api_key=SECRET)
    settings.home.mkdir(parents=True, exist_ok=True)
    repo = make_git_repo(tmp_path / "repo-a", {"README.md": "# a repository\n", "src/app.py": "print('v1')\n"})
    store = Store.open(settings.resolved_database_url)
    record = await store.create_run(agent="claude", permission_mode="acceptEdits", repo=str(repo), cwd=str(repo))
    run_id = record.id
    await store.update_run(run_id, status="running", status_reason="started")
    async with SessionLog(store, Redactor([SECRET])) as log:
        log.open_run(run_id)
        started = {"run_id": run_id, "agent": "claude", "cwd": str(repo), "permission_mode": "acceptEdits"}
        log.append(run_id, "baton", "_baton/run_started", _note("_baton/run_started", {**started, "prompt": "go"}))
        log.append(run_id, "to_agent", "session/prompt", _note("session/prompt", {"prompt": [{"text": "go"}]}))
        log.append(run_id, "from_agent", "_baton/console", _note("_baton/console", {"message": f"key {SECRET}"}))
        run_dir = settings.run_dir(run_id)
        shadow = shadow_for(run_dir, repo)
        shadow.prepare()
        blobs = LocalBlobStore(settings.home / "blobs")
        (repo / "one.txt").write_text("one\n")
        await add_snapshot(store, shadow, blobs, run_id, tmp_path)
        (repo / "src" / "app.py").write_text("v2\n")
        await add_snapshot(store, shadow, blobs, run_id, tmp_path)
        await log.flush()
    if status != "running":
        await store.update_run(run_id, status=status, status_reason="test")
    await store.save_conversation_state(run_id, 3, {"items": [{"type": "user", "text": "go"}], "cwd": str(repo)})
    home = run_dir / "agent-home"
    project = home / ".claude" / "projects" / "-x-repo-a"
    project.mkdir(parents=True)
    (project / "sess-1.jsonl").write_text(json.dumps({"type": "user", "cwd": str(repo)}) + "\n")
    (home / ".claude" / ".credentials.json").write_text('{"token": "never exported"}')
    (home / ".claude" / "settings.json").write_text(json.dumps({"note": f"a key {SECRET}"}))
    (run_dir / "launch").mkdir()
    (run_dir / "launch" / "launch.json").write_text(json.dumps({"ANTHROPIC_API_KEY": SECRET}))
    return Source(settings=settings, store=store, run_id=run_id, repo=repo)


def _note(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def add_snapshot(store: Store, shadow: ShadowRepo, blobs: LocalBlobStore, run_id: str, scratch: Path) -> None:
    """Capture, archive into the blob store and record a snapshot, as the run's recorder does."""
    snapshot = shadow.capture(log_seq_to=2)
    assert snapshot is not None
    out = scratch / f"{snapshot.id}.tar.gz"
    build_archive(shadow, snapshot, out)
    record = {**snapshot.to_dict(), "archive_key": blobs.put_file(out)}
    await store.add_snapshot(run_id, {key: record[key] for key in STORED_FIELDS if key in record})


def every_file(root: Path) -> dict[str, str]:
    """Relative path → sha256 of every file under ``root`` (symlinks by target; not the database)."""
    found: dict[str, str] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        if path.name.startswith("baton.db"):
            continue
        if path.is_symlink():
            found[str(path.relative_to(root))] = "link:" + str(path.readlink())
        elif path.is_file():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def clone(source: Path, target: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(source), str(target)], check=True)
    return target


# -- the round trip ---------------------------------------------------------------------------------


async def test_a_run_moves_to_another_home_and_repository_whole(tmp_path: Path, store_url: str) -> None:
    source = await make_source(tmp_path)
    out = tmp_path / "run.tar.gz"
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "on it"}}
    async with source.store:
        async with SessionLog(source.store, Redactor()) as log:  # the agent's text, in chunk_text too
            log.open_run(source.run_id)
            log.append(source.run_id, "from_agent", "session/update", _note("session/update", {"update": chunk}))
            await log.flush()
        exported = await export_run(source.store, source.settings, source.run_id, out)
        before = read_run_rows(source.store.engine, source.run_id)
    assert exported.log_entries == 4 and exported.snapshots == 2 and exported.agent_home_files == 2
    assert {"path": ".claude/.credentials.json", "reason": "secret"} in exported.skipped
    with tarfile.open(out) as tar:
        names = tar.getnames()
        contents = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
    assert names[0] == "MANIFEST.json" and not any("launch" in name for name in names)
    assert SECRET.encode() not in contents and b"never exported" not in contents

    target = clone(source.repo, tmp_path / "elsewhere" / "repo-b")  # clean, at the base commit
    destination = settings_for(tmp_path / "home-b", store_url)
    destination.home.mkdir(parents=True)
    async with Store.open(destination.resolved_database_url) as store:
        result = await import_run(store, destination, out, repo=target)
        after = read_run_rows(store.engine, source.run_id)
        transitions = await store.list_transitions(source.run_id)
        with store.engine.connect() as connection:  # not in the export: the import fills it
            texts = connection.execute(sql("SELECT chunk_text FROM log_entries ORDER BY seq")).scalars().all()
    assert texts == [None, None, None, "on it"]
    assert result.run_id == source.run_id and result.status == "interrupted" and result.snapshot_id == "s2"
    assert result.restored is not None and result.restored.base == "base_repo"
    assert (target / "one.txt").read_text() == "one\n" and (target / "src" / "app.py").read_text() == "v2\n"
    assert before is not None and after is not None
    assert after.log == before.log  # the stored (redacted) JSON text, byte for byte
    assert after.snapshots == before.snapshots and after.conversation_state == before.conversation_state
    assert after.run["repo"] == after.run["cwd"] == str(target.resolve())
    assert after.run["executor_id"] is None and after.run["status_reason"] == "imported"
    assert [(t.from_status, t.to_status, t.reason) for t in transitions][-1] == ("running", "interrupted", "imported")
    # The agent home travelled, Claude Code's transcripts under the new working directory's folder.
    projects = destination.run_dir(source.run_id) / "agent-home" / ".claude" / "projects"
    assert [p.name for p in projects.iterdir()] == [re.sub(r"[^a-zA-Z0-9]", "-", str(target.resolve()))]
    assert not (destination.run_dir(source.run_id) / "agent-home" / ".claude" / ".credentials.json").exists()
    # The archives are in this home's blob store, and the shadow goes on after s2.
    blobs = LocalBlobStore(destination.home / "blobs")
    assert all(blobs.exists(s["archive_key"]) for s in after.snapshots)
    shadow = shadow_for(destination.run_dir(source.run_id), target)
    # Both snapshots were rebuilt in the new shadow from their archives over the clone's base commit.
    assert [(r["id"], r["tree_hash"]) for r in shadow.snapshots()] == [
        (s["id"], s["tree_hash"]) for s in after.snapshots
    ]
    changed = shadow.diff(after.snapshots[0]["tree_hash"], after.snapshots[1]["tree_hash"])
    assert [entry.path for entry in changed] == ["src/app.py"]
    (target / "three.txt").write_text("three\n")
    next_snapshot = shadow.capture(log_seq_to=4)
    assert next_snapshot is not None and next_snapshot.id == "s3" and next_snapshot.changes.added == ("three.txt",)


async def test_an_ended_run_keeps_its_end_and_a_repository_holding_the_snapshot_is_left_alone(tmp_path: Path) -> None:
    source = await make_source(tmp_path, status="finished")
    out = tmp_path / "run.tar.gz"
    async with source.store:
        await export_run(source.store, source.settings, source.run_id, out)
    destination = settings_for(tmp_path / "home-b")
    destination.home.mkdir()
    before = every_file(source.repo)
    async with Store.open(destination.resolved_database_url) as store:
        result = await import_run(store, destination, out)  # the recorded repository, which holds s2
    assert result.status == "finished" and result.restored is None and result.snapshot_id == "s2"
    assert every_file(source.repo) == before


# -- refusals ---------------------------------------------------------------------------------------


async def test_exporting_a_run_that_executes_is_refused(tmp_path: Path) -> None:
    source = await make_source(tmp_path)
    async with source.store:
        await source.store.update_run(source.run_id, executor_id=this_executor_id())  # this live process
        with pytest.raises(BatonError) as refused:
            await export_run(source.store, source.settings, source.run_id, tmp_path / "run.tar.gz")
    assert refused.value.code == "run_active"
    assert not (tmp_path / "run.tar.gz").exists()


def _rewrite(
    source: Path,
    target: Path,
    *,
    manifest: Callable[[dict[str, Any]], None] | None = None,
    members: Callable[[list[tuple[tarfile.TarInfo, bytes]]], None] | None = None,
) -> Path:
    """A copy of an export with its manifest or members changed (sizes and hashes as given)."""
    with tarfile.open(source) as tar:
        found = [(info, tar.extractfile(info).read() if info.isfile() else b"") for info in tar.getmembers()]  # type: ignore[union-attr]
    head = json.loads(found[0][1])
    if manifest:
        manifest(head)
    rest = found[1:]
    if members:
        members(rest)
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb") as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        body = json.dumps(head).encode()
        info = tarfile.TarInfo("MANIFEST.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        for member, data in rest:
            member.size = len(data) if member.isfile() else 0
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    target.write_bytes(raw.getvalue())
    return target


def _listed(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "mode": "100644"}


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _extra(name: str) -> Callable[[Path, Path], Path]:
    def make(good: Path, out: Path) -> Path:
        return _rewrite(
            good,
            out,
            manifest=lambda m: m["files"].append(_listed(name, b"evil\n")),
            members=lambda ms: ms.append(_member(name, b"evil\n")),
        )

    return make


def _hostile_snapshot_archive(good: Path, out: Path) -> Path:
    """An export whose snapshot archive (with a correct sha256 name) writes outside the root."""
    raw = io.BytesIO()
    evil = b"evil\n"
    inner_manifest = {
        "format": "baton-snapshot/1",
        "files": [_listed("../escaped.txt", evil)],
        "deleted": [],
        "symlinks": {},
        "submodules": {},
    }
    with (
        gzip.GzipFile(fileobj=raw, mode="wb") as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in (("MANIFEST.json", json.dumps(inner_manifest).encode()), ("../escaped.txt", evil)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = raw.getvalue()
    digest = hashlib.sha256(archive).hexdigest()

    replaced: list[str] = []

    def swap(members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
        for index, (info, _data) in enumerate(members):
            if info.name.startswith("archives/") and not replaced:  # one of the two archives
                replaced.append(info.name)
                members[index] = _member(f"archives/{digest}.tar.gz", archive)

    def relist(manifest: dict[str, Any]) -> None:
        first = next(f["path"] for f in manifest["files"] if f["path"].startswith("archives/"))
        manifest["files"] = [f for f in manifest["files"] if f["path"] != first]
        manifest["files"].append(_listed(f"archives/{digest}.tar.gz", archive))

    return _rewrite(good, out, manifest=relist, members=swap)


HOSTILE: dict[str, tuple[str, Callable[[Path, Path], Path]]] = {
    "dotdot": ("archive_unsafe_entry", _extra("../escaped.txt")),
    "agent_home_dotdot": ("archive_unsafe_entry", _extra("agent-home/../../escaped.txt")),
    "absolute": ("archive_unsafe_entry", _extra("/tmp/escaped.txt")),
    "unknown_member": ("archive_unsafe_entry", _extra("run/extra.json")),
    "unlisted_member": (
        "archive_unsafe_entry",
        lambda good, out: _rewrite(good, out, members=lambda ms: ms.append(_member("agent-home/x", b"x"))),
    ),
    "lying_size": (
        "archive_unsafe_entry",
        lambda good, out: _rewrite(
            good,
            out,
            manifest=lambda m: [f.update(size=f["size"] + 1) for f in m["files"] if f["path"] == "run/log.jsonl"],
        ),
    ),
    "symlink_out": (
        "archive_unsafe_entry",
        lambda good, out: _rewrite(
            good, out, members=lambda ms: ms.append((_symlink("agent-home/escape", "../../../../etc"), b""))
        ),
    ),
    "run_id_traversal": (
        "archive_unsafe_entry",
        lambda good, out: _rewrite(good, out, manifest=lambda m: m["run"].update(id="../../escaped")),
    ),
    "hostile_snapshot_archive": ("archive_unsafe_entry", _hostile_snapshot_archive),
    "cut_short": ("archive_corrupt", lambda good, out: (out.write_bytes(good.read_bytes()[:-400]), out)[1]),
    "not_an_archive": ("archive_corrupt", lambda good, out: (out.write_bytes(b"hello, not a tar\n" * 10), out)[1]),
    "other_version": (
        "archive_version_unsupported",
        lambda good, out: _rewrite(good, out, manifest=lambda m: m.update(format="baton-export/7")),
    ),
    "a_snapshot_archive": (
        "archive_unsafe_entry",
        lambda good, out: _rewrite(good, out, manifest=lambda m: m.update(format="baton-snapshot/1")),
    ),
}


# Why some of them are refused (the rest say so plainly in their code).
MESSAGES = {
    "hostile_snapshot_archive": "'../escaped.txt' is not a clean relative path",
    "lying_size": "the manifest says",
    "run_id_traversal": "is not a run id",
    "unknown_member": "is not part of a run export",
    "unlisted_member": "is not in the manifest",
}


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


@pytest.fixture(scope="module")
def good_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One sound export (and its source repository) for the tests that only read it."""
    base = tmp_path_factory.mktemp("good-export")

    async def build() -> tuple[Path, Path]:
        source = await make_source(base)
        out = base / "good.tar.gz"
        async with source.store:
            await export_run(source.store, source.settings, source.run_id, out)
        return out, source.repo

    return asyncio.run(build())


@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_hostile_export_files_are_refused_and_nothing_is_written(
    tmp_path: Path, good_export: tuple[Path, Path], case: str
) -> None:
    code, make = HOSTILE[case]
    good, repo = good_export
    hostile = make(good, tmp_path / f"{case}.tar.gz")
    destination = settings_for(tmp_path / "home-b")
    destination.home.mkdir()
    target = clone(repo, tmp_path / "repo-b")
    async with Store.open(destination.resolved_database_url) as store:
        before_home, before_repo, before_tmp = (
            every_file(destination.home),
            every_file(target),
            sorted(p.name for p in tmp_path.iterdir()),
        )
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, hostile, repo=target)
        assert refused.value.code == code, refused.value
        assert MESSAGES.get(case, "") in refused.value.message
        assert await store.list_runs() == []
    assert every_file(destination.home) == before_home and every_file(target) == before_repo
    assert sorted(p.name for p in tmp_path.iterdir()) == before_tmp
    assert not (tmp_path / "escaped.txt").exists()


async def test_a_bomb_is_refused_by_the_limits(tmp_path: Path, good_export: tuple[Path, Path]) -> None:
    good, repo = good_export
    zeros = b"\0" * (8 * 1024 * 1024)
    bomb = _rewrite(
        good,
        tmp_path / "bomb.tar.gz",
        manifest=lambda m: m["files"].append(_listed("agent-home/zeros", zeros)),
        members=lambda ms: ms.append(_member("agent-home/zeros", zeros)),
    )
    destination = settings_for(tmp_path / "home-b")
    destination.home.mkdir()
    limits = ArchiveLimits(max_ratio=50, ratio_floor_bytes=1024 * 1024)
    async with Store.open(destination.resolved_database_url) as store:
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, bomb, repo=clone(repo, tmp_path / "repo-b"), limits=limits)
    assert refused.value.code == "archive_too_large"
    assert not (destination.home / "runs").exists() or not any((destination.home / "runs").iterdir())


async def test_importing_a_run_twice_is_refused_with_run_exists(tmp_path: Path, good_export: tuple[Path, Path]) -> None:
    good, repo = good_export
    destination = settings_for(tmp_path / "home-b")
    destination.home.mkdir()
    target = clone(repo, tmp_path / "repo-b")
    async with Store.open(destination.resolved_database_url) as store:
        first = await import_run(store, destination, good, repo=target)
        rows = read_run_rows(store.engine, first.run_id)
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, good, repo=clone(repo, tmp_path / "repo-c"))
        assert refused.value.code == "run_exists"
        assert read_run_rows(store.engine, first.run_id) == rows
    assert not (tmp_path / "repo-c" / "one.txt").exists()


async def test_a_dirty_repository_is_refused_unless_forced(tmp_path: Path, good_export: tuple[Path, Path]) -> None:
    good, repo = good_export
    destination = settings_for(tmp_path / "home-b")
    destination.home.mkdir()
    target = clone(repo, tmp_path / "repo-b")
    (target / "src" / "app.py").write_text("someone's work\n")
    async with Store.open(destination.resolved_database_url) as store:
        before_home = every_file(destination.home)
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, good, repo=target)
        assert refused.value.code == "workspace_dirty" and "src/app.py" in refused.value.message
        assert await store.list_runs() == [] and every_file(destination.home) == before_home
        assert (target / "src" / "app.py").read_text() == "someone's work\n"
        forced = await import_run(store, destination, good, repo=target, force=True)
    assert forced.restored is not None and (target / "src" / "app.py").read_text() == "v2\n"


def test_the_cli_exports_and_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    source = asyncio.run(make_source(tmp_path))
    source.store.close()
    out = tmp_path / "cli.tar.gz"
    exported = invoke_in_process(
        monkeypatch, source.settings.home, "export", source.run_id, "--out", str(out), "--json"
    )
    assert exported.returncode == 0, exported.describe()
    assert json.loads(exported.stdout)["snapshots"] == 2
    with tarfile.open(out) as tar:
        head = json.loads(tar.extractfile("MANIFEST.json").read())  # type: ignore[union-attr]
    assert head["format"] == EXPORT_FORMAT and head["run"]["id"] == source.run_id and head["latest_snapshot"] == "s2"
    target = clone(source.repo, tmp_path / "repo-b")
    home_b = tmp_path / "home-b"
    imported = invoke_in_process(monkeypatch, home_b, "import", str(out), "--repo", str(target))
    assert imported.returncode == 0, imported.describe()
    assert f"baton resume {source.run_id}" in imported.stdout and "restored s2" in imported.stdout
    diff = invoke_in_process(monkeypatch, home_b, "diff", source.run_id, "--from", "s1", "--to", "s2")
    assert diff.returncode == 0 and "+v2" in diff.stdout and "one.txt" not in diff.stdout, diff.describe()
    again = invoke_in_process(monkeypatch, home_b, "import", str(out), "--repo", str(target), "--json")
    assert again.returncode == 3 and json.loads(again.stderr)["error"]["code"] == "run_exists"
    missing = invoke_in_process(monkeypatch, home_b, "export", "run_nope", "--out", str(tmp_path / "x.tar.gz"))
    assert missing.returncode == 1 and "run_not_found" in missing.stderr
