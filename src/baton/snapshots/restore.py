"""Restore a snapshot archive into a folder, as a saga that undoes itself on failure.

Steps, in order, each through a :class:`Journal` that records how to undo every change:

1. **verify** the archive (whole, nothing written; hostile archives end here);
2. **check** the target: a dirty target is refused with ``workspace_dirty`` (listing the
   files) unless ``force``;
3. **prepare the base**: the base commit's files (from the shadow repository, or from
   ``--base-repo``) that the target lacks or has with other content;
4. **apply deletions** listed by the manifest;
5. **extract** the archive's files and symlinks, with their modes (re-checked while written).

A failure in steps 3–5 rolls back everything done so far (files created are removed, files
replaced or deleted come back from a backup folder beside the target, directories created
are removed) and re-raises. Writes never follow a symlink out of the target
(``path_outside_workspace``). Without a base, only the archive's files are written, and the
result says so.
"""

# ruff: noqa: PTH104, PTH106, PTH108, PTH112, PTH114, PTH115, PTH211
# (lstat-level os calls: a Path method may follow a symlink this module must not)
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from baton.errors import RefusedError, UsageError, WorkspaceError
from baton.snapshots._git import GitFailed, clean_environment, run_git
from baton.snapshots.archive import ArchiveLimits, Manifest, Member, iter_members, verify_archive

__all__ = ["GitObjects", "Journal", "RestoreResult", "restore_archive"]

_MODES: Final = {"100644": 0o644, "100755": 0o755}


class GitObjects:
    """Reads trees and blobs from a git directory (the shadow, or a ``--base-repo``)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)

    @classmethod
    def of_repository(cls, folder: Path) -> GitObjects:
        env = clean_environment({"GIT_OPTIONAL_LOCKS": "0"})
        try:
            git_dir = run_git(["rev-parse", "--absolute-git-dir"], env, cwd=folder).decode().strip()
        except GitFailed as exc:
            raise UsageError("invalid_argument", f"--base-repo {folder} is not a git repository") from exc
        return cls(clean_environment({"GIT_DIR": git_dir, "GIT_OPTIONAL_LOCKS": "0"}))

    def has_commit(self, commit: str) -> bool:
        try:
            run_git(["cat-file", "-e", f"{commit}^{{commit}}"], self._env)
        except GitFailed:
            return False
        return True

    def tree(self, commit: str) -> list[tuple[str, str, str]]:
        """``(mode, sha, path)`` of every entry under ``commit``, recursively."""
        out = run_git(["ls-tree", "-r", "-z", "--full-tree", commit], self._env)
        entries = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, sha = meta.decode().split(" ")
            entries.append((mode, sha, os.fsdecode(path)))
        return entries

    def checkout(self, commit: str, target: Path, *, leave_out: set[str]) -> int:
        """Write ``commit``'s files (but ``leave_out``) into the empty folder ``target``; how many.

        Through a temporary index, so no index of any repository changes.
        """
        with tempfile.TemporaryDirectory(prefix="baton-checkout-") as scratch:
            env = {**self._env, "GIT_INDEX_FILE": str(Path(scratch) / "index"), "GIT_WORK_TREE": str(target)}
            run_git(["read-tree", commit], env)
            if leave_out:
                spec = b"\0".join(os.fsencode(p) for p in sorted(leave_out)) + b"\0"
                run_git(["update-index", "--force-remove", "-z", "--stdin"], env, input=spec)
            parallel = ["-c", "checkout.workers=0", "-c", "checkout.thresholdForParallelism=256"]
            run_git([*parallel, "checkout-index", "--all", "--force"], env)
            listed = run_git(["ls-files", "-z"], env)
        return listed.count(b"\0")

    def blobs(self, shas: list[str]) -> dict[str, bytes]:
        wanted = sorted(set(shas))
        if not wanted:
            return {}
        out = run_git(["cat-file", "--batch"], self._env, input=("\n".join(wanted) + "\n").encode())
        contents: dict[str, bytes] = {}
        position = 0
        for sha in wanted:
            newline = out.index(b"\n", position)
            size = int(out[position:newline].split(b" ")[2])
            contents[sha] = out[newline + 1 : newline + 1 + size]
            position = newline + 2 + size
        return contents


def git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class RestoreResult:
    target: Path
    base: str  # "shadow", "base_repo", "none"
    base_written: int = 0
    files_written: int = 0
    deleted: int = 0
    notes: list[str] = field(default_factory=list)
    manifest: Manifest | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "target": str(self.target),
            "base": self.base,
            "base_written": self.base_written,
            "files_written": self.files_written,
            "deleted": self.deleted,
            "notes": self.notes,
            "snapshot_id": self.manifest.snapshot_id if self.manifest else None,
            "tree_hash": self.manifest.tree_hash if self.manifest else None,
        }


class Journal:
    """Changes to a folder, each with its compensation; ``rollback`` undoes them in reverse."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._undo: list[Callable[[], None]] = []
        self._backups: Path | None = None
        self._real_root = ""
        self._known_dirs: set[Path] = set()  # folders of the root already checked or made

    def open(self) -> None:
        if not self.root.exists():
            self.root.mkdir(parents=True)
            created = self.root
            self._undo.append(lambda: _rmdir_quietly(created))
        self._real_root = os.path.realpath(self.root)

    def _backup_dir(self) -> Path:
        if self._backups is None:
            self._backups = self.root.parent / f".{self.root.name}.baton-restore-{uuid.uuid4().hex[:8]}"
            self._backups.mkdir()
        return self._backups

    def bulk(self, action: Callable[[], object]) -> None:
        """Run ``action`` on a root that is empty now; its compensation empties the root again."""
        if any(self.root.iterdir()):
            raise ValueError("a bulk step needs an empty root")

        def undo() -> None:
            for child in self.root.iterdir():
                _remove(child)

        self._undo.append(undo)
        action()

    def _move_aside(self, path: Path) -> None:
        backup = self._backup_dir() / uuid.uuid4().hex
        was_folder = stat.S_ISDIR(os.lstat(path).st_mode)
        os.rename(path, backup)
        if was_folder:  # the folders checked under it are gone
            prefix = str(path) + os.sep
            self._known_dirs = {d for d in self._known_dirs if d != path and not str(d).startswith(prefix)}

        def undo() -> None:
            _remove(path)
            os.rename(backup, path)

        self._undo.append(undo)

    def _parent(self, rel: str, *, create: bool) -> Path | None:
        """The parent folder of ``rel`` inside the root, created if asked; never through a symlink leading out."""
        current = self.root
        for part in rel.split("/")[:-1]:
            current = current / part
            if current in self._known_dirs:
                continue
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                if not create:
                    return None
                current.mkdir()
                self._undo.append(functools.partial(_rmdir_quietly, current))
                self._known_dirs.add(current)
                continue
            if stat.S_ISLNK(info.st_mode):
                real = os.path.realpath(current)
                if real != self._real_root and not real.startswith(self._real_root + os.sep):
                    raise WorkspaceError("path_outside_workspace", f"{current} is a symlink leading out of {self.root}")
                if not os.path.isdir(real):
                    if not create:
                        return None
                    self._move_aside(current)
                    current.mkdir()
                    self._undo.append(functools.partial(_rmdir_quietly, current))
            elif not stat.S_ISDIR(info.st_mode):
                if not create:
                    return None
                self._move_aside(current)  # a file where the snapshot has a folder
                current.mkdir()
                self._undo.append(functools.partial(_rmdir_quietly, current))
            self._known_dirs.add(current)  # a folder now (or a symlink to one inside the root)
        return current

    def write(self, rel: str, data: bytes, mode: str) -> None:
        parent = self._parent(rel, create=True)
        assert parent is not None
        path = parent / rel.rsplit("/", 1)[-1]
        if os.path.lexists(path):
            self._move_aside(path)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        self._undo.append(lambda: _remove(path))
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), _MODES.get(mode, 0o644))

    def symlink(self, rel: str, target: str) -> None:
        parent = self._parent(rel, create=True)
        assert parent is not None
        path = parent / rel.rsplit("/", 1)[-1]
        if os.path.lexists(path):
            self._move_aside(path)
        os.symlink(os.fsencode(target), path)
        self._undo.append(lambda: _remove(path))

    def directory(self, rel: str) -> None:
        parent = self._parent(rel, create=True)
        assert parent is not None
        path = parent / rel.rsplit("/", 1)[-1]
        if os.path.isdir(path) and not os.path.islink(path):
            return
        if os.path.lexists(path):
            self._move_aside(path)
        path.mkdir()
        self._undo.append(lambda: _rmdir_quietly(path))

    def delete(self, rel: str) -> bool:
        parent = self._parent(rel, create=False)
        if parent is None:
            return False
        path = parent / rel.rsplit("/", 1)[-1]
        if not os.path.lexists(path):
            return False
        self._move_aside(path)
        return True

    def rollback(self) -> None:
        errors = []
        for undo in reversed(self._undo):
            try:
                undo()
            except OSError as exc:
                errors.append(exc)
        self._undo.clear()
        self._drop_backups()
        if errors:
            raise OSError(f"the rollback could not undo {len(errors)} change(s); first: {errors[0]}")

    def commit(self) -> None:
        self._undo.clear()
        self._drop_backups()

    def _drop_backups(self) -> None:
        if self._backups is not None and self._backups.exists():
            shutil.rmtree(self._backups)
        self._backups = None


def _remove(path: Path) -> None:
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def _rmdir_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)


def _current_sha(path: Path) -> str | None:
    """The git blob id of what is at ``path`` now (a symlink's target for a symlink), or None."""
    try:
        if os.path.islink(path):
            return git_blob_sha(os.fsencode(os.readlink(path)))
        if path.is_file():
            return git_blob_sha(path.read_bytes())
    except OSError:
        return None
    return None


def _clean_checkout_of(target: Path, commit: str) -> bool:
    """Is ``target`` a repository at ``commit`` with nothing uncommitted (so the base is in place)?"""
    if not (target / ".git").exists():
        return False
    env = clean_environment({"GIT_OPTIONAL_LOCKS": "0"})
    try:
        head = run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], env, cwd=target).decode().strip()
        if head != commit:
            return False
        return not run_git(["status", "--porcelain", "-z", "--untracked-files=all"], env, cwd=target)
    except GitFailed:
        return False


def _dirty_files(target: Path, planned: Mapping[str, str | None]) -> list[str]:
    """Files of the target a restore would lose: uncommitted changes in a repository, else
    existing files whose content differs from what the restore puts there (``planned``: path →
    ``git:<blob id>``, ``sha256:<hex>``, ``link:<target>``, or None for a deletion)."""
    if not target.exists() or not any(target.iterdir()):
        return []
    if (target / ".git").exists():
        env = clean_environment({"GIT_OPTIONAL_LOCKS": "0"})
        out = run_git(["status", "--porcelain", "-z", "--untracked-files=all"], env, cwd=target)
        return sorted(os.fsdecode(record[3:]) for record in out.split(b"\0") if len(record) > 3)
    dirty = []
    for rel, wanted in planned.items():
        path = target / rel
        if os.path.lexists(path) and (wanted is None or _content_id(path, wanted) != wanted):
            dirty.append(rel)
    return sorted(dirty)


def _content_id(path: Path, like: str) -> str | None:
    """What is at ``path``, identified the way ``like`` is (``git:``, ``sha256:`` or ``link:``)."""
    kind = like.partition(":")[0]
    try:
        if os.path.islink(path):
            return "link:" + os.readlink(path) if kind == "link" else None
        if not path.is_file():
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if kind == "git":
        return "git:" + git_blob_sha(data)
    if kind == "sha256":
        return "sha256:" + hashlib.sha256(data).hexdigest()
    return None


def restore_archive(
    archive: Path,
    target: Path,
    *,
    base: GitObjects | None,
    base_label: str = "shadow",
    force: bool = False,
    limits: ArchiveLimits | None = None,
) -> RestoreResult:
    """Restore ``archive`` into ``target`` (see the module docstring). Blocking."""
    manifest = verify_archive(archive, limits)  # 1. nothing is written before this passes
    target = target.absolute()
    result = RestoreResult(target=target, base="none", manifest=manifest)
    base_entries: list[tuple[str, str, str]] = []
    clean_at_base = False
    if manifest.base_commit and base is not None and base.has_commit(manifest.base_commit):
        occupied = target.exists() and any(target.iterdir())
        clean_at_base = occupied and _clean_checkout_of(target, manifest.base_commit)
        if occupied and not clean_at_base:
            base_entries = base.tree(manifest.base_commit)
        result.base = base_label
    elif manifest.base_commit:
        result.notes.append(
            f"the base commit {manifest.base_commit} is not available: only the archive's "
            f"{len(manifest.files) + len(manifest.symlinks)} files were written (pass --base-repo for the rest)"
        )
    overridden = {f.path for f in manifest.files} | set(manifest.symlinks) | set(manifest.submodules)
    deleted = set(manifest.deleted)
    fresh = not target.exists() or not any(target.iterdir())
    bulk_base = fresh and result.base != "none" and manifest.base_commit is not None
    if bulk_base:
        base_entries = []  # an empty target takes the base in one checkout (below)
    base_entries = [e for e in base_entries if e[2] not in overridden and e[2] not in deleted]
    # 2. the plan, and what of the target it would lose
    planned: dict[str, str | None] = {path: None for path in manifest.deleted}
    planned.update({path: f"git:{sha}" for mode, sha, path in base_entries if mode not in ("160000", "120000")})
    planned.update({f.path: f"sha256:{f.sha256}" for f in manifest.files})
    planned.update({path: f"link:{target}" for path, target in manifest.symlinks.items()})
    dirty = _dirty_files(target, planned) if target.exists() and not clean_at_base else []
    if dirty and not force:
        raise RefusedError(
            "workspace_dirty",
            f"{target} has {len(dirty)} file(s) the restore would overwrite or delete: "
            + ", ".join(dirty[:20])
            + (" …" if len(dirty) > 20 else "")
            + " (pass --force to overwrite them)",
            details={"files": dirty},
        )
    journal = Journal(target)
    try:
        journal.open()
        # 3. the base tree
        if bulk_base and base is not None and manifest.base_commit is not None:
            commit = manifest.base_commit

            def checkout() -> None:
                result.base_written = base.checkout(commit, target, leave_out=overridden | deleted)

            journal.bulk(checkout)
        wanted = [(mode, sha, path) for mode, sha, path in base_entries if _current_sha(target / path) != sha]
        contents = base.blobs([sha for mode, sha, _ in wanted if mode != "160000"]) if base else {}
        for mode, sha, path in wanted:
            if mode == "160000":
                journal.directory(path)
            elif mode == "120000":
                journal.symlink(path, os.fsdecode(contents[sha]))
            else:
                journal.write(path, contents[sha], mode)
            result.base_written += 1
        # 4. deletions
        for path in manifest.deleted:
            result.deleted += journal.delete(path)
        # 5. the archive's files, re-checked as they are read again
        for path in manifest.submodules:
            journal.directory(path)
        for item in iter_members(archive, limits):
            if isinstance(item, Member):
                if item.link_target is not None:
                    journal.symlink(item.path, item.link_target)
                else:
                    journal.write(item.path, item.data or b"", item.mode)
                result.files_written += 1
    except BaseException:
        journal.rollback()
        raise
    journal.commit()
    return result
