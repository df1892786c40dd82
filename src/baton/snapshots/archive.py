"""Snapshot archives: the files changed against the base commit, plus ``MANIFEST.json``.

An archive is a gzip-compressed POSIX (pax) tar whose first member is ``MANIFEST.json``::

    {"format": "baton-snapshot/1", "snapshot_id", "base_commit", "tree_hash",
     "deleted": [path…], "modes": {path: "100644"|"100755"|"120000"},
     "symlinks": {path: target}, "submodules": {path: commit},
     "files": [{"path", "size", "sha256", "mode"}…]}

Paths are exact: names that are not UTF-8 travel as JSON ``\\udcNN`` escapes (Python's
``surrogateescape``) and as pax headers in the tar. Archives are deterministic (sorted
members, zero times and owners), so the same snapshot content gives the same blob.

Reading is paranoid (:func:`verify_archive`): nothing is written anywhere until the whole
archive has been read once and found consistent and bounded. Refused with
``archive_unsafe_entry``: absolute paths, ``..`` components, links pointing outside the root,
hard links, devices, FIFOs, members the manifest does not list (or lists differently),
sizes or hashes that differ from the manifest. Refused with ``archive_too_large``: more than
``max_total_bytes`` uncompressed, more than ``max_entries`` members, or a compression ratio
above ``max_ratio`` once past ``ratio_floor_bytes`` (a decompression bomb). A file that is not
a gzip tar, or one cut short, is ``archive_corrupt``; a manifest of the expected kind in another
version (``baton-snapshot/2``) is ``archive_version_unsupported``.

The same reader checks run exports (:mod:`baton.runs.handoff`): ``expected_format`` names the
manifest's ``format`` (or the formats it may have). :func:`iter_streamed_members` hands each
member out in chunks (bounded memory, whatever a member's size); :func:`iter_members` joins them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from baton.errors import WorkspaceError
from baton.snapshots.shadow import ShadowRepo, Snapshot

__all__ = [
    "ARCHIVE_FORMAT",
    "ArchiveLimits",
    "Manifest",
    "build_archive",
    "iter_members",
    "iter_streamed_members",
    "verify_archive",
]

ARCHIVE_FORMAT: Final = "baton-snapshot/1"
MANIFEST_NAME: Final = "MANIFEST.json"
_MAX_MANIFEST_BYTES: Final = 64 * 1024 * 1024
_CHUNK: Final = 1 << 20
_FILE_MODES: Final = {"100644": 0o644, "100755": 0o755}


@dataclass(frozen=True)
class ArchiveLimits:
    max_total_bytes: int = 8 * 1024**3
    max_entries: int = 1_000_000
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 16 * 1024 * 1024
    # A run export's longest record (a JSON line, or a member that is one JSON document): the
    # import holds one at a time. A log payload is at most an ACP line (64 MiB), stored as a JSON
    # string inside its line (quotes and backslashes escaped): 4x that.
    max_record_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    sha256: str
    mode: str


@dataclass(frozen=True)
class Manifest:
    snapshot_id: str | None
    base_commit: str | None
    tree_hash: str | None
    files: tuple[ManifestFile, ...]
    deleted: tuple[str, ...]
    symlinks: dict[str, str]
    submodules: dict[str, str]
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


# -- writing ---------------------------------------------------------------------------------


def build_archive(shadow: ShadowRepo, snapshot: Snapshot, out: Path) -> dict[str, Any]:
    """Write ``snapshot``'s archive to ``out``; returns its manifest."""
    entries = [e for e in snapshot.since_base_entries if e.status != "D"]
    deleted = sorted(
        {e.path for e in snapshot.since_base_entries if e.status == "D"}
        | {e.old_path for e in snapshot.since_base_entries if e.status == "R" and e.old_path}
    )
    blobs = [e for e in entries if e.new_mode in ("100644", "100755", "120000")]
    contents = _read_blobs(shadow, [e.new_sha for e in blobs])
    files: list[dict[str, Any]] = []
    symlinks: dict[str, str] = {}
    submodules = {e.path: e.new_sha for e in entries if e.new_mode == "160000"}
    modes = {e.path: e.new_mode for e in entries}
    for entry in blobs:
        data = contents[entry.new_sha]
        if entry.new_mode == "120000":
            symlinks[entry.path] = os.fsdecode(data)
        else:
            files.append(
                {
                    "path": entry.path,
                    "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "mode": entry.new_mode,
                }
            )
    manifest = {
        "format": ARCHIVE_FORMAT,
        "snapshot_id": snapshot.id,
        "base_commit": snapshot.base_commit,
        "tree_hash": snapshot.tree_hash,
        "deleted": deleted,
        "modes": modes,
        "symlinks": symlinks,
        "submodules": submodules,
        "files": sorted(files, key=lambda f: str(f["path"])),
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, ensure_ascii=True).encode()
    by_path = {e.path: e for e in blobs}
    with (
        out.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz,
        tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar,
    ):
        _add(tar, MANIFEST_NAME, manifest_bytes, 0o644)
        for path in sorted(by_path):
            entry = by_path[path]
            data = contents[entry.new_sha]
            if entry.new_mode == "120000":
                info = tarfile.TarInfo(path)
                info.type = tarfile.SYMTYPE
                info.linkname = os.fsdecode(data)
                info.mode = 0o777
                tar.addfile(info)
            else:
                _add(tar, path, data, _FILE_MODES[entry.new_mode])
    return manifest


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def _read_blobs(shadow: ShadowRepo, shas: list[str]) -> dict[str, bytes]:
    """Blob contents by id, through one ``git cat-file --batch``."""
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    out = shadow.git("cat-file", "--batch", input=("\n".join(wanted) + "\n").encode())
    contents: dict[str, bytes] = {}
    position = 0
    for sha in wanted:
        newline = out.index(b"\n", position)
        header = out[position:newline].split(b" ")
        size = int(header[2])
        start = newline + 1
        contents[sha] = out[start : start + size]
        position = start + size + 1
    return contents


# -- reading ---------------------------------------------------------------------------------


class _CountingReader(io.RawIOBase):
    """Counts the compressed bytes read, so a ratio can be checked while decompressing."""

    def __init__(self, inner: IO[bytes]) -> None:
        self._inner = inner
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        buffer[: len(data)] = data
        self.count += len(data)
        return len(data)


def _unsafe(message: str) -> WorkspaceError:
    return WorkspaceError("archive_unsafe_entry", message)


def _too_large(message: str) -> WorkspaceError:
    return WorkspaceError("archive_too_large", message)


def _corrupt(message: str) -> WorkspaceError:
    return WorkspaceError("archive_corrupt", message)


def check_relative(path: str, what: str = "entry") -> str:
    """``path`` if it is a clean relative path inside the root, else ``archive_unsafe_entry``."""
    if not isinstance(path, str) or not path:
        raise _unsafe(f"{what} with an empty or invalid path")
    if "\0" in path or path.startswith("/"):
        raise _unsafe(f"{what} {path!r} is absolute or invalid")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise _unsafe(f"{what} {path!r} is not a clean relative path (`..`, `.` or empty component)")
    if parts[0] == ".git":
        raise _unsafe(f"{what} {path!r} writes into .git")
    return path


def _check_link(path: str, target: str) -> None:
    if not target or target.startswith("/") or "\0" in target:
        raise _unsafe(f"symlink {path!r} points to {target!r}, outside the root")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../") or resolved.startswith("/"):
        raise _unsafe(f"symlink {path!r} points to {target!r}, outside the root")


def parse_manifest(data: bytes, expected_format: str | tuple[str, ...] = ARCHIVE_FORMAT) -> Manifest:
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unsafe(f"{MANIFEST_NAME} is not JSON: {exc}") from exc
    found = raw.get("format") if isinstance(raw, dict) else None
    formats = (expected_format,) if isinstance(expected_format, str) else expected_format
    if found not in formats:
        kind = formats[0].partition("/")[0] + "/"
        readable = " or ".join(repr(known) for known in formats)
        if isinstance(found, str) and found.startswith(kind):
            raise WorkspaceError(
                "archive_version_unsupported", f"{MANIFEST_NAME} is {found!r}; this baton reads {readable}"
            )
        raise _unsafe(f"{MANIFEST_NAME} is not a {readable} manifest")
    assert isinstance(raw, dict)
    try:
        files = tuple(
            ManifestFile(check_relative(f["path"]), int(f["size"]), str(f["sha256"]), str(f["mode"]))
            for f in raw.get("files") or ()
        )
        deleted = tuple(check_relative(p, "deleted path") for p in raw.get("deleted") or ())
        symlinks = {check_relative(k, "symlink"): str(v) for k, v in (raw.get("symlinks") or {}).items()}
        submodules = {check_relative(k, "submodule"): str(v) for k, v in (raw.get("submodules") or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _unsafe(f"{MANIFEST_NAME} is malformed: {exc}") from exc
    for f in files:
        if f.size < 0 or f.mode not in _FILE_MODES or len(f.sha256) != 64:
            raise _unsafe(f"{MANIFEST_NAME} lists {f.path!r} with an invalid size, mode or hash")
    for path, target in symlinks.items():
        _check_link(path, target)
    names = [f.path for f in files] + list(symlinks)
    if len(set(names)) != len(names):
        raise _unsafe(f"{MANIFEST_NAME} lists a path twice")
    base = raw.get("base_commit")
    tree = raw.get("tree_hash")
    snapshot_id = raw.get("snapshot_id")
    return Manifest(
        snapshot_id=snapshot_id if isinstance(snapshot_id, str) else None,
        base_commit=base if isinstance(base, str) else None,
        tree_hash=tree if isinstance(tree, str) else None,
        files=files,
        deleted=deleted,
        symlinks=symlinks,
        submodules=submodules,
        raw=raw,
    )


@dataclass
class Member:
    """One verified member as :func:`iter_members` yields it: a file's bytes or a symlink's target."""

    path: str
    mode: str
    data: bytes | None = None
    link_target: str | None = None


@dataclass
class StreamedMember:
    """One member as :func:`iter_streamed_members` yields it: a file's content as ``chunks``
    (each at most 1 MiB), or a symlink's target (``chunks`` empty). The size and sha256 are
    checked when the last chunk has been read: the chunk iterator raises then, and the reader
    drains a member its consumer left unread before it goes on, so a mismatch never passes."""

    path: str
    mode: str
    chunks: Iterator[bytes]
    link_target: str | None = None


def iter_members(
    path: Path, limits: ArchiveLimits | None = None, *, expected_format: str | tuple[str, ...] = ARCHIVE_FORMAT
) -> Iterator[Manifest | Member]:
    """The manifest, then every member, each checked against it; raises on the first problem.

    Nothing is written. Consume it to the end to know the archive is sound: the last checks
    (every listed file present) run after the last member. Each file's bytes are in memory
    (one member at a time); :func:`iter_streamed_members` hands them out in chunks.
    """
    for item in iter_streamed_members(path, limits, expected_format=expected_format):
        if isinstance(item, Manifest):
            yield item
        elif item.link_target is not None:
            yield Member(item.path, item.mode, link_target=item.link_target)
        else:
            yield Member(item.path, item.mode, data=b"".join(item.chunks))


def iter_streamed_members(
    path: Path, limits: ArchiveLimits | None = None, *, expected_format: str | tuple[str, ...] = ARCHIVE_FORMAT
) -> Iterator[Manifest | StreamedMember]:
    """:func:`iter_members` in bounded memory: the same checks, each file's content in chunks."""
    limits = limits or ArchiveLimits()
    with path.open("rb") as handle:
        counter = _CountingReader(handle)
        buffered = io.BufferedReader(counter, _CHUNK)
        try:
            # gzip.GzipFile decompresses in C-sized steps; tarfile's own "r|gz" re-slices its
            # buffer on every small read, which is slow for thousands of small members.
            unzipped = gzip.GzipFile(fileobj=buffered, mode="rb")
            tar = tarfile.open(fileobj=unzipped, mode="r|", encoding="utf-8")  # noqa: SIM115 (closed below)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise _corrupt(f"not a gzip tar archive: {exc}") from exc
        totals = [0]  # the uncompressed bytes of the members so far (the chunk readers add to it)
        entries = 0
        try:
            with tar:
                first = tar.next()
                if first is None or first.name != MANIFEST_NAME or not first.isreg():
                    raise _unsafe(f"the archive does not start with {MANIFEST_NAME}")
                if first.size > _MAX_MANIFEST_BYTES:
                    raise _too_large(f"{MANIFEST_NAME} is {first.size} bytes")
                extracted = tar.extractfile(first)
                manifest = parse_manifest(extracted.read() if extracted else b"", expected_format)
                if manifest.total_bytes > limits.max_total_bytes:
                    raise _too_large(
                        f"the manifest lists {manifest.total_bytes} bytes (limit {limits.max_total_bytes})"
                    )
                yield manifest
                files = {f.path: f for f in manifest.files}
                seen: set[str] = set()
                while (info := tar.next()) is not None:
                    entries += 1
                    if entries > limits.max_entries:
                        raise _too_large(f"more than {limits.max_entries} members")
                    name = check_relative(info.name)
                    if name in seen:
                        raise _unsafe(f"member {name!r} appears twice")
                    seen.add(name)
                    if info.issym():
                        _check_link(name, info.linkname)
                        if manifest.symlinks.get(name) != info.linkname:
                            raise _unsafe(f"symlink {name!r} differs from the manifest")
                        yield StreamedMember(name, "120000", iter(()), link_target=info.linkname)
                        continue
                    if info.islnk():
                        raise _unsafe(f"hard link {name!r} → {info.linkname!r}: baton archives hold none")
                    if not info.isreg():
                        raise _unsafe(f"member {name!r} is not a regular file or symlink (type {info.type!r})")
                    listed = files.get(name)
                    if listed is None:
                        raise _unsafe(f"member {name!r} is not in the manifest")
                    if info.size != listed.size:
                        raise _unsafe(f"{name!r} is {info.size} bytes; the manifest says {listed.size}")
                    if totals[0] + info.size > limits.max_total_bytes:
                        raise _too_large(f"more than {limits.max_total_bytes} bytes uncompressed")
                    chunks = _checked_chunks(tar.extractfile(info), listed, totals, counter, limits)
                    yield StreamedMember(name, listed.mode, chunks)
                    for _unread in chunks:  # what the consumer left: read (and checked) all the same
                        pass
                missing = (set(files) | set(manifest.symlinks)) - seen
                if missing:
                    raise _unsafe(f"the manifest lists files the archive lacks: {sorted(missing)[:10]}")
        except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise _corrupt(f"the archive is corrupt or cut short: {exc}") from exc


def _checked_chunks(
    reader: IO[bytes] | None, listed: ManifestFile, totals: list[int], counter: _CountingReader, limits: ArchiveLimits
) -> Iterator[bytes]:
    """The member's content; raises after the last chunk when its size or sha256 is not the manifest's."""
    digest = hashlib.sha256()
    read = 0
    try:
        while reader is not None:
            chunk = reader.read(_CHUNK)
            if not chunk:
                break
            read += len(chunk)
            totals[0] += len(chunk)
            digest.update(chunk)
            _check_ratio(totals[0], counter.count, limits)
            yield chunk
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise _corrupt(f"the archive is corrupt or cut short: {exc}") from exc
    if read != listed.size or digest.hexdigest() != listed.sha256:
        raise _unsafe(f"{listed.path!r} does not match the manifest's size or sha256")


def _check_ratio(uncompressed: int, compressed_read: int, limits: ArchiveLimits) -> None:
    if uncompressed <= limits.ratio_floor_bytes:
        return
    basis = max(compressed_read, 1)
    if uncompressed / basis > limits.max_ratio:
        raise _too_large(
            f"{uncompressed} bytes from {basis} compressed: a ratio above {limits.max_ratio:g} (decompression bomb?)"
        )


def verify_archive(
    path: Path, limits: ArchiveLimits | None = None, *, expected_format: str | tuple[str, ...] = ARCHIVE_FORMAT
) -> Manifest:
    """Read the whole archive once without writing anything, in bounded memory; its manifest if it is sound."""
    manifest: Manifest | None = None
    for item in iter_streamed_members(path, limits, expected_format=expected_format):
        if isinstance(item, Manifest):
            manifest = item
    assert manifest is not None
    return manifest
