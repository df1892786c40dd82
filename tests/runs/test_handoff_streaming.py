"""``baton export`` / ``baton import`` of a run longer than one page, in bounded memory: the rows
cross page boundaries both ways, an import that fails half way (a file cut short inside the log, a
corrupt line in its middle, a line over the record limit, a row the store refuses after thousands
were inserted) leaves nothing behind, ``baton-export/1`` files are still read, and a secret across
two read chunks of an agent-home file is still redacted. Real stores (SQLite and Postgres), real
shadow and blob store; helpers from test_handoff.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from tests.runs.test_handoff import Source, _listed, _rewrite, clone, every_file, make_source, settings_for

from baton.errors import BatonError
from baton.runs.handoff import EXPORT_FORMAT, export_run, import_run
from baton.snapshots.archive import ArchiveLimits
from baton.store import Redactor, SessionLog, Store
from baton.store.tables import gates, log_entries, runs
from baton.store.transfer import PAGE, read_run_rows

SECRET = "sk-handoff-secret-0123456789abcdef"  # the key make_source's home knows
EXTRA = 2 * PAGE + 7  # three pages of log each way


async def long_source(tmp_path: Path, database_url: str | None = None) -> Source:
    """make_source's run with ``EXTRA`` more log entries and a gate."""
    source = await make_source(tmp_path, database_url=database_url)
    async with SessionLog(source.store, Redactor()) as log:
        log.open_run(source.run_id)
        for number in range(EXTRA):
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"chunk {number}"}}
            log.append(source.run_id, "from_agent", "session/update", {"jsonrpc": "2.0", "params": {"update": update}})
            if number % 1000 == 0:
                await log.drain()
        await log.flush()
    record = await source.store.get_run(source.run_id)
    with source.store.engine.begin() as connection:
        run_key = connection.execute(select(runs.c.run_key).where(runs.c.id == record.id)).scalar_one()
        connection.execute(
            insert(gates).values(
                id=f"gate-{record.id}", run_key=run_key, kind="permission", status="open", created_at=record.created_at
            )
        )
    return source


@pytest.fixture(scope="module")
def long_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """One sound export of a long run (file, source repository, run id) for the tests that only read it."""
    base = tmp_path_factory.mktemp("long-export")

    async def build() -> tuple[Path, Path, str]:
        source = await long_source(base)
        out = base / "long.tar.gz"
        async with source.store:
            await export_run(source.store, source.settings, source.run_id, out)
        return out, source.repo, source.run_id

    return asyncio.run(build())


def _log_count(store: Store) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(log_entries)).scalar_one())


async def test_a_run_of_several_pages_travels_whole(tmp_path: Path, store_url: str) -> None:
    source = await long_source(tmp_path, store_url)
    out = tmp_path / "run.tar.gz"
    async with source.store:
        exported = await export_run(source.store, source.settings, source.run_id, out)
        before = read_run_rows(source.store.engine, source.run_id)
    assert exported.log_entries == EXTRA + 3
    with tarfile.open(out) as tar:
        head = json.loads(tar.extractfile("MANIFEST.json").read())  # type: ignore[union-attr]
        log = tar.extractfile("run/log.jsonl").read()  # type: ignore[union-attr]
    assert head["format"] == EXPORT_FORMAT == "baton-export/2"
    assert {f["path"] for f in head["files"]} >= {"run/transitions.jsonl", "run/snapshots.jsonl", "run/gates.jsonl"}
    assert [json.loads(line)["seq"] for line in log.splitlines()] == list(range(1, EXTRA + 4))
    destination = settings_for(tmp_path / "home-b")  # SQLite here, whichever store exported
    destination.home.mkdir()
    async with Store.open(destination.resolved_database_url) as store:
        result = await import_run(store, destination, out, repo=clone(source.repo, tmp_path / "repo-b"))
        after = read_run_rows(store.engine, source.run_id)
    assert result.log_entries == EXTRA + 3
    assert before is not None and after is not None
    assert after.log == before.log and after.gates == before.gates and after.snapshots == before.snapshots
    assert after.runner_events == before.runner_events
    assert [t["to_status"] for t in after.transitions] == [t["to_status"] for t in before.transitions] + ["interrupted"]


async def _refused_leaving_nothing(
    tmp_path: Path,
    export: Path,
    repo: Path,
    code: str,
    *,
    store_url: str | None = None,
    limits: ArchiveLimits | None = None,
) -> BatonError:
    destination = settings_for(tmp_path / "home-b", store_url)
    destination.home.mkdir()
    target = clone(repo, tmp_path / "repo-b")
    async with Store.open(destination.resolved_database_url) as store:
        before_home, before_repo = every_file(destination.home), every_file(target)
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, export, repo=target, limits=limits)
        assert refused.value.code == code, refused.value
        assert await store.list_runs() == [] and _log_count(store) == 0
    assert every_file(destination.home) == before_home and every_file(target) == before_repo
    return refused.value


async def test_a_file_cut_short_inside_the_log_leaves_nothing(
    tmp_path: Path, long_export: tuple[Path, Path, str], store_url: str
) -> None:
    good, repo, _run_id = long_export
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 3])  # the log is most of the file
    await _refused_leaving_nothing(tmp_path, cut, repo, "archive_corrupt", store_url=store_url)


def _with_log(good: Path, out: Path, change: Any) -> Path:
    """A copy of ``good`` whose log member is ``change(lines)``, listed with its new size and hash."""
    replaced: list[bytes] = []

    def members(found: list[tuple[tarfile.TarInfo, bytes]]) -> None:
        for index, (info, data) in enumerate(found):
            if info.name == "run/log.jsonl":
                lines = data.splitlines(keepends=True)
                change(lines)
                replaced.append(b"".join(lines))
                found[index] = (info, replaced[0])

    changed = _rewrite(good, out, members=members)  # the manifest lists the old log: relisted below
    body = replaced[0]
    return _rewrite(
        changed,
        out,
        manifest=lambda head: [
            f.update(size=len(body), sha256=hashlib.sha256(body).hexdigest())
            for f in head["files"]
            if f["path"] == "run/log.jsonl"
        ],
    )


async def test_a_corrupt_line_in_the_middle_of_the_log_leaves_nothing(
    tmp_path: Path, long_export: tuple[Path, Path, str], store_url: str
) -> None:
    good, repo, _run_id = long_export

    def corrupt(lines: list[bytes]) -> None:
        lines[PAGE + 100] = lines[PAGE + 100][:40] + b"\n"  # cut off mid-object

    bad = _with_log(good, tmp_path / "corrupt.tar.gz", corrupt)
    refused = await _refused_leaving_nothing(tmp_path, bad, repo, "archive_unsafe_entry", store_url=store_url)
    assert "run/log.jsonl in the export is not JSON" in refused.message


async def test_a_log_numbered_wrong_in_the_middle_leaves_nothing(
    tmp_path: Path, long_export: tuple[Path, Path, str]
) -> None:
    good, repo, _run_id = long_export
    bad = _with_log(good, tmp_path / "gap.tar.gz", lambda lines: lines.pop(PAGE + 3))
    refused = await _refused_leaving_nothing(tmp_path, bad, repo, "archive_unsafe_entry")
    assert f"entry {PAGE + 4} has seq {PAGE + 5}" in refused.message


async def test_a_line_over_the_record_limit_is_refused(tmp_path: Path, long_export: tuple[Path, Path, str]) -> None:
    good, repo, _run_id = long_export
    long_line = json.dumps(
        {"seq": 1, "ts": "t", "direction": "baton", "method": "x", "payload": json.dumps({"text": "y" * 300_000})}
    ).encode()

    def grow(lines: list[bytes]) -> None:
        lines[0] = long_line + b"\n"

    bad = _with_log(good, tmp_path / "long-line.tar.gz", grow)
    limits = ArchiveLimits(max_record_bytes=256 * 1024)
    refused = await _refused_leaving_nothing(tmp_path, bad, repo, "archive_too_large", limits=limits)
    assert "max_record_bytes" in refused.message
    # Within the limit the same file imports (the line is sound).
    destination = settings_for(tmp_path / "home-c")
    destination.home.mkdir()
    async with Store.open(destination.resolved_database_url) as store:
        result = await import_run(store, destination, bad, repo=clone(repo, tmp_path / "repo-c"))
    assert result.log_entries == EXTRA + 3


async def test_a_row_the_store_refuses_after_thousands_rolls_the_whole_run_back(
    tmp_path: Path, long_export: tuple[Path, Path, str], store_url: str
) -> None:
    """The gate's id is taken here: the gates are inserted after every log page, in the same transaction."""
    good, repo, run_id = long_export
    destination = settings_for(tmp_path / "home-b", store_url)
    destination.home.mkdir()
    target = clone(repo, tmp_path / "repo-b")
    async with Store.open(destination.resolved_database_url) as store:
        other = await store.create_run(agent="claude")
        with store.engine.begin() as connection:
            key = connection.execute(select(runs.c.run_key).where(runs.c.id == other.id)).scalar_one()
            connection.execute(
                insert(gates).values(
                    id=f"gate-{run_id}", run_key=key, kind="permission", status="open", created_at=other.created_at
                )
            )
        before_home, before_repo = every_file(destination.home), every_file(target)
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, good, repo=target)
        assert refused.value.code == "run_exists" and "gates" in refused.value.message
        assert [run.id for run in await store.list_runs()] == [other.id] and _log_count(store) == 0
    assert every_file(destination.home) == before_home and every_file(target) == before_repo


def _as_version_1(good: Path, out: Path) -> Path:
    """``good`` as baton 0.x wrote it (``baton-export/1``): transitions, snapshots and gates as JSON arrays."""
    arrays = {"run/transitions.jsonl", "run/snapshots.jsonl", "run/gates.jsonl"}
    bodies: dict[str, bytes] = {}

    def members(found: list[tuple[tarfile.TarInfo, bytes]]) -> None:
        for index, (info, data) in enumerate(found):
            if info.name in arrays:
                body = json.dumps([json.loads(line) for line in data.splitlines()]).encode()
                info.name = info.name.removesuffix("l")
                bodies[info.name] = body
                found[index] = (info, body)

    first = _rewrite(good, out, members=members)

    def manifest(head: dict[str, Any]) -> None:
        head["format"] = "baton-export/1"
        head["files"] = [f for f in head["files"] if f["path"] not in arrays]
        head["files"] += [_listed(name, body) for name, body in bodies.items()]

    return _rewrite(first, out, manifest=manifest)


async def test_a_version_1_export_is_still_read(tmp_path: Path, long_export: tuple[Path, Path, str]) -> None:
    good, repo, run_id = long_export
    old = _as_version_1(good, tmp_path / "v1.tar.gz")
    with tarfile.open(old) as tar:
        assert "run/gates.json" in tar.getnames() and "run/gates.jsonl" not in tar.getnames()
    destination = settings_for(tmp_path / "home-b")
    destination.home.mkdir()
    async with Store.open(destination.resolved_database_url) as store:
        result = await import_run(store, destination, old, repo=clone(repo, tmp_path / "repo-b"))
        after = read_run_rows(store.engine, run_id)
    assert result.log_entries == EXTRA + 3 and result.snapshot_id == "s2"
    assert after is not None and [g["id"] for g in after.gates] == [f"gate-{run_id}"]
    assert [s["id"] for s in after.snapshots] == ["s1", "s2"]
    broken = _rewrite(
        old,
        tmp_path / "v1-broken.tar.gz",
        manifest=lambda head: [
            f.update(size=3, sha256=hashlib.sha256(b"{}\n").hexdigest())
            for f in head["files"]
            if f["path"] == "run/gates.json"
        ],
        members=lambda found: [
            found.__setitem__(i, (info, b"{}\n")) for i, (info, _d) in enumerate(found) if info.name == "run/gates.json"
        ],
    )
    destination = settings_for(tmp_path / "home-c")
    destination.home.mkdir()
    async with Store.open(destination.resolved_database_url) as store:
        with pytest.raises(BatonError) as refused:
            await import_run(store, destination, broken, repo=clone(repo, tmp_path / "repo-c"))
        assert refused.value.code == "archive_unsafe_entry" and "gates are not a list" in refused.value.message
        assert await store.list_runs() == []


async def test_a_secret_across_two_read_chunks_of_an_agent_home_file_is_redacted(tmp_path: Path) -> None:
    source = await make_source(tmp_path)
    big = source.settings.run_dir(source.run_id) / "agent-home" / ".claude" / "projects" / "-x-repo-a" / "big.jsonl"
    chunk = 1 << 20  # the export reads files in 1 MiB chunks: secrets across the first two boundaries, one in the last
    content = bytearray(b"x" * (3 * chunk + 100))
    for offset in (chunk - 5, 2 * chunk - len(SECRET) + 1, 3 * chunk + 10):
        content[offset : offset + len(SECRET)] = SECRET.encode()
    big.write_bytes(bytes(content))
    out = tmp_path / "run.tar.gz"
    async with source.store:
        exported = await export_run(source.store, source.settings, source.run_id, out)
    assert exported.agent_home_files == 3
    with tarfile.open(out) as tar:
        body = tar.extractfile("agent-home/.claude/projects/-x-repo-a/big.jsonl").read()  # type: ignore[union-attr]
    assert SECRET.encode() not in body and body.count(b"[REDACTED]") == 3
    assert len(body) == big.stat().st_size - 3 * (len(SECRET) - len(b"[REDACTED]"))


async def test_a_log_value_the_database_refuses_rolls_the_run_back(
    tmp_path: Path, long_export: tuple[Path, Path, str], store_url: str
) -> None:
    """A NUL character in a log entry's time, deep in the log: Postgres text cannot hold it (the
    import is refused after the pages before it were written, and nothing stays); SQLite can."""
    good, repo, run_id = long_export

    def nul(lines: list[bytes]) -> None:
        entry = json.loads(lines[PAGE + 50])
        lines[PAGE + 50] = json.dumps({**entry, "ts": "2026-11-30T12:00:00\u0000Z"}).encode() + b"\n"

    odd = _with_log(good, tmp_path / "nul.tar.gz", nul)
    if store_url.startswith("postgresql"):
        refused = await _refused_leaving_nothing(tmp_path, odd, repo, "archive_unsafe_entry", store_url=store_url)
        assert "do not fit this store" in refused.message
        return
    destination = settings_for(tmp_path / "home-b", store_url)
    destination.home.mkdir()
    async with Store.open(destination.resolved_database_url) as store:
        await import_run(store, destination, odd, repo=clone(repo, tmp_path / "repo-b"))
        after = read_run_rows(store.engine, run_id)
    assert after is not None and after.log[PAGE + 50]["ts"] == "2026-11-30T12:00:00\u0000Z"
