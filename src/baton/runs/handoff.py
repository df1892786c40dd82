"""Hand-off of a run to another ``BATON_HOME``: ``baton export`` and ``baton import`` (docs/handoff.md).

An export is one gzip tar that the snapshot archives' paranoid reader checks
(:func:`baton.snapshots.archive.iter_members`, format ``baton-export/1``)::

    MANIFEST.json                 format, baton_version, exported_at, source {home, host, database},
                                  run (its row), task, latest_snapshot, agent_home_skipped,
                                  files [{path, size, sha256, mode}] (every member below)
    run/transitions.json          the run's status transitions
    run/log.jsonl                 the log entries as stored (payload: the stored, redacted, JSON text)
    run/runner_events.jsonl       the runner events
    run/conversation_state.json   the folded conversation (or null)
    run/snapshots.json            the snapshots' records
    run/gates.json                the run's gates (may be [])
    archives/<sha256>.tar.gz      every snapshot archive, from the blob store
    agent-home/…                  the run's agent home (Claude Code's session transcripts)

Never in the file: the run's ``launch`` folder (it holds the model key), files of the agent
home named like secrets, and any registered secret inside the files (replaced by ``[REDACTED]``).

An import reads the file twice before it writes anything but a staging folder (hostile files
are refused with ``archive_unsafe_entry``/``archive_too_large``/``archive_corrupt``/
``archive_version_unsupported``, and ``run_exists`` when this home has the run), then runs a
saga: the run's rows in one transaction → the latest snapshot restored into the repository
(``workspace_dirty`` unless ``force``) → archives into the blob store, the agent home into
place, the shadow repository seeded so snapshot ids go on. A failure undoes the rows and the
run's folder.
"""

# ruff: noqa: PTH105
# (lstat-level os calls on an untrusted tree: Path methods may follow symlinks)
from __future__ import annotations

import asyncio
import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import tarfile
import tempfile
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy.exc import SQLAlchemyError

import baton
from baton.config import Settings
from baton.errors import NotFoundError, RefusedError, UsageError
from baton.events.entry import utc_timestamp
from baton.runs._export_rows import (
    as_integer,
    as_list,
    json_lines,
    log_rows,
    parse_json,
    row_of,
    run_row,
    snapshot_row,
    unsafe,
)
from baton.runs.executors import executor_alive
from baton.runs.relocation import (
    blob_path,
    move_claude_project,
    restore_latest_snapshot,
    restore_unless_held,
    seed_shadow,
)
from baton.snapshots import RestoreResult, blob_store_for
from baton.snapshots.archive import ArchiveLimits, Manifest, Member, iter_members, verify_archive
from baton.snapshots.blobs import BlobStore
from baton.snapshots.shadow import DEFAULT_SECRET_PATTERNS
from baton.store import Store
from baton.store._transfer import RunRows, delete_run_rows, insert_run_rows, read_run_rows
from baton.store.records import TERMINAL_STATUSES
from baton.store.redact import encode_json
from baton.store.tables import gates, run_transitions, runner_events, tasks

__all__ = [
    "EXPORT_FORMAT",
    "ExportResult",
    "ImportResult",
    "export_run",
    "import_run",
    "restore_latest_snapshot",
]

EXPORT_FORMAT: Final = "baton-export/1"
_LIVE: Final = frozenset({"queued", "running", "paused", "interrupted"})
_ARCHIVE_MEMBER: Final = re.compile(r"archives/([0-9a-f]{64})\.tar\.gz")
_AGENT_HOME: Final = "agent-home"
_SECRET_NAMES: Final = (*DEFAULT_SECRET_PATTERNS, ".credentials.json", "credentials.json", "auth.json")
_DATA: Final = {
    "transitions": "run/transitions.json",
    "log": "run/log.jsonl",
    "runner_events": "run/runner_events.jsonl",
    "conversation_state": "run/conversation_state.json",
    "snapshots": "run/snapshots.json",
    "gates": "run/gates.json",
}


@dataclass(frozen=True)
class ExportResult:
    path: Path
    run_id: str
    status: str
    log_entries: int
    snapshots: int
    agent_home_files: int
    bytes: int
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "status": self.status,
            "log_entries": self.log_entries,
            "snapshots": self.snapshots,
            "agent_home_files": self.agent_home_files,
            "bytes": self.bytes,
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class ImportResult:
    run_id: str
    status: str
    repo: Path
    snapshot_id: str | None  # the snapshot the repository holds now
    restored: RestoreResult | None  # None: nothing to restore, or the repository held it already
    log_entries: int
    agent_home_files: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "repo": str(self.repo),
            "snapshot_id": self.snapshot_id,
            "restored": self.restored.to_dict() if self.restored else None,
            "log_entries": self.log_entries,
            "agent_home_files": self.agent_home_files,
            "notes": self.notes,
        }


# -- export ----------------------------------------------------------------------------------


async def export_run(
    store: Store,
    settings: Settings,
    run_id: str,
    out: Path,
    *,
    executing: Collection[str] = (),
    secrets: Iterable[str] = (),
) -> ExportResult:
    """Write run ``run_id`` to ``out`` (see the module docstring); ``run_active`` while it executes."""
    record = await store.get_run(run_id)
    if run_id in executing or (record.status in _LIVE and executor_alive(record.executor_id, record.heartbeat_at)):
        raise RefusedError(
            "run_active", f"run {run_id} is being executed by {record.executor_id or 'this process'}; export it after"
        )
    if out.is_dir():
        raise UsageError("invalid_argument", f"--out {out} is a folder")
    rows = await asyncio.to_thread(read_run_rows, store.engine, run_id)
    if rows is None:  # deleted in between
        raise RefusedError("run_not_resumable", f"run {run_id} disappeared during the export")
    known = [s for s in (settings.anthropic_api_key, settings.openai_api_key, *secrets) if s and len(s) >= 8]
    blobs = blob_store_for(None, settings.home)
    return await asyncio.to_thread(_write_export, rows, settings, blobs, out, known)


def _write_export(rows: RunRows, settings: Settings, blobs: BlobStore, out: Path, secrets: list[str]) -> ExportResult:
    run_id = str(rows.run["id"])
    data: dict[str, bytes] = {
        _DATA["transitions"]: _json_bytes(rows.transitions),
        _DATA["log"]: b"".join(_json_line(entry) for entry in rows.log),
        _DATA["runner_events"]: b"".join(_json_line(event) for event in rows.runner_events),
        _DATA["conversation_state"]: _json_bytes(rows.conversation_state),
        _DATA["snapshots"]: _json_bytes(rows.snapshots),
        _DATA["gates"]: _json_bytes(rows.gates),
    }
    skipped: list[dict[str, str]] = []
    home_files = _agent_home_files(settings.run_dir(run_id) / _AGENT_HOME, secrets, skipped)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".baton-export-", dir=out.parent) as scratch:
        archives: dict[str, Path] = {}
        for snapshot in rows.snapshots:
            key = snapshot.get("archive_key")
            if not key or key in archives:
                continue
            archives[key] = blob_path(blobs, str(key), Path(scratch))
        files: list[dict[str, Any]] = [_listed(name, len(body), _sha256(body), "100644") for name, body in data.items()]
        for key, path in archives.items():
            files.append(_listed(_archive_name(key), path.stat().st_size, key.partition(":")[2], "100644"))
        for name, (body, mode) in home_files.items():
            files.append(_listed(name, len(body), _sha256(body), mode))
        latest = next((s["id"] for s in reversed(rows.snapshots) if s.get("archive_key")), None)
        manifest = {
            "format": EXPORT_FORMAT,
            "baton_version": baton.__version__,
            "exported_at": utc_timestamp(),
            "source": {
                "home": str(settings.home),
                "host": socket.gethostname(),
                "database": settings.resolved_database_url.partition(":")[0],
            },
            "run": rows.run,
            "task": rows.task,
            "latest_snapshot": latest,
            "agent_home_skipped": skipped,
            "files": files,
            "deleted": [],
            "symlinks": {},
            "submodules": {},
        }
        partial = Path(scratch) / "export.tar.gz"
        with (
            partial.open("wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz,
            tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar,
        ):
            _add(tar, "MANIFEST.json", _json_bytes(manifest), 0o644)
            for name, body in data.items():
                _add(tar, name, body, 0o644)
            for key, path in archives.items():
                info = tarfile.TarInfo(_archive_name(key))
                info.size = path.stat().st_size
                info.mode = 0o644
                with path.open("rb") as source:
                    tar.addfile(info, source)
            for name, (body, mode) in home_files.items():
                _add(tar, name, body, 0o755 if mode == "100755" else 0o644)
        size = partial.stat().st_size
        os.replace(partial, out)
    return ExportResult(
        path=out,
        run_id=run_id,
        status=str(rows.run["status"]),
        log_entries=len(rows.log),
        snapshots=len(rows.snapshots),
        agent_home_files=len(home_files),
        bytes=size,
        skipped=skipped,
    )


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogateescape")


def _json_line(value: Any) -> bytes:
    return encode_json(value).encode("utf-8", "surrogateescape") + b"\n"  # orjson: a long log is most of the work


def _sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _listed(path: str, size: int, sha256: str, mode: str) -> dict[str, Any]:
    return {"path": path, "size": size, "sha256": sha256, "mode": mode}


def _archive_name(key: str) -> str:
    return f"archives/{key.partition(':')[2]}.tar.gz"


def _add(tar: tarfile.TarFile, name: str, body: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(body)
    info.mode = mode
    tar.addfile(info, io.BytesIO(body))


def _is_secret_name(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _SECRET_NAMES)


def _agent_home_files(root: Path, secrets: list[str], skipped: list[dict[str, str]]) -> dict[str, tuple[bytes, str]]:
    """``agent-home/<path>`` → (content with secrets redacted, git mode), regular files only."""
    found: dict[str, tuple[bytes, str]] = {}
    if not root.is_dir():
        return found
    raw_secrets = [secret.encode() for secret in sorted(set(secrets), key=len, reverse=True)]
    for folder, folders, names in os.walk(root):
        folders.sort()
        for name in sorted(names):
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                skipped.append({"path": relative, "reason": "not_a_regular_file"})
                continue
            if _is_secret_name(relative):
                skipped.append({"path": relative, "reason": "secret"})
                continue
            body = path.read_bytes()
            for secret in raw_secrets:
                body = body.replace(secret, b"[REDACTED]")
            found[f"{_AGENT_HOME}/{relative}"] = (body, "100755" if info.st_mode & 0o111 else "100644")
    return found


# -- import ----------------------------------------------------------------------------------


@dataclass
class _Unpacked:
    rows: RunRows
    archives: dict[str, Path]  # blob key → staged file
    agent_home_files: int


async def import_run(
    store: Store,
    settings: Settings,
    path: Path,
    *,
    repo: Path | None = None,
    force: bool = False,
    limits: ArchiveLimits | None = None,
) -> ImportResult:
    """Recreate the exported run in this home and its latest snapshot in ``repo`` (default: the
    run's recorded repository); see the module docstring."""
    if not path.is_file():
        raise UsageError("invalid_argument", f"{path} is not a file")
    manifest = await asyncio.to_thread(verify_archive, path, limits, expected_format=EXPORT_FORMAT)
    run = run_row(manifest.raw.get("run"))
    run_id = str(run["id"])
    if await _run_known(store, run_id) or settings.run_dir(run_id).exists():
        raise RefusedError("run_exists", f"this BATON_HOME already has run {run_id}")
    recorded = run.get("repo") or run.get("cwd")
    if repo is None and not (isinstance(recorded, str) and recorded.startswith("/")):
        raise UsageError("invalid_argument", f"run {run_id} has no recorded repository: pass --repo DIR")
    target = Path(repo if repo is not None else str(recorded)).absolute()
    settings.home.mkdir(parents=True, exist_ok=True)
    staging = settings.home / f".import-{uuid.uuid4().hex[:12]}"  # beside runs/: moved into place by a rename
    try:
        unpacked = await asyncio.to_thread(_unpack, path, limits, manifest, run, staging)
        latest = next((s for s in reversed(unpacked.rows.snapshots) if s.get("archive_key")), None)
        if latest is None and not target.is_dir():
            raise UsageError("invalid_argument", f"{target} is not a directory (and the run has no snapshot for it)")
        _relocate(unpacked.rows, target)
        return await _install(store, settings, unpacked, target, latest, staging, force=force, limits=limits)
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, True)


async def _run_known(store: Store, run_id: str) -> bool:
    try:
        await store.get_run(run_id)
    except NotFoundError:
        return False
    return True


def _unpack(
    path: Path, limits: ArchiveLimits | None, manifest: Manifest, run: dict[str, Any], staging: Path
) -> _Unpacked:
    """The second read: the rows parsed and checked, archives and the agent home written to
    ``staging`` only (each member re-checked against the manifest as it is read)."""
    data: dict[str, bytes] = {}
    archives: dict[str, Path] = {}
    home_files = 0
    staging.mkdir()
    for item in iter_members(path, limits, expected_format=EXPORT_FORMAT):
        if not isinstance(item, Member):
            continue
        name = item.path
        body = item.data
        if body is None:
            raise unsafe(f"{name!r}: an export holds no symlinks")
        if name in _DATA.values():
            data[name] = body
        elif matched := _ARCHIVE_MEMBER.fullmatch(name):
            staged = staging / "archives" / f"{matched.group(1)}.tar.gz"
            staged.parent.mkdir(exist_ok=True)
            staged.write_bytes(body)
            archives[f"sha256:{matched.group(1)}"] = staged  # the member's sha256 was checked: it is the key
        elif name.startswith(f"{_AGENT_HOME}/"):
            staged = staging / name
            staged.parent.mkdir(parents=True, exist_ok=True)
            with staged.open("xb") as out:  # exclusive: a name twice was refused before
                out.write(body)
            staged.chmod(0o755 if item.mode == "100755" else 0o644)
            home_files += 1
        else:
            raise unsafe(f"member {name!r} is not part of a run export")
    missing = [name for name in _DATA.values() if name not in data]
    if missing:
        raise unsafe(f"the export lacks {missing}")
    for archive in archives.values():  # hostile snapshot archives end here, before any write
        verify_archive(archive, limits)
    rows = RunRows(run=run)
    task = manifest.raw.get("task")
    rows.task = row_of(task, tasks, ("id", "prompt", "created_at"), "task") if task is not None else None
    rows.transitions = [
        row_of(value, run_transitions, ("to_status", "at"), "transition")
        for value in as_list(parse_json(data[_DATA["transitions"]], "transitions"), "transitions")
    ]
    rows.log = log_rows(json_lines(data[_DATA["log"]], "the log"))
    rows.runner_events = [
        row_of(value, runner_events, ("seq", "log_seq", "ts", "type", "data"), "runner event")
        for value in json_lines(data[_DATA["runner_events"]], "runner events")
    ]
    state = parse_json(data[_DATA["conversation_state"]], "the conversation state")
    if state is not None:
        if not isinstance(state, dict) or not isinstance(state.get("state"), dict):
            raise unsafe("the export's conversation state is not an object")
        rows.conversation_state = {
            "upto_seq": as_integer(state.get("upto_seq"), "conversation upto_seq"),
            "state": state["state"],
            "updated_at": str(state.get("updated_at") or utc_timestamp()),
        }
    rows.snapshots = [
        snapshot_row(value, archives)
        for value in as_list(parse_json(data[_DATA["snapshots"]], "snapshots"), "snapshots")
    ]
    rows.gates = [
        row_of(value, gates, ("id", "kind", "status", "created_at"), "gate")
        for value in as_list(parse_json(data[_DATA["gates"]], "gates"), "gates")
    ]
    return _Unpacked(rows=rows, archives=archives, agent_home_files=home_files)


def _relocate(rows: RunRows, target: Path) -> None:
    """The run as it is in this home: its repository, and resumable (a live status becomes
    ``interrupted``; an ended run keeps its end)."""
    resolved = str(target.resolve())
    rows.run.update(repo=resolved, cwd=resolved, executor_id=None, heartbeat_at=None)
    status = rows.run["status"]
    if status not in TERMINAL_STATUSES and status != "interrupted":
        rows.transitions.append(
            {"from_status": status, "to_status": "interrupted", "reason": "imported", "at": utc_timestamp()}
        )
        rows.run.update(status="interrupted", status_reason="imported")


async def _install(
    store: Store,
    settings: Settings,
    unpacked: _Unpacked,
    target: Path,
    latest: dict[str, Any] | None,
    staging: Path,
    *,
    force: bool,
    limits: ArchiveLimits | None,
) -> ImportResult:
    rows = unpacked.rows
    run_id = str(rows.run["id"])
    run_dir = settings.run_dir(run_id)
    try:
        await asyncio.to_thread(insert_run_rows, store.engine, rows)
    except SQLAlchemyError as exc:
        raise unsafe(f"the export's rows do not fit this store: {exc}") from exc
    notes: list[str] = []
    try:
        restored = None
        if latest is not None:
            archive = unpacked.archives[str(latest["archive_key"])]
            restored = await asyncio.to_thread(restore_unless_held, archive, target, None, force, limits)
        await asyncio.to_thread(_place_files, settings, unpacked, staging, run_dir, rows, notes)
        if latest is not None:
            with_archives = [snapshot for snapshot in rows.snapshots if snapshot.get("archive_key")]
            await asyncio.to_thread(seed_shadow, run_dir, target, with_archives, unpacked.archives)
    except BaseException:
        await asyncio.to_thread(delete_run_rows, store.engine, run_id)
        await asyncio.to_thread(shutil.rmtree, run_dir, True)
        raise
    if restored is not None:
        notes.extend(restored.notes)
    return ImportResult(
        run_id=run_id,
        status=str(rows.run["status"]),
        repo=Path(str(rows.run["repo"])),
        snapshot_id=str(latest["id"]) if latest else None,
        restored=restored,
        log_entries=len(rows.log),
        agent_home_files=unpacked.agent_home_files,
        notes=notes,
    )


def _place_files(
    settings: Settings, unpacked: _Unpacked, staging: Path, run_dir: Path, rows: RunRows, notes: list[str]
) -> None:
    blobs = blob_store_for(None, settings.home)
    for archive in unpacked.archives.values():
        blobs.put_file(archive)
    run_dir.mkdir(parents=True)
    home = staging / _AGENT_HOME
    if home.is_dir():
        home.rename(run_dir / _AGENT_HOME)
        moved = move_claude_project(run_dir / _AGENT_HOME, str(rows.run["cwd"]))
        if moved:
            notes.append(moved)
