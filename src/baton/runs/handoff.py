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

# ruff: noqa: PTH105, PTH114, PTH115
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
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Table
from sqlalchemy.exc import SQLAlchemyError

import baton
from baton.config import Settings
from baton.errors import NotFoundError, RefusedError, UsageError, WorkspaceError
from baton.events.entry import utc_timestamp
from baton.runs.executors import executor_alive
from baton.snapshots import GitObjects, LocalBlobStore, RestoreResult, blob_store_for, restore_archive, shadow_for
from baton.snapshots.archive import ArchiveLimits, Manifest, Member, iter_members, verify_archive
from baton.snapshots.blobs import BlobStore
from baton.snapshots.shadow import DEFAULT_SECRET_PATTERNS
from baton.store import Store
from baton.store._transfer import RunRows, delete_run_rows, insert_run_rows, read_run_rows
from baton.store.records import RUN_MODES, RUN_STATUSES, TERMINAL_STATUSES
from baton.store.tables import gates, run_transitions, runner_events, runs, snapshots, tasks

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
_RUN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_ARCHIVE_MEMBER: Final = re.compile(r"archives/([0-9a-f]{64})\.tar\.gz")
_SNAPSHOT_ID: Final = re.compile(r"s[1-9][0-9]*")
_AGENT_HOME: Final = "agent-home"
_SECRET_NAMES: Final = (*DEFAULT_SECRET_PATTERNS, ".credentials.json", "credentials.json", "auth.json")
_DIRECTIONS: Final = frozenset({"to_agent", "from_agent", "baton"})
_DATA: Final = {
    "transitions": "run/transitions.json",
    "log": "run/log.jsonl",
    "runner_events": "run/runner_events.jsonl",
    "conversation_state": "run/conversation_state.json",
    "snapshots": "run/snapshots.json",
    "gates": "run/gates.json",
}
_SNAPSHOT_MESSAGE: Final = "baton snapshot "  # as ShadowRepo writes it
_CLAUDE_PROJECT_NAME_MAX: Final = 200  # Claude Code hashes longer project folder names


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


def _unsafe(message: str) -> WorkspaceError:
    return WorkspaceError("archive_unsafe_entry", message)


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
        _DATA["log"]: b"".join(_json_bytes(entry) + b"\n" for entry in rows.log),
        _DATA["runner_events"]: b"".join(_json_bytes(event) + b"\n" for event in rows.runner_events),
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
            archives[key] = _blob_path(blobs, str(key), Path(scratch))
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


def _blob_path(blobs: BlobStore, key: str, scratch: Path) -> Path:
    """A local file holding the blob (the store's own file, or a fetched copy)."""
    if isinstance(blobs, LocalBlobStore):
        path = blobs.path_of(key)
        if not path.is_file():
            raise NotFoundError("snapshot_not_found", f"the snapshot archive {key} is missing from {blobs.root}")
        return path
    fetched = scratch / key.partition(":")[2]
    blobs.fetch(key, fetched)
    return fetched


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
    run = _run_row(manifest.raw.get("run"))
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


def _row(value: Any, table: Table, required: Iterable[str], what: str) -> dict[str, Any]:
    """A row of ``table`` from the file: known columns only (never its keys), the required ones present."""
    if not isinstance(value, dict):
        raise _unsafe(f"the export's {what} is not an object")
    columns = {column.name for column in table.c} - {"run_key"} - ({"id"} if table is run_transitions else set())
    row = {name: item for name, item in value.items() if name in columns}
    missing = [name for name in required if row.get(name) is None]
    if missing:
        raise _unsafe(f"the export's {what} lacks {missing}")
    return row


def _run_row(value: Any) -> dict[str, Any]:
    run = _row(value, runs, ("id", "agent", "permission_mode", "run_mode", "status", "created_at"), "run")
    if not isinstance(run["id"], str) or not _RUN_ID.fullmatch(run["id"]) or run["id"] in (".", ".."):
        raise _unsafe(f"the export's run id {run['id']!r} is not a run id")
    if run["status"] not in RUN_STATUSES or run["run_mode"] not in RUN_MODES:
        raise _unsafe(f"the export's run has an unknown status or run mode: {run['status']!r}, {run['run_mode']!r}")
    for name in ("agent", "permission_mode", "created_at"):
        if not isinstance(run[name], str):
            raise _unsafe(f"the export's run {name} is not a string")
    return run


def _json(body: bytes, name: str) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unsafe(f"{name} in the export is not JSON: {exc}") from exc


def _json_lines(body: bytes, name: str) -> list[Any]:
    return [_json(line, name) for line in body.splitlines() if line.strip()]


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
            raise _unsafe(f"{name!r}: an export holds no symlinks")
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
            raise _unsafe(f"member {name!r} is not part of a run export")
    missing = [name for name in _DATA.values() if name not in data]
    if missing:
        raise _unsafe(f"the export lacks {missing}")
    for archive in archives.values():  # hostile snapshot archives end here, before any write
        verify_archive(archive, limits)
    rows = RunRows(run=run)
    task = manifest.raw.get("task")
    rows.task = _row(task, tasks, ("id", "prompt", "created_at"), "task") if task is not None else None
    rows.transitions = [
        _row(value, run_transitions, ("to_status", "at"), "transition")
        for value in _list(_json(data[_DATA["transitions"]], "transitions"), "transitions")
    ]
    rows.log = _log_rows(_json_lines(data[_DATA["log"]], "the log"))
    rows.runner_events = [
        _row(value, runner_events, ("seq", "log_seq", "ts", "type", "data"), "runner event")
        for value in _json_lines(data[_DATA["runner_events"]], "runner events")
    ]
    state = _json(data[_DATA["conversation_state"]], "the conversation state")
    if state is not None:
        if not isinstance(state, dict) or not isinstance(state.get("state"), dict):
            raise _unsafe("the export's conversation state is not an object")
        rows.conversation_state = {
            "upto_seq": _integer(state.get("upto_seq"), "conversation upto_seq"),
            "state": state["state"],
            "updated_at": str(state.get("updated_at") or utc_timestamp()),
        }
    rows.snapshots = [
        _snapshot_row(value, archives) for value in _list(_json(data[_DATA["snapshots"]], "snapshots"), "snapshots")
    ]
    rows.gates = [
        _row(value, gates, ("id", "kind", "status", "created_at"), "gate")
        for value in _list(_json(data[_DATA["gates"]], "gates"), "gates")
    ]
    return _Unpacked(rows=rows, archives=archives, agent_home_files=home_files)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _unsafe(f"the export's {what} are not a list")
    return value


def _integer(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _unsafe(f"the export's {what} is not a count")
    return value


def _log_rows(values: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for expected, value in enumerate(values, 1):
        if not isinstance(value, dict):
            raise _unsafe("a log entry in the export is not an object")
        seq = _integer(value.get("seq"), "log seq")
        if seq != expected:
            raise _unsafe(f"the export's log is not numbered 1, 2, 3 … (entry {expected} has seq {seq})")
        payload, direction, method = value.get("payload"), value.get("direction"), value.get("method")
        if not isinstance(payload, str) or not isinstance(_json(payload.encode(), "a log payload"), dict):
            raise _unsafe(f"log entry {seq}'s payload is not a JSON object")
        if direction not in _DIRECTIONS or not (method is None or isinstance(method, str)):
            raise _unsafe(f"log entry {seq} has an unknown direction or method")
        rows.append(
            {"seq": seq, "ts": str(value.get("ts")), "direction": direction, "method": method, "payload": payload}
        )
    return rows


def _snapshot_row(value: Any, archives: Mapping[str, Path]) -> dict[str, Any]:
    row = _row(value, snapshots, ("id", "tree_hash", "created_at"), "snapshot")
    if not isinstance(row["id"], str) or not _SNAPSHOT_ID.fullmatch(row["id"]):
        raise _unsafe(f"the export's snapshot id {row['id']!r} is not s1, s2 …")
    for name in ("added", "modified", "deleted", "renamed", "skipped"):
        row[name] = _list(row.get(name) or [], f"snapshot {name}")
    key = row.get("archive_key")
    if key is not None and key not in archives:
        raise _unsafe(f"snapshot {row['id']} names the archive {key!r}, which the export lacks")
    return row


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
        raise _unsafe(f"the export's rows do not fit this store: {exc}") from exc
    notes: list[str] = []
    try:
        restored = None
        if latest is not None:
            archive = unpacked.archives[str(latest["archive_key"])]
            restored = await asyncio.to_thread(_restore_unless_held, archive, target, None, force, limits)
        await asyncio.to_thread(_place_files, settings, unpacked, staging, run_dir, rows, notes)
        if latest is not None:
            await asyncio.to_thread(_seed_shadow, run_dir, target, latest)
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
        moved = _move_claude_project(run_dir / _AGENT_HOME, rows)
        if moved:
            notes.append(moved)


def claude_project_folder(cwd: str) -> str | None:
    """The folder Claude Code keeps a working directory's sessions in (``.claude/projects/<it>``),
    or None when the name would be hashed (longer than 200 characters)."""
    name = re.sub(r"[^a-zA-Z0-9]", "-", cwd)
    return name if len(name) <= _CLAUDE_PROJECT_NAME_MAX else None


def _move_claude_project(agent_home: Path, rows: RunRows) -> str | None:
    """Claude Code finds a session by its working directory: move the run's transcripts to the
    folder of the new one, so the resume can take the native path."""
    projects = agent_home / ".claude" / "projects"
    if not projects.is_dir():
        return None
    new = claude_project_folder(str(rows.run["cwd"]))
    if new is None:
        shutil.rmtree(projects)
        return (
            "the repository's path is too long for Claude Code's session folder: the resume rebuilds the conversation"
        )
    if (projects / new).is_dir():
        return None
    sources = [entry for entry in sorted(projects.iterdir()) if entry.is_dir() and not entry.is_symlink()]
    if not sources:
        return None
    (projects / new).mkdir()
    for source in sources:
        for transcript in source.iterdir():
            transcript.rename(projects / new / transcript.name)
        source.rmdir()
    return None


# -- restoring the latest snapshot (import, and resume --repo on a shared store) ---------------


def holds_snapshot(manifest: Manifest, target: Path) -> bool:
    """Whether ``target`` already has every file, symlink and deletion of the snapshot."""
    for listed in manifest.files:
        path = target / listed.path
        try:
            if os.path.islink(path) or not path.is_file() or path.stat().st_size != listed.size:
                return False
            if _sha256(path.read_bytes()) != listed.sha256:
                return False
        except OSError:
            return False
    for link, wanted in manifest.symlinks.items():
        if not os.path.islink(target / link) or os.readlink(target / link) != wanted:
            return False
    return not any(os.path.lexists(target / deleted) for deleted in manifest.deleted)


def _restore_unless_held(
    archive: Path, target: Path, shadow_base: GitObjects | None, force: bool, limits: ArchiveLimits | None
) -> RestoreResult | None:
    manifest = verify_archive(archive, limits)
    if target.is_dir() and holds_snapshot(manifest, target):
        return None
    base, label = shadow_base, "shadow"
    if target.is_dir() and (target / ".git").exists():
        own = GitObjects.of_repository(target)
        if manifest.base_commit and own.has_commit(manifest.base_commit):
            base, label = own, "base_repo"
    return restore_archive(archive, target, base=base, base_label=label, force=force, limits=limits)


def _seed_shadow(run_dir: Path, target: Path, latest: Mapping[str, Any]) -> None:
    """A shadow for a run that comes from elsewhere: its start is the tree as restored, recorded
    as the run's latest snapshot, so the next capture is ``s<N+1>`` and compares with it."""
    shadow = shadow_for(run_dir, target)
    if shadow.exists:
        return
    shadow.prepare()
    tree = shadow.git("rev-parse", "refs/baton/start^{tree}").decode().strip()
    start = shadow.git("rev-parse", "refs/baton/start").decode().strip()
    record = {
        key: value
        for key, value in latest.items()
        if key in ("id", "base_commit", "log_seq_from", "log_seq_to", "archive_key", "created_at")
    }
    record.update(tree_hash=tree, imported_tree_hash=latest.get("tree_hash"))
    record.update({name: latest.get(name) or [] for name in ("added", "modified", "deleted", "renamed", "skipped")})
    message = f"{_SNAPSHOT_MESSAGE}{latest['id']}\n\n{json.dumps(record, sort_keys=True)}\n"
    commit = shadow.git("commit-tree", tree, "-p", start, "-F", "-", input=message.encode()).decode().strip()
    shadow.git("update-ref", f"refs/snapshots/{latest['id']}", commit)
    shadow.git("update-ref", "refs/heads/snapshots", commit)


async def restore_latest_snapshot(
    store: Store, settings: Settings, run_id: str, target: Path, *, force: bool = False
) -> RestoreResult | None:
    """Bring ``target`` to the run's latest snapshot when it does not hold it (``baton resume
    --repo DIR`` on another machine sharing the store and the blob store); None when nothing
    was written. ``workspace_dirty`` when ``target`` has changes the restore would lose."""
    found = await store.list_snapshots(run_id)
    latest = next((s for s in reversed(found) if s.get("archive_key")), None)
    if latest is None:
        return None
    run_dir = settings.run_dir(run_id)
    blobs = blob_store_for(None, settings.home)

    def work() -> RestoreResult | None:
        with tempfile.TemporaryDirectory(prefix="baton-resume-") as scratch:
            archive = _blob_path(blobs, str(latest["archive_key"]), Path(scratch))
            shadow = shadow_for(run_dir, target)
            base = GitObjects(shadow.environment) if shadow.exists else None
            restored = _restore_unless_held(archive, target, base, force, None)
        _seed_shadow(run_dir, target, latest)
        return restored

    return await asyncio.to_thread(work)
