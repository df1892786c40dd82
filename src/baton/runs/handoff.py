"""Hand-off of a run to another ``BATON_HOME``: ``baton export`` and ``baton import`` (docs/handoff.md).

An export is one gzip tar that the snapshot archives' paranoid reader checks
(:func:`baton.snapshots.archive.iter_streamed_members`, format ``baton-export/2``)::

    MANIFEST.json                 format, baton_version, exported_at, source {home, host, database},
                                  run (its row), task, latest_snapshot, agent_home_skipped,
                                  files [{path, size, sha256, mode}] (every member below)
    run/transitions.jsonl         the run's status transitions, one JSON object a line
    run/log.jsonl                 the log entries as stored (payload: the stored, redacted, JSON text)
    run/runner_events.jsonl       the runner events
    run/conversation_state.json   the folded conversation (or null)
    run/snapshots.jsonl           the snapshots' records
    run/gates.jsonl               the run's gates (may be empty)
    archives/<sha256>.tar.gz      every snapshot archive, from the blob store
    agent-home/…                  the run's agent home (Claude Code's session transcripts)

``baton-export/1`` (the same, with ``transitions``, ``snapshots`` and ``gates`` as JSON arrays in
``.json`` members) is still read. Both directions run in bounded memory: the export reads the
rows in pages into spooled files beside ``out`` (the manifest, first in the tar, needs every
member's size and hash), then copies them into the tar; the import reads each member in chunks,
checks each line as it comes (none longer than ``ArchiveLimits.max_record_bytes``:
``archive_too_large``), stages the checked rows as files and inserts them in pages, in one
transaction.

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
import json
import marshal
import os
import re
import shutil
import socket
import stat
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

from baton.config import VERSION, Settings
from baton.errors import NotFoundError, RefusedError, StorageError, UsageError, WorkspaceError
from baton.events.entry import utc_timestamp
from baton.runs._export_rows import (
    as_integer,
    as_list,
    log_row,
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
from baton.snapshots import GitObjects, RestoreResult, blob_store_for
from baton.snapshots.archive import ArchiveLimits, Manifest, iter_streamed_members, verify_archive
from baton.snapshots.blobs import BlobStore
from baton.snapshots.shadow import DEFAULT_SECRET_PATTERNS
from baton.store import Store
from baton.store.records import TERMINAL_STATUSES
from baton.store.redact import encode_json
from baton.store.tables import gates, run_transitions, runner_events, tasks
from baton.store.transfer import PAGE, TABLES, Page, RunHead
from baton.workspaces.create import recreate_workspace, remove_made
from baton.workspaces.record import workspace_of

Row = dict[str, Any]

__all__ = [
    "EXPORT_FORMAT",
    "ExportResult",
    "ImportResult",
    "export_run",
    "import_run",
    "restore_latest_snapshot",
]

EXPORT_FORMAT: Final = "baton-export/2"
READABLE_FORMATS: Final = (EXPORT_FORMAT, "baton-export/1")
_LIVE: Final = frozenset({"queued", "running", "paused", "interrupted"})
_ARCHIVE_MEMBER: Final = re.compile(r"archives/([0-9a-f]{64})\.tar\.gz")
_AGENT_HOME: Final = "agent-home"
_SECRET_NAMES: Final = (*DEFAULT_SECRET_PATTERNS, ".credentials.json", "credentials.json", "auth.json")
_STATE: Final = "conversation_state"  # the one table that travels as one JSON document
# Each table's member in the export, by format; True: JSON Lines, False: one JSON document.
_MEMBERS: Final[dict[str, dict[str, tuple[str, bool]]]] = {
    EXPORT_FORMAT: {
        "transitions": ("run/transitions.jsonl", True),
        "log": ("run/log.jsonl", True),
        "runner_events": ("run/runner_events.jsonl", True),
        _STATE: ("run/conversation_state.json", False),
        "snapshots": ("run/snapshots.jsonl", True),
        "gates": ("run/gates.jsonl", True),
    },
    "baton-export/1": {
        "transitions": ("run/transitions.json", False),
        "log": ("run/log.jsonl", True),
        "runner_events": ("run/runner_events.jsonl", True),
        _STATE: ("run/conversation_state.json", False),
        "snapshots": ("run/snapshots.json", False),
        "gates": ("run/gates.json", False),
    },
}
_CHUNK: Final = 1 << 20


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
    known = [s for s in (settings.anthropic_api_key, settings.openai_api_key, *secrets) if s and len(s) >= 8]
    blobs = blob_store_for(None, settings.home)
    return await asyncio.to_thread(_write_export, store, run_id, settings, blobs, out, known)


class _Spool:
    """A member written to a scratch file first: its size and sha256 go into the manifest, which
    comes first in the tar."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.size = 0
        self.rows = 0
        self._digest = hashlib.sha256()
        self._file: IO[bytes] = path.open("xb")

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._digest.update(data)
        self.size += len(data)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def __enter__(self) -> _Spool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._file.close()


def _write_export(
    store: Store, run_id: str, settings: Settings, blobs: BlobStore, out: Path, secrets: list[str]
) -> ExportResult:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".baton-export-", dir=out.parent) as scratch_name:
        scratch = Path(scratch_name)
        members: dict[str, tuple[Path, int, str, str]] = {}  # name → (file, size, sha256, git mode)
        head, snapshot_rows, log_entries = _spool_rows(store, run_id, scratch / "rows", members)
        archives: dict[str, Path] = {}
        for snapshot in snapshot_rows:
            key = snapshot.get("archive_key")
            if key and key not in archives:
                archives[key] = path = blob_path(blobs, str(key), scratch)
                members[_archive_name(key)] = (path, path.stat().st_size, key.partition(":")[2], "100644")
        skipped: list[dict[str, str]] = []
        home_files = _spool_agent_home(settings.run_dir(run_id) / _AGENT_HOME, secrets, skipped, scratch / "home")
        members.update(home_files)
        latest = next((s["id"] for s in reversed(snapshot_rows) if s.get("archive_key")), None)
        manifest = {
            "format": EXPORT_FORMAT,
            "baton_version": VERSION,
            "exported_at": utc_timestamp(),
            "source": {
                "home": str(settings.home),
                "host": socket.gethostname(),
                "database": settings.resolved_database_url.partition(":")[0],
            },
            "run": head.run,
            "task": head.task,
            "latest_snapshot": latest,
            "agent_home_skipped": skipped,
            "files": [_listed(name, size, sha, mode) for name, (_path, size, sha, mode) in members.items()],
            "deleted": [],
            "symlinks": {},
            "submodules": {},
        }
        partial = scratch / "export.tar.gz"
        with (
            partial.open("wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz,
            tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar,
        ):
            body = _json_bytes(manifest)
            with _Spool(scratch / "MANIFEST.json") as spool:
                spool.write(body)
            _add(tar, "MANIFEST.json", spool.path, len(body), 0o644)
            for name, (path, size, _sha, mode) in members.items():
                _add(tar, name, path, size, 0o755 if mode == "100755" else 0o644)
        size = partial.stat().st_size
        os.replace(partial, out)
    return ExportResult(
        path=out,
        run_id=run_id,
        status=str(head.run["status"]),
        log_entries=log_entries,
        snapshots=len(snapshot_rows),
        agent_home_files=len(home_files),
        bytes=size,
        skipped=skipped,
    )


def _spool_rows(
    store: Store, run_id: str, folder: Path, members: dict[str, tuple[Path, int, str, str]]
) -> tuple[RunHead, list[Row], int]:
    """The run's tables into one spooled member each, page by page in one read transaction:
    the run's head, its snapshots (few: the archives to add) and the number of log entries."""
    snapshot_rows: list[Row] = []
    log_entries = 0
    with store.reading_run_rows(run_id) as reader:
        if reader is None:  # deleted in between
            raise RefusedError("run_not_resumable", f"run {run_id} disappeared during the export")
        for table in TABLES:
            name, lines = _MEMBERS[EXPORT_FORMAT][table]
            with _Spool(folder / table) as spool:
                if lines:
                    for page in reader.pages(table):
                        spool.write(b"".join(_json_line(row) for row in page))
                        spool.rows += len(page)
                        if table == "snapshots":
                            snapshot_rows.extend(page)
                else:
                    state = [row for page in reader.pages(table) for row in page]
                    spool.write(_json_bytes(state[0] if state else None))
            members[name] = (spool.path, spool.size, spool.sha256, "100644")
            if table == "log":
                log_entries = spool.rows
        head = reader.head
    return head, snapshot_rows, log_entries


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogateescape")


def _json_line(value: Any) -> bytes:
    return encode_json(value).encode("utf-8", "surrogateescape") + b"\n"  # orjson: a long log is most of the work


def _listed(path: str, size: int, sha256: str, mode: str) -> dict[str, Any]:
    return {"path": path, "size": size, "sha256": sha256, "mode": mode}


def _archive_name(key: str) -> str:
    return f"archives/{key.partition(':')[2]}.tar.gz"


def _add(tar: tarfile.TarFile, name: str, path: Path, size: int, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = mode
    with path.open("rb") as source:
        tar.addfile(info, source)


def _is_secret_name(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _SECRET_NAMES)


def _spool_agent_home(
    root: Path, secrets: list[str], skipped: list[dict[str, str]], folder: Path
) -> dict[str, tuple[Path, int, str, str]]:
    """``agent-home/<path>`` → (a copy with secrets redacted, size, sha256, git mode), regular files only."""
    found: dict[str, tuple[Path, int, str, str]] = {}
    if not root.is_dir():
        return found
    raw_secrets = [secret.encode() for secret in sorted(set(secrets), key=len, reverse=True)]
    for folder_name, folders, names in os.walk(root):
        folders.sort()
        for name in sorted(names):
            path = Path(folder_name) / name
            relative = path.relative_to(root).as_posix()
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                skipped.append({"path": relative, "reason": "not_a_regular_file"})
                continue
            if _is_secret_name(relative):
                skipped.append({"path": relative, "reason": "secret"})
                continue
            with _Spool(folder / str(len(found))) as spool:
                _redacted_copy(path, spool.write, raw_secrets)
            mode = "100755" if info.st_mode & 0o111 else "100644"
            found[f"{_AGENT_HOME}/{relative}"] = (spool.path, spool.size, spool.sha256, mode)
    return found


def _redacted_copy(source: Path, write: Callable[[bytes], None], secrets: list[bytes]) -> None:
    """``source`` through ``write`` in chunks, every secret replaced by ``[REDACTED]``: the last
    ``longest secret - 1`` bytes of a chunk wait for the next, so a secret across two is caught."""
    keep = max((len(secret) for secret in secrets), default=1) - 1
    carry = b""
    with source.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            buffer = carry + chunk
            for secret in secrets:
                buffer = buffer.replace(secret, b"[REDACTED]")
            cut = max(len(buffer) - keep, 0)
            write(buffer[:cut])
            carry = buffer[cut:]
    write(carry)


# -- import ----------------------------------------------------------------------------------


@dataclass
class _Unpacked:
    head: RunHead
    staged: dict[str, Path]  # table → its checked rows, in marshal pages
    snapshots: list[Row]  # few, and needed whole: the archives to check and to seed the shadow
    conversation_state: Row | None
    archives: dict[str, Path]  # blob key → staged file
    log_entries: int = 0
    agent_home_files: int = 0


async def import_run(
    store: Store,
    settings: Settings,
    path: Path,
    *,
    repo: Path | None = None,
    base_repo: Path | None = None,
    force: bool = False,
    limits: ArchiveLimits | None = None,
) -> ImportResult:
    """Recreate the exported run in this home and its latest snapshot in ``repo`` (default: the
    run's recorded repository), the base commit's files from ``repo``'s own repository or else
    from ``base_repo`` (``base_commit_missing`` for an empty ``repo`` when neither has it); see
    the module docstring."""
    if not path.is_file():
        raise UsageError("invalid_argument", f"{path} is not a file")
    base = await asyncio.to_thread(GitObjects.of_repository, base_repo) if base_repo is not None else None
    manifest = await asyncio.to_thread(verify_archive, path, limits, expected_format=READABLE_FORMATS)
    run = run_row(manifest.raw.get("run"))
    run_id = str(run["id"])
    if await _run_known(store, run_id) or settings.run_dir(run_id).exists():
        raise RefusedError("run_exists", f"this BATON_HOME already has run {run_id}")
    recorded = run.get("repo") or run.get("cwd")
    # A worktree or clone is made again in this home (docs/workspaces.md), unless --repo says where.
    workspace = workspace_of(run.get("request")) if repo is None else None
    workspace = workspace if workspace is not None and workspace.separate else None
    if repo is None and workspace is None and not (isinstance(recorded, str) and recorded.startswith("/")):
        raise UsageError("invalid_argument", f"run {run_id} has no recorded repository: pass --repo DIR")
    if workspace is not None:
        recorded = str(settings.workspace_dir(run_id))
    target = Path(repo if repo is not None else str(recorded)).absolute()
    settings.home.mkdir(parents=True, exist_ok=True)
    staging = settings.home / f".import-{uuid.uuid4().hex[:12]}"  # beside runs/: moved into place by a rename
    try:
        unpacked = await asyncio.to_thread(_unpack, path, limits, manifest, run, staging)
        if workspace is not None:
            await asyncio.to_thread(recreate_workspace, settings, workspace, run_id)
        latest = next((s for s in reversed(unpacked.snapshots) if s.get("archive_key")), None)
        if latest is None and not target.is_dir():
            raise UsageError("invalid_argument", f"{target} is not a directory (and the run has no snapshot for it)")
        _relocate(unpacked, target)
        return await _install(store, settings, unpacked, target, latest, staging, base, force=force, limits=limits)
    except BaseException:
        if workspace is not None:  # the worktree or clone made for it goes with the import
            await asyncio.to_thread(remove_made, settings, workspace.kind, workspace.repo, target)
        raise
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
    """The second read: each member re-checked against the manifest as it is read, in chunks; the
    rows checked line by line and staged as files, archives and the agent home written to
    ``staging`` only, every snapshot archive verified. Nothing else is written."""
    limits = limits or ArchiveLimits()
    layout = _MEMBERS[str(manifest.raw["format"])]
    tables = {name: (table, lines) for table, (name, lines) in layout.items()}
    task = manifest.raw.get("task")
    head = RunHead(run=run, task=None if task is None else row_of(task, tasks, ("id", "prompt", "created_at"), "task"))
    unpacked = _Unpacked(head=head, staged={}, snapshots=[], conversation_state=None, archives={})
    raw_snapshots: list[Any] = []
    found: set[str] = set()
    staging.mkdir()
    (staging / "rows").mkdir()
    for item in iter_streamed_members(path, limits, expected_format=READABLE_FORMATS):
        if isinstance(item, Manifest):
            continue
        name = item.path
        if item.link_target is not None:
            raise unsafe(f"{name!r}: an export holds no symlinks")
        if name in tables:
            found.add(name)
            table, lines = tables[name]
            if table == _STATE:
                unpacked.conversation_state = _conversation_state(_json_document(item.chunks, limits, name))
                continue
            values = (
                _json_lines(item.chunks, limits, name)
                if lines
                else iter(as_list(_json_document(item.chunks, limits, name), table.replace("_", " ")))
            )
            if table == "snapshots":
                raw_snapshots.extend(values)
            else:
                unpacked.staged[table] = staged = staging / "rows" / f"{table}.pages"
                count = _stage(values, _CHECKS[table], staged)
                if table == "log":
                    unpacked.log_entries = count
        elif matched := _ARCHIVE_MEMBER.fullmatch(name):
            staged = staging / "archives" / f"{matched.group(1)}.tar.gz"
            staged.parent.mkdir(exist_ok=True)
            _write_chunks(item.chunks, staged, 0o644)
            unpacked.archives[f"sha256:{matched.group(1)}"] = staged  # the member's sha256 was checked: it is the key
        elif name.startswith(f"{_AGENT_HOME}/"):
            staged = staging / name
            staged.parent.mkdir(parents=True, exist_ok=True)
            _write_chunks(item.chunks, staged, 0o755 if item.mode == "100755" else 0o644)
            unpacked.agent_home_files += 1
        else:
            raise unsafe(f"member {name!r} is not part of a run export")
    missing = sorted(set(tables) - found)
    if missing:
        raise unsafe(f"the export lacks {missing}")
    for archive in unpacked.archives.values():  # hostile snapshot archives end here, before any write
        verify_archive(archive, limits)
    unpacked.snapshots = [snapshot_row(value, unpacked.archives) for value in raw_snapshots]
    return unpacked


_CHECKS: Final[dict[str, Callable[[Any, int], Row]]] = {
    "transitions": lambda value, _number: row_of(value, run_transitions, ("to_status", "at"), "transition"),
    "log": log_row,
    "runner_events": lambda value, _number: row_of(
        value, runner_events, ("seq", "log_seq", "ts", "type", "data"), "runner event"
    ),
    "gates": lambda value, _number: row_of(value, gates, ("id", "kind", "status", "created_at"), "gate"),
}


def _json_lines(chunks: Iterator[bytes], limits: ArchiveLimits, name: str) -> Iterator[Any]:
    """The JSON values of a JSON Lines member read in chunks (blank lines skipped); a line longer
    than ``limits.max_record_bytes`` is ``archive_too_large``."""
    parts: list[bytes] = []
    pending = 0
    for chunk in chunks:
        lines = chunk.split(b"\n")
        for line in lines[:-1]:
            if pending + len(line) > limits.max_record_bytes:
                raise _record_too_large(name, limits)
            whole = b"".join((*parts, line)) if parts else line
            parts, pending = [], 0
            if whole.strip():
                yield parse_json(whole, name)
        last = lines[-1]
        if last:
            pending += len(last)
            if pending > limits.max_record_bytes:
                raise _record_too_large(name, limits)
            parts.append(last)
    if parts:
        whole = b"".join(parts)
        if whole.strip():
            yield parse_json(whole, name)


def _json_document(chunks: Iterator[bytes], limits: ArchiveLimits, name: str) -> Any:
    """A member that is one JSON document, at most ``limits.max_record_bytes`` long."""
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limits.max_record_bytes:
            raise _record_too_large(name, limits)
        parts.append(chunk)
    return parse_json(b"".join(parts), name)


def _record_too_large(name: str, limits: ArchiveLimits) -> WorkspaceError:
    return WorkspaceError(
        "archive_too_large", f"{name} holds a record longer than {limits.max_record_bytes} bytes (max_record_bytes)"
    )


def _conversation_state(state: Any) -> Row | None:
    if state is None:
        return None
    if not isinstance(state, dict) or not isinstance(state.get("state"), dict):
        raise unsafe("the export's conversation state is not an object")
    return {
        "upto_seq": as_integer(state.get("upto_seq"), "conversation upto_seq"),
        "state": state["state"],
        "updated_at": str(state.get("updated_at") or utc_timestamp()),
    }


def _stage(values: Iterator[Any], check: Callable[[Any, int], Row], staged: Path) -> int:
    """Each value checked (numbered from 1) and written to ``staged`` in pages; how many.

    A page is one :mod:`marshal` record: this process wrote it from checked JSON values, and
    reads it back several times faster than it would parse JSON again."""
    count = 0
    with staged.open("xb") as out:
        page: Page = []
        for count, value in enumerate(values, 1):
            page.append(check(value, count))
            if len(page) >= PAGE:
                marshal.dump(page, out)
                page = []
        if page:
            marshal.dump(page, out)
    return count


def _staged_pages(unpacked: _Unpacked) -> Iterator[tuple[str, Page]]:
    """Every table's rows for :func:`insert_run_rows`, in pages of at most ``PAGE`` rows."""
    for table in TABLES:
        if table == "snapshots":
            for start in range(0, len(unpacked.snapshots), PAGE):
                yield table, unpacked.snapshots[start : start + PAGE]
        elif table == _STATE:
            if unpacked.conversation_state is not None:
                yield table, [unpacked.conversation_state]
        else:
            with unpacked.staged[table].open("rb") as pages:
                while True:
                    try:
                        page = marshal.load(pages)
                    except EOFError:
                        break
                    yield table, page


def _write_chunks(chunks: Iterator[bytes], target: Path, mode: int) -> None:
    with target.open("xb") as out:  # exclusive: a name twice was refused before
        for chunk in chunks:
            out.write(chunk)
    target.chmod(mode)


def _relocate(unpacked: _Unpacked, target: Path) -> None:
    """The run as it is in this home: its repository, and resumable (a live status becomes
    ``interrupted``; an ended run keeps its end)."""
    run = unpacked.head.run
    resolved = str(target.resolve())
    run.update(repo=resolved, cwd=resolved, executor_id=None, heartbeat_at=None)
    request = run.get("request")
    if isinstance(request, dict) and isinstance(request.get("workspace"), dict):
        run["request"] = {**request, "workspace": {**request["workspace"], "path": resolved}}
    status = run["status"]
    if status not in TERMINAL_STATUSES and status != "interrupted":
        transition = {"from_status": status, "to_status": "interrupted", "reason": "imported", "at": utc_timestamp()}
        with unpacked.staged["transitions"].open("ab") as transitions:
            marshal.dump([transition], transitions)
        run.update(status="interrupted", status_reason="imported")


async def _install(
    store: Store,
    settings: Settings,
    unpacked: _Unpacked,
    target: Path,
    latest: Row | None,
    staging: Path,
    base_repo: GitObjects | None,
    *,
    force: bool,
    limits: ArchiveLimits | None,
) -> ImportResult:
    run = unpacked.head.run
    run_id = str(run["id"])
    run_dir = settings.run_dir(run_id)
    try:
        await store.insert_run_rows(unpacked.head, _staged_pages(unpacked))
    except StorageError as exc:
        raise unsafe(f"the export's rows do not fit this store: {exc}") from exc
    notes: list[str] = []
    try:
        restored = None
        if latest is not None:
            archive = unpacked.archives[str(latest["archive_key"])]
            restored = await asyncio.to_thread(
                restore_unless_held,
                archive,
                target,
                None,
                force,
                limits,
                base_repo=base_repo,
                base_option="--base-repo",
            )
        await asyncio.to_thread(_place_files, settings, unpacked, staging, run_dir, notes)
        if latest is not None:
            with_archives = [snapshot for snapshot in unpacked.snapshots if snapshot.get("archive_key")]
            await asyncio.to_thread(seed_shadow, run_dir, target, with_archives, unpacked.archives)
    except BaseException:
        await store.delete_run_rows(run_id)
        await asyncio.to_thread(shutil.rmtree, run_dir, True)
        raise
    if restored is not None:
        notes.extend(restored.notes)
    return ImportResult(
        run_id=run_id,
        status=str(run["status"]),
        repo=Path(str(run["repo"])),
        snapshot_id=str(latest["id"]) if latest else None,
        restored=restored,
        log_entries=unpacked.log_entries,
        agent_home_files=unpacked.agent_home_files,
        notes=notes,
    )


def _place_files(settings: Settings, unpacked: _Unpacked, staging: Path, run_dir: Path, notes: list[str]) -> None:
    blobs = blob_store_for(None, settings.home)
    for archive in unpacked.archives.values():
        blobs.put_file(archive)
    run_dir.mkdir(parents=True)
    home = staging / _AGENT_HOME
    if home.is_dir():
        home.rename(run_dir / _AGENT_HOME)
        moved = move_claude_project(run_dir / _AGENT_HOME, str(unpacked.head.run["cwd"]))
        if moved:
            notes.append(moved)
