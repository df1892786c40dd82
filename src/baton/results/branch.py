"""A snapshot committed as a branch, with git plumbing only.

The tree is built from the snapshot's archive (every file that differs from the base commit,
its deletions, symlinks and gitlinks: docs/snapshots.md) over the base commit's tree, in a
temporary index (``GIT_INDEX_FILE`` in a scratch folder): ``read-tree BASE``, the archive's
blobs written by one ``fast-import``, ``update-index --index-info``, ``write-tree``. Then
``commit-tree`` on top of the base and ``update-ref refs/heads/NAME COMMIT 0000…``: git creates
the ref only if it does not exist (``branch_exists`` otherwise). The repository gains objects
and that one ref; its HEAD, index, working tree and other refs are never touched.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from baton.errors import RefusedError, UsageError
from baton.results.repository import Repository
from baton.snapshots import GitFailed, clean_environment, feed_git, run_git
from baton.snapshots.archive import Manifest, iter_streamed_members

__all__ = ["Author", "Made", "check_branch_name", "commit_archive"]

_AUTHOR: Final = re.compile(r"^\s*([^<>]*?)\s*<([^<>]*)>\s*$")


@dataclass(frozen=True)
class Author:
    """The commit's author and committer (config ``result.author``: ``Name <email>``)."""

    name: str
    email: str

    @classmethod
    def parse(cls, text: str) -> Author:
        found = _AUTHOR.match(text)
        if found is None or not found.group(1):
            raise UsageError("config_invalid", f"result.author {text!r} is not 'Name <email>'")
        return cls(found.group(1), found.group(2))

    def environment(self, when: float | None = None) -> dict[str, str]:
        stamp = f"@{int(time.time() if when is None else when)} +0000"
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
            "GIT_COMMITTER_DATE": stamp,
        }


@dataclass(frozen=True)
class Made:
    """The branch made: its name, commit, base and how much it changes."""

    branch: str
    commit: str
    base: str | None
    tree: str
    files_changed: int
    insertions: int
    deletions: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "commit": self.commit,
            "base": self.base,
            "files_changed": self.files_changed,
            "insertions": self.insertions,
            "deletions": self.deletions,
        }


def check_branch_name(name: str) -> str:
    """``name`` if git accepts it as a branch name, else ``invalid_argument``."""
    try:
        run_git(["check-ref-format", f"refs/heads/{name}"], clean_environment())
    except GitFailed as exc:
        raise UsageError("invalid_argument", f"{name!r} is not a valid branch name") from exc
    if name.startswith("-"):
        raise UsageError("invalid_argument", f"{name!r} is not a valid branch name")
    return name


def commit_archive(
    repo: Repository, archive: Path, *, base: str | None, name: str, message: str, author: Author
) -> Made | None:
    """Commit the archive's tree on ``base`` as branch ``name``; None when it equals the base's tree.

    ``branch_exists`` when the branch exists (checked first, and again by the ref update itself).
    """
    if repo.branch_commit(name) is not None:
        raise _exists(name)
    with tempfile.TemporaryDirectory(prefix="baton-branch-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        if base is not None:
            repo.git("read-tree", base, extra=index)
        else:
            repo.git("read-tree", "--empty", extra=index)
        entries = _write_blobs(repo, archive, Path(scratch) / "marks")
        if entries:
            repo.git("update-index", "--replace", "-z", "--index-info", input=b"".join(entries), extra=index)
        tree = repo.git("write-tree", extra=index).decode().strip()
    base_tree = repo.git("rev-parse", f"{base}^{{tree}}").decode().strip() if base else _empty_tree(repo)
    if tree == base_tree:
        return None
    files, insertions, deletions = _numstat(repo, base_tree, tree)
    parents = ["-p", base] if base else []
    commit = repo.git("commit-tree", tree, *parents, "-F", "-", input=message.encode(), extra=author.environment())
    commit_id = commit.decode().strip()
    try:
        repo.git("update-ref", "-m", f"baton: {name}", f"refs/heads/{name}", commit_id, repo.zero)
    except GitFailed as exc:  # created meanwhile
        raise _exists(name) from exc
    return Made(name, commit_id, base, tree, files, insertions, deletions)


def _exists(name: str) -> RefusedError:
    return RefusedError(
        "branch_exists",
        f"the branch {name} exists already; name another with --name",
        details={"branch": name},
    )


def _write_blobs(repo: Repository, archive: Path, marks: Path) -> list[bytes]:
    """The archive's blobs written by one ``fast-import``; the ``--index-info`` lines of its changes."""
    manifest: list[Manifest] = []
    pending: list[tuple[str, int, str]] = []  # mode, mark, path
    sizes: dict[str, int] = {}

    def commands() -> Iterator[bytes]:
        number = 0
        for item in iter_streamed_members(archive):
            if isinstance(item, Manifest):
                manifest.append(item)
                sizes.update((listed.path, listed.size) for listed in item.files)
                continue
            number += 1
            pending.append((item.mode, number, item.path))
            if item.link_target is not None:
                data = os.fsencode(item.link_target)
                yield b"blob\nmark :%d\ndata %d\n%s\n" % (number, len(data), data)
                continue
            size = sizes[item.path]
            yield b"blob\nmark :%d\ndata %d\n" % (number, size)
            yield from item.chunks
            yield b"\n"

    feed_git(["fast-import", "--quiet", f"--export-marks={marks}"], repo.environment(), commands())
    shas = _read_marks(marks) if marks.exists() else {}
    zero = repo.zero
    lines = [b"0 %s\t%s\0" % (zero.encode(), os.fsencode(path)) for path in manifest[0].deleted] if manifest else []
    lines += [b"%s %s\t%s\0" % (mode.encode(), shas[mark].encode(), os.fsencode(path)) for mode, mark, path in pending]
    if manifest:
        lines += [
            b"160000 %s\t%s\0" % (commit.encode(), os.fsencode(path))
            for path, commit in sorted(manifest[0].submodules.items())
        ]
    return lines


def _read_marks(path: Path) -> dict[int, str]:
    found: dict[int, str] = {}
    for line in path.read_text().splitlines():
        mark, _, sha = line.partition(" ")
        found[int(mark.lstrip(":"))] = sha.strip()
    return found


def _empty_tree(repo: Repository) -> str:
    return repo.git("hash-object", "-t", "tree", "--stdin", input=b"").decode().strip()


def _numstat(repo: Repository, old: str, new: str) -> tuple[int, int, int]:
    """Files changed, lines inserted, lines deleted between two trees (binary files count as files)."""
    out = repo.git("diff-tree", "-r", "--numstat", "--no-renames", "-z", old, new)
    files = insertions = deletions = 0
    for record in out.split(b"\0"):
        fields = record.split(b"\t")
        if len(fields) < 3:
            continue
        files += 1
        insertions += int(fields[0]) if fields[0].isdigit() else 0
        deletions += int(fields[1]) if fields[1].isdigit() else 0
    return files, insertions, deletions
