"""The shadow repository: a git directory baton owns, with the user's repository as work tree.

``BATON_HOME/runs/<run_id>/shadow.git`` is a bare-style git directory (never inside the user's
``.git``, never a ``git worktree`` of it). Every command runs as ``git`` with ``GIT_DIR`` = the
shadow, ``GIT_WORK_TREE`` = the user's folder and ``GIT_INDEX_FILE`` = the shadow's own index,
so the user's branch, index, HEAD and ``.git`` are only ever *read*:

- the user's objects are reachable through ``objects/info/alternates`` (read-only by git's
  design), so hashing the tree at HEAD writes nothing new;
- the first capture starts from a copy of the user's index, whose stat cache makes the first
  scan cheap; later captures keep the shadow's own index, so git re-hashes only what changed;
- the user's ``.gitignore`` files apply (they are in the work tree), and so does the user's
  ``.git/info/exclude`` (``core.excludesFile`` points at it);
- submodules are recorded as gitlinks, never descended (``--ignore-submodules=dirty``).

Each snapshot is a commit in the shadow (``refs/snapshots/sN``, parent = the previous one)
whose message holds the snapshot's record as JSON, so the shadow alone can list them.
"""

# ruff: noqa: PTH105, PTH110, PTH112, PTH114, PTH115, PTH118, PTH119
# (paths here are git's str paths (surrogate-escaped bytes), joined as strings on a hot path)
from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from baton.events.entry import utc_timestamp
from baton.snapshots._git import (
    EMPTY_TREE,
    GitFailed,
    clean_environment,
    commit_object,
    feed_git,
    run_git,
    run_git_many,
    write_object,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_SECRET_PATTERNS",
    "Changes",
    "ShadowRepo",
    "Skipped",
    "Snapshot",
    "TreeEntry",
    "display_path",
]

DEFAULT_MAX_FILE_BYTES: Final = 20 * 1024 * 1024
# Matched against the file's name (and its whole path for patterns with a slash).
DEFAULT_SECRET_PATTERNS: Final = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
)
_SECRET_EXCEPTIONS: Final = (".env.example", ".env.sample", ".env.template", ".env.dist")
_MAX_TARGETED: Final = 500  # more paths than this: scan instead (argv length)
_PACK_FROM: Final = 64
_BATCH: Final = 1 << 20  # bytes of small files handed to fast-import in one write
_HEAD_REF: Final = "refs/heads/snapshots"
_DIFF_TREE: Final = ["diff-tree", "-r", "-z", "-M", "--no-commit-id", "--raw"]
# Against the base, renames are a delete and an add (so the result can be advanced step by step).
_DIFF_TREE_PLAIN: Final = ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", "--raw"]
# The same, of the index against a tree (entries added with ``--intent-to-add`` are not in the tree).
_DIFF_INDEX: Final = ["diff-index", "--cached", "-z", "-M", "--raw", "--ita-invisible-in-index"]
_DIFF_INDEX_PLAIN: Final = ["diff-index", "--cached", "-z", "--no-renames", "--raw", "--ita-invisible-in-index"]
_ABSENT_MODE: Final = "000000"
_ABSENT_SHA: Final = "0" * 40
_START_REF: Final = "refs/baton/start"
_SNAPSHOT_REFS: Final = "refs/snapshots/"
_MESSAGE_PREFIX: Final = "baton snapshot "
_SHADOW_CONFIG: Final = (
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.symlinks", "true"),
    ("core.filemode", "true"),
    ("core.untrackedCache", "true"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("index.version", "4"),
    ("core.splitIndex", "true"),  # a capture rewrites the few changed entries, not all
    ("gc.auto", "0"),
    ("commit.gpgSign", "false"),
)
# Bytes in, bytes out: no end-of-line conversion, no clean/smudge filters of the user.
_ATTRIBUTES: Final = "* -text -filter -ident\n"


def display_path(path: str) -> str:
    """A path fit for JSON anywhere: bytes that are not UTF-8 appear as ``\\xNN``."""
    if path.isascii():
        return path
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return path


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a diff between two trees (``git diff-tree --raw``)."""

    status: str  # A, M, D, T, R
    path: str
    old_path: str | None
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str


@dataclass(frozen=True)
class Changes:
    """Files added, modified and deleted between two trees; a rename is also a delete and an add."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, entries: Iterable[TreeEntry]) -> Changes:
        added: list[str] = []
        modified: list[str] = []
        deleted: list[str] = []
        renamed: list[tuple[str, str]] = []
        for entry in entries:
            if entry.status == "A":
                added.append(entry.path)
            elif entry.status in ("M", "T"):
                modified.append(entry.path)
            elif entry.status == "D":
                deleted.append(entry.path)
            elif entry.status == "R" and entry.old_path is not None:
                renamed.append((entry.old_path, entry.path))
                added.append(entry.path)
                deleted.append(entry.old_path)
        return cls(tuple(sorted(added)), tuple(sorted(modified)), tuple(sorted(deleted)), tuple(renamed))

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": [display_path(p) for p in self.added],
            "modified": [display_path(p) for p in self.modified],
            "deleted": [display_path(p) for p in self.deleted],
            "renamed": [{"from": display_path(a), "to": display_path(b)} for a, b in self.renamed],
        }


@dataclass(frozen=True)
class Skipped:
    """A file the capture left out, and why: ``ignored``, ``secret``, ``too_large``, ``nested_repository``."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": display_path(self.path), "reason": self.reason}


@dataclass(frozen=True)
class Snapshot:
    """A captured working tree (docs/design.md "Concepts")."""

    id: str
    commit: str
    tree_hash: str
    base_commit: str | None
    base_tree: str
    changes: Changes  # against the previous snapshot (or the tree when the run started)
    since_base: Changes  # against the base commit (or the empty tree)
    since_base_entries: tuple[TreeEntry, ...]
    skipped: tuple[Skipped, ...]
    log_seq_from: int
    log_seq_to: int
    created_at: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def number(self) -> int:
        return int(self.id[1:])

    def to_dict(self, *, since_base: bool = True) -> dict[str, Any]:
        """The snapshot object of docs/design.md "CLI contract", plus the details baton records.

        ``since_base=False`` leaves out ``since_base`` and ``modes``: the changes against the
        base, which grow with the run (the session log records each step's own changes).
        """
        record: dict[str, Any] = {
            "id": self.id,
            "tree_hash": self.tree_hash,
            "base_commit": self.base_commit,
            **self.changes.to_dict(),
        }
        if since_base:
            record["since_base"] = self.since_base.to_dict()
            record["modes"] = {display_path(e.path): e.new_mode for e in self.since_base_entries if e.status != "D"}
        record |= {
            "skipped": [s.to_dict() for s in self.skipped],
            "log_seq_from": self.log_seq_from,
            "log_seq_to": self.log_seq_to,
            "created_at": self.created_at,
            "shadow_commit": self.commit,
        }
        record.update(self.extra)
        return record


@dataclass
class _Status:
    stage: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    staged: bool = False  # ``stage`` is in the index already


@dataclass
class _Last:
    commit: str
    tree: str
    number: int
    log_seq_to: int


class ShadowRepo:
    """Captures the user's working tree into baton's own git directory.

    Blocking (it runs git): call it from a worker thread (``asyncio.to_thread``). One capture
    at a time per object (a lock serializes them).
    """

    def __init__(
        self,
        git_dir: Path,
        work_tree: Path,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        secret_patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS,
    ) -> None:
        self.git_dir = git_dir.absolute()
        self.work_tree = work_tree.resolve()
        self._prefix = str(self.work_tree) + os.sep  # + a relative path: the file (no join on the hot path)
        self.max_file_bytes = max_file_bytes
        self.secret_patterns = tuple(secret_patterns)
        # one expression for the patterns matched against the name, one for those with a slash
        self._secret_matchers = (
            _any_of(p for p in self.secret_patterns if "/" not in p),
            _any_of(p for p in self.secret_patterns if "/" in p),
        )
        self._env = clean_environment(
            {
                "GIT_DIR": str(self.git_dir),
                "GIT_WORK_TREE": str(self.work_tree),
                "GIT_INDEX_FILE": str(self.git_dir / "index"),
            }
        )
        self._lock = threading.Lock()
        self._last: _Last | None = None
        self._listed = False  # the shadow's snapshots were looked for (``_last`` is the newest, if any)
        self._user_git: tuple[Path, Path] | bool | None = False  # (git dir, common dir), None: no repo
        self._base_trees: dict[str, str] = {}
        self._start: tuple[str, str] | None = None  # the commit and tree when the run started
        self._index_tree: str | None = None  # the tree of the index as last written
        # (base tree, snapshot tree, path → entry against the base) of the last snapshot
        self._since_base: tuple[str, str, dict[str, TreeEntry]] | None = None

    # -- git ------------------------------------------------------------------------------

    def git(self, *args: str, input: bytes | None = None, ok_codes: tuple[int, ...] = (0,)) -> bytes:
        """Run git against the shadow (work tree = the user's folder)."""
        return run_git(args, self._env, input=input, ok_codes=ok_codes)

    @property
    def environment(self) -> dict[str, str]:
        """The environment git runs with against this shadow (for :class:`~baton.snapshots.restore.GitObjects`)."""
        return dict(self._env)

    @property
    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def user_git_dirs(self) -> tuple[Path, Path] | None:
        """The user's git directory and common directory when the work tree is a repository's top."""
        if self._user_git is False:
            self._user_git = None
            if (self.work_tree / ".git").exists():
                env = clean_environment(
                    {"GIT_CEILING_DIRECTORIES": str(self.work_tree.parent), "GIT_OPTIONAL_LOCKS": "0"}
                )
                try:
                    out = run_git(
                        ["rev-parse", "--absolute-git-dir", "--git-common-dir", "--show-toplevel"],
                        env,
                        cwd=self.work_tree,
                    )
                except GitFailed:
                    out = b""
                lines = out.decode("utf-8", "surrogateescape").splitlines()
                if len(lines) == 3 and Path(lines[2]).resolve() == self.work_tree:
                    git_dir = Path(lines[0])
                    common = Path(lines[1])
                    common = common if common.is_absolute() else (self.work_tree / common).resolve()
                    self._user_git = (git_dir, common)
        return self._user_git if isinstance(self._user_git, tuple) else None

    def base(self) -> tuple[str | None, str]:
        """The user's HEAD commit (``None`` without one) and its tree, read without touching the repository."""
        dirs = self.user_git_dirs()
        if dirs is None:
            return None, EMPTY_TREE
        read = _read_head(*dirs)
        commit = read if isinstance(read, str) else None
        if read is False:  # a layout this reader does not know (reftable …): ask git
            env = clean_environment({"GIT_DIR": str(dirs[0]), "GIT_OPTIONAL_LOCKS": "0"})
            try:
                out = run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], env, ok_codes=(0, 1))
            except GitFailed:
                return None, EMPTY_TREE
            commit = out.decode().strip() or None
        if not commit:
            return None, EMPTY_TREE
        tree = self._base_trees.get(commit)
        if tree is None:
            try:
                tree = self.git("rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}").decode().strip()
            except GitFailed:
                return None, EMPTY_TREE
            self._base_trees[commit] = tree
        return commit, tree

    # -- set-up -----------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the shadow (once) and record the tree as it is when the run starts."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> None:
        if self._start is not None:
            return
        if self.exists:
            start = self._resolve(_START_REF)
            if start is not None:
                self._start = (start, self._tree_of(start))
                return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        if not self.exists:
            run_git(["init", "--quiet", "--bare", str(self.git_dir)], clean_environment())
            self.git("config", "--file", str(self.git_dir / "config"), "--replace-all", "core.bare", "false")
            with (self.git_dir / "config").open("a") as config:
                config.write(_config_text())
            self.git("symbolic-ref", "HEAD", _HEAD_REF)
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "attributes").write_text(_ATTRIBUTES)
        dirs = self.user_git_dirs()
        if dirs is not None:
            git_dir, common = dirs
            self.git("config", "core.excludesFile", str(git_dir / "info" / "exclude"))
            alternates = self.git_dir / "objects" / "info" / "alternates"
            alternates.parent.mkdir(parents=True, exist_ok=True)
            alternates.write_text(str(common / "objects") + "\n")
            self._seed_index(git_dir)
        status = self._scan()
        self._stage(status.stage)
        tree, _ = self._write_tree()
        self._index_tree = tree
        commit = self._commit(tree, None, "baton start\n")
        self._write_ref(_START_REF, commit)
        self._write_ref(_HEAD_REF, commit)
        self._start = (commit, tree)
        self._last = None
        # a shadow baton just started has no snapshot (its refs are loose files only baton writes)
        self._listed = not (self.git_dir / _SNAPSHOT_REFS).exists()

    def _seed_index(self, user_git_dir: Path) -> None:
        """Start from a copy of the user's index (its stat cache), else from the tree at HEAD."""
        index = self.git_dir / "index"
        source = user_git_dir / "index"
        try:
            shutil.copyfile(source, index)
            self.git("ls-files", "--stage", "--", "no such path")  # does git accept the copy?
            return
        except (OSError, GitFailed):
            index.unlink(missing_ok=True)
        commit, _ = self.base()
        if commit is not None:
            self.git("read-tree", commit)

    # -- capture ----------------------------------------------------------------------------

    def capture(
        self,
        paths: Iterable[str] | None = None,
        *,
        log_seq_to: int = 0,
        annotate: Callable[[Snapshot], dict[str, Any]] | None = None,
    ) -> Snapshot | None:
        """Record the tree; ``paths`` (relative or absolute) limits the scan to them.

        ``annotate(snapshot)`` runs before the snapshot is committed; what it returns joins the
        snapshot's record (the recorder adds the archive's key this way).

        Returns the new snapshot, or ``None`` when the tree is the same as the last snapshot's
        (or, before the first, as when the run started).
        """
        with self._lock:
            self._ensure()
            pathspecs = None if paths is None else self._relative(paths)
            if pathspecs is not None and not pathspecs:
                return None
            status = self._targeted(pathspecs) if pathspecs is not None else None
            if status is None:
                status = self._scan()
            last = self._latest()
            assert self._start is not None
            reference = last.tree if last else self._start[1]
            base: tuple[str | None, str] | None = None
            diffs: tuple[bytes, bytes | None] | None = None
            if status.stage or self._index_tree is None:
                if not status.staged:
                    self._stage(status.stage)
                base = self.base()
                cached = self._since_base
                known = cached is not None and cached[0] == base[1] and cached[1] == reference
                self._index_tree, diffs = self._write_tree(reference, None if known else base[1])
            tree = self._index_tree  # nothing staged: the index, and so its tree, did not change
            if tree == reference:
                return None
            base_commit, base_tree = base if base is not None else self.base()
            number = (last.number if last else 0) + 1
            log_seq_from = (last.log_seq_to if last else 0) + 1
            cached = self._since_base
            if cached is not None and cached[0] == base_tree and cached[1] == reference:
                raw_step = diffs[0] if diffs is not None else self.git(*_DIFF_TREE, reference, tree)
                step = parse_raw_diff(raw_step)
                against_base = _advance(cached[2], step)
            else:  # first snapshot here, or the base moved: diff the whole tree against the base
                if diffs is not None and diffs[1] is not None:
                    raw_step, raw_base = diffs[0], diffs[1]
                else:
                    raw_base, raw_step = run_git_many(
                        [[*_DIFF_TREE_PLAIN, base_tree, tree], [*_DIFF_TREE, reference, tree]], self._env
                    )
                step = parse_raw_diff(raw_step)
                against_base = {entry.path: entry for entry in parse_raw_diff(raw_base)}
            self._since_base = (base_tree, tree, against_base)
            since_base = tuple(against_base[path] for path in sorted(against_base))
            snapshot = Snapshot(
                id=f"s{number}",
                commit="",
                tree_hash=tree,
                base_commit=base_commit,
                base_tree=base_tree,
                changes=Changes.of(step),
                since_base=Changes.of(since_base),
                since_base_entries=since_base,
                skipped=tuple(status.skipped),
                log_seq_from=log_seq_from,
                log_seq_to=max(log_seq_to, log_seq_from),
                created_at=utc_timestamp(),
            )
            if annotate is not None:
                snapshot = dataclasses.replace(snapshot, extra=annotate(snapshot))
            record = snapshot.to_dict()
            del record["shadow_commit"]
            message = f"{_MESSAGE_PREFIX}{snapshot.id}\n\n{json.dumps(record, sort_keys=True)}\n"
            parent = last.commit if last else self._start[0]
            commit = self._commit(tree, parent, message)
            self._write_ref(f"{_SNAPSHOT_REFS}{snapshot.id}", commit)
            self._write_ref(_HEAD_REF, commit)
            self._last = _Last(commit, tree, number, snapshot.log_seq_to)
            return _replace_commit(snapshot, commit)

    def _relative(self, paths: Iterable[str]) -> list[str]:
        relative: set[str] = set()
        root = str(self.work_tree)
        for raw in paths:
            path = os.path.normpath(os.path.join(root, raw))
            if not path.startswith(root + os.sep):  # perhaps through a symlink (/tmp → /private/tmp)
                folder, name = os.path.split(path)
                path = os.path.join(os.path.realpath(folder), name)
            if path == root or not path.startswith(root + os.sep):
                continue  # outside the workspace: not part of the tree
            rel = path[len(root) + 1 :]
            if rel == ".git" or rel.startswith(".git" + os.sep):
                continue
            relative.add(rel)
        return sorted(relative)

    def _scan(self) -> _Status:
        """Every changed, new and ignored path: tracked files by their stat data, the rest by a walk."""
        changed, untracked, ignored = run_git_many(
            [
                ["diff-files", "--name-only", "-z", "--ignore-submodules=dirty"],
                ["ls-files", "--others", "--exclude-standard", "-z"],
                ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"],
            ],
            self._env,
        )
        result = _Status()
        for raw in changed.split(b"\0"):
            if raw:
                self._consider(os.fsdecode(raw), result)
        for raw in untracked.split(b"\0"):
            if raw:
                self._consider(os.fsdecode(raw), result)
        for raw in ignored.split(b"\0"):
            if raw:
                result.skipped.append(Skipped(os.fsdecode(raw), "ignored"))
        return result

    def _targeted(self, paths: list[str]) -> _Status | None:
        """Just the named paths (``None``: one is a folder, so scan instead), staged.

        Files already tracked (the usual edit) are staged by one ``update-index`` without
        ``--add``, which refuses a path the index does not hold; then (a new file) the ignored
        ones are listed first and the rest added.
        """
        if len(paths) > _MAX_TARGETED:
            return None
        known = self._classify(paths, frozenset())
        if known is not None and not known.skipped and self._stage(known.stage, add=False):
            known.staged = True
            return known
        out = self.git("ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--", *paths)
        return self._classify(paths, {os.fsdecode(raw) for raw in out.split(b"\0") if raw})

    def _classify(self, paths: list[str], ignored: Set[str]) -> _Status | None:
        result = _Status()
        root = str(self.work_tree)
        for path in paths:
            full = os.path.join(root, path)
            if path in ignored:
                result.skipped.append(Skipped(path, "ignored"))
            elif os.path.isdir(full) and not os.path.islink(full):
                if not os.path.exists(os.path.join(full, ".git")):
                    return None
                self._consider(path + "/", result)
            else:
                self._consider(path, result)
        return result

    def _consider(self, path: str, result: _Status) -> None:
        if path.endswith("/"):  # a repository inside the work tree: a gitlink once it has a commit
            nested = path.rstrip("/")
            if self._has_commit(nested):
                result.stage.append(nested)
            else:
                result.skipped.append(Skipped(nested, "nested_repository"))
            return
        if self._is_secret(path):
            result.skipped.append(Skipped(path, "secret"))
            return
        full = self._prefix + path
        try:
            info = os.lstat(full)
        except FileNotFoundError:
            result.stage.append(path)  # deleted
            return
        except OSError:
            result.skipped.append(Skipped(path, "unreadable"))
            return
        if info.st_size > self.max_file_bytes and stat.S_ISREG(info.st_mode):
            result.skipped.append(Skipped(path, "too_large"))
            return
        result.stage.append(path)

    def _is_secret(self, path: str) -> bool:
        name = os.path.basename(path)
        if name in _SECRET_EXCEPTIONS:
            return False
        names, paths = self._secret_matchers
        return bool((names is not None and names.match(name)) or (paths is not None and paths.match(path)))

    def _has_commit(self, nested: str) -> bool:
        env = clean_environment({"GIT_DIR": str(self.work_tree / nested / ".git"), "GIT_OPTIONAL_LOCKS": "0"})
        try:
            return bool(run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], env, ok_codes=(0, 1)).strip())
        except GitFailed:
            return False

    def _stage(self, paths: list[str], *, add: bool = True, packed: bool = True) -> bool:
        """Hash ``paths`` into the index (added, changed, deleted, or replaced by a folder).

        Without ``add`` a path the index does not hold is refused: then nothing is staged and
        the answer is ``False``. From ``_PACK_FROM`` paths on (and ``packed``) the blobs go into
        one pack written by ``fast-import`` while ``update-index --info-only`` hashes the files
        into the index at the same time; :meth:`_write_tree` checks that they agree.
        """
        if not paths:
            return True
        spec = b"\0".join(os.fsencode(p) for p in paths) + b"\0"
        flags = ["--add", "--remove", "--replace"] if add else ["--remove", "--replace"]
        try:
            if packed and len(paths) >= _PACK_FROM:
                self._stage_packed(paths, flags, spec)
            else:
                # git's bulk check-in: many new blobs go into one pack instead of a file each
                options = ["-c", "core.bigFileThreshold=1"] if len(paths) >= _PACK_FROM else []
                self.git(*options, "update-index", *flags, "-z", "--stdin", input=spec)
        except GitFailed as exc:
            if add or exc.returncode < 0:
                raise
            return False  # git dies before it writes the index
        return True

    def _stage_packed(self, paths: list[str], flags: list[str], spec: bytes) -> None:
        # update-index's bulk check-in looks every new blob up again (a rescan of the pack
        # folders each), which makes it several times slower than fast-import's one pass.
        failure: list[GitFailed] = []

        def index() -> None:
            try:
                self.git("update-index", *flags, "--info-only", "-z", "--stdin", input=spec)
            except GitFailed as exc:
                failure.append(exc)

        indexer = threading.Thread(target=index, name="baton-update-index")
        indexer.start()
        try:
            importer = ["-c", "fastimport.unpackLimit=0", "-c", "pack.compression=1", "fast-import", "--quiet"]
            feed_git(importer, self._env, self._blobs(paths))
        finally:
            indexer.join()
        if failure:
            raise failure[0]

    def _blobs(self, paths: list[str]) -> Iterator[bytes]:
        """``paths``' contents as fast-import ``blob`` commands (none for a deleted file or a folder)."""
        pending: list[bytes] = []  # small files, handed over together (fewer writes to the pipe)
        size = 0
        for path in paths:
            content = self._blob_content(self._prefix + path)
            if content is None:
                continue
            header = b"blob\ndata %d\n" % len(content)
            if len(content) >= _BATCH:  # a big file goes as it is, never copied into a batch
                if pending:
                    yield b"".join(pending)
                    pending, size = [], 0
                yield header
                yield content
                yield b"\n"
                continue
            pending += (header, content, b"\n")
            size += len(content)
            if size >= _BATCH:
                yield b"".join(pending)
                pending, size = [], 0
        if pending:
            yield b"".join(pending)

    def _blob_content(self, full: str) -> bytes | None:
        """What git stores for the file at ``full``: its bytes, a symlink's target, ``None`` for anything else."""
        try:
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                return os.readlink(os.fsencode(full))
            if stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    return handle.read()
        except OSError:
            return None  # gone or unreadable: update-index says what it makes of it
        return None

    def _write_tree(
        self, reference: str | None = None, base_tree: str | None = None
    ) -> tuple[str, tuple[bytes, bytes | None] | None]:
        """The index's tree, and (given ``reference``) the raw diffs of the index against
        ``reference`` (renames found) and ``base_tree`` (none), which run alongside.

        The diffs read the index ``write-tree`` replaces (it renames a complete file into
        place, with the same entries), so they give what ``diff-tree`` of the trees would.
        A blob missing after a packed stage (the file changed between fast-import's read and
        update-index's, or a capture was killed between them) is hashed again, written this
        time; then there are no diffs.
        """
        commands = [["write-tree"]]
        if reference is not None:
            commands.append([*_DIFF_INDEX, reference])
            if base_tree is not None:
                commands.append([*_DIFF_INDEX_PLAIN, base_tree])
        try:
            out = run_git_many(commands, self._env)
        except GitFailed as exc:
            if "invalid object" not in exc.stderr:
                raise
            self._restage_missing()
            return self.git("write-tree").decode().strip(), None
        tree = out[0].decode().strip()
        if reference is None:
            return tree, None
        return tree, (out[1], out[2] if base_tree is not None else None)

    def _restage_missing(self) -> None:
        """Hash again, writing their blobs, the index entries whose blob is not stored."""
        listing = [line for line in self.git("ls-files", "--stage", "-z").split(b"\0") if line]
        entries = []
        for line in listing:
            info, _, path = line.partition(b"\t")
            mode, oid, _ = info.split(b" ")
            if mode != b"160000":  # a gitlink names a commit of another repository
                entries.append((oid, path))
        if not entries:
            return
        wanted = b"\n".join(oid for oid, _ in entries) + b"\n"
        answers = self.git("cat-file", "--batch-check=%(objectname)", input=wanted).splitlines()
        missing = {line.split(b" ")[0] for line in answers if line.endswith(b" missing")}
        paths = [os.fsdecode(path) for oid, path in entries if oid in missing]
        if not paths:
            return
        spec = b"\0".join(os.fsencode(p) for p in paths) + b"\0"
        # update-index passes over an entry whose stat data match: forget them first
        self.git("update-index", "--force-remove", "-z", "--stdin", input=spec)
        self._stage(paths, packed=False)

    def _write_ref(self, ref: str, commit: str) -> None:
        """Point ``ref`` at ``commit`` (the shadow's refs are loose files only baton writes)."""
        path = self.git_dir / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".lock")
        temporary.write_text(commit + "\n")
        os.replace(temporary, path)

    def _commit(self, tree: str, parent: str | None, message: str) -> str:
        """The commit ``git commit-tree`` would make, written without a git process."""
        object_format = "sha256" if len(tree) == 64 else "sha1"
        return write_object(self.git_dir, "commit", commit_object(tree, parent, message), object_format=object_format)

    def _resolve(self, ref: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", ref, ok_codes=(0, 1)).decode().strip()
        return out or None

    def _tree_of(self, ref: str) -> str:
        return self.git("rev-parse", f"{ref}^{{tree}}").decode().strip()

    def _latest(self) -> _Last | None:
        if self._last is None and not self._listed:
            self._listed = True
            records = self.snapshots()
            if records:
                newest = records[-1]
                self._last = _Last(
                    newest["shadow_commit"], newest["tree_hash"], int(newest["id"][1:]), int(newest["log_seq_to"])
                )
        return self._last

    # -- reading ----------------------------------------------------------------------------

    def snapshots(self) -> list[dict[str, Any]]:
        """Every snapshot's record, in id order (read from the shadow's commits)."""
        if not self.exists:
            return []
        out = self.git(
            "for-each-ref", "--format=%(objectname)%00%(contents:body)%00", _SNAPSHOT_REFS.rstrip("/")
        ).decode("utf-8", "replace")
        records = []
        parts = out.split("\0")
        for commit, body in zip(parts[0::2], parts[1::2], strict=False):
            commit = commit.strip()
            if not commit:
                continue
            record = json.loads(body)
            record["shadow_commit"] = commit
            records.append(record)
        records.sort(key=lambda r: int(r["id"][1:]))
        return records

    def diff(self, old_tree: str, new_tree: str) -> list[TreeEntry]:
        """``git diff-tree -r -M`` between two trees, parsed."""
        out = self.git(*_DIFF_TREE, old_tree, new_tree)
        return parse_raw_diff(out)


def _any_of(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One expression matching what ``fnmatch.fnmatchcase`` matches with any of ``patterns``."""
    parts = [f"(?:{fnmatch.translate(pattern)})" for pattern in patterns]
    return re.compile("|".join(parts)) if parts else None


def _config_text() -> str:
    sections: dict[str, list[str]] = {}
    for key, value in _SHADOW_CONFIG:
        section, name = key.split(".")
        sections.setdefault(section, []).append(f"\t{name} = {value}\n")
    return "".join(f"[{section}]\n" + "".join(lines) for section, lines in sections.items())


_HEX = frozenset("0123456789abcdef")


def _read_head(git_dir: Path, common_dir: Path) -> str | bool | None:
    """The commit the user's HEAD names, read from files (``None``: unborn; ``False``: ask git)."""
    if (common_dir / "reftable").exists():
        return False
    try:
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head if len(head) == 40 and set(head) <= _HEX else False
        ref = head[5:]
        for folder in (git_dir, common_dir):
            loose = folder / ref
            if loose.is_file():
                value = loose.read_text().strip()
                return value if len(value) == 40 and set(value) <= _HEX else False
        packed = common_dir / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and len(sha) == 40:
                    return sha
    except OSError:
        return False
    return None


def _advance(against_base: dict[str, TreeEntry], step: list[TreeEntry]) -> dict[str, TreeEntry]:
    """The changes against the base after ``step`` (a diff from the previous snapshot's tree)."""
    result = dict(against_base)
    moves: list[tuple[str, str, str, str, str]] = []  # path, mode and sha before, after
    for entry in step:
        if entry.status == "R" and entry.old_path is not None:
            moves.append((entry.old_path, entry.old_mode, entry.old_sha, _ABSENT_MODE, _ABSENT_SHA))
            moves.append((entry.path, _ABSENT_MODE, _ABSENT_SHA, entry.new_mode, entry.new_sha))
        else:
            moves.append((entry.path, entry.old_mode, entry.old_sha, entry.new_mode, entry.new_sha))
    for path, before_mode, before_sha, after_mode, after_sha in moves:
        known = result.get(path)
        base_mode, base_sha = (known.old_mode, known.old_sha) if known else (before_mode, before_sha)
        if (after_mode, after_sha) == (base_mode, base_sha):
            result.pop(path, None)
            continue
        if base_mode == _ABSENT_MODE:
            status = "A"
        elif after_mode == _ABSENT_MODE:
            status = "D"
        else:
            status = "M" if base_mode[:2] == after_mode[:2] else "T"
        result[path] = TreeEntry(status, path, None, base_mode, after_mode, base_sha, after_sha)
    return result


def parse_raw_diff(out: bytes) -> list[TreeEntry]:
    entries = []
    fields = os.fsdecode(out).split("\0")  # at once: a NUL never falls inside a UTF-8 sequence
    index = 0
    while index < len(fields):
        head = fields[index]
        index += 1
        if not head.startswith(":"):
            continue
        old_mode, new_mode, old_sha, new_sha, status = head[1:].split(" ")
        letter = status[:1]
        if letter in ("R", "C"):
            old_path, path = fields[index], fields[index + 1]
            index += 2
            if letter == "C":
                entries.append(TreeEntry("A", path, None, old_mode, new_mode, old_sha, new_sha))
                continue
            entries.append(TreeEntry("R", path, old_path, old_mode, new_mode, old_sha, new_sha))
        else:
            path = fields[index]
            index += 1
            entries.append(TreeEntry(letter, path, None, old_mode, new_mode, old_sha, new_sha))
    return entries


def _replace_commit(snapshot: Snapshot, commit: str) -> Snapshot:
    return dataclasses.replace(snapshot, commit=commit)
