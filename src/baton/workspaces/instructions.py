"""A repository's instructions for its agent (``CLAUDE.md``, ``AGENTS.md``, ``GEMINI.md``), as
the run's base commit has them (docs/agents.md "Repository instructions").

Only the base commit counts, never the working tree: what the agent (or anyone) edits in the
workspace, or carries into it uncommitted, is not an instruction. Only a repository the
configuration trusts (:func:`baton.workspaces.trust.is_trusted`) has its files given; an
untrusted one's are named in the log as ignored. A file is read at the top of the tree only, as
a regular blob (a symlink or a submodule is ignored), of at most :data:`MAX_BYTES`, in UTF-8.
The log note ``_baton/instructions`` is :meth:`RepoInstructions.describe`: ``{files: [{path,
sha256, bytes}], commit}`` and ``ignored`` (``[{path, reason}]``) when a file was not given.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from baton.config import Settings
from baton.errors import WorkspaceError
from baton.workspaces._git import git, git_text
from baton.workspaces.record import WorkspaceRecord
from baton.workspaces.trust import is_trusted

__all__ = ["MAX_BYTES", "InstructionFile", "RepoInstructions", "read_instructions"]

MAX_BYTES: Final = 256 * 1024  # one file; a larger one is ignored (not cut: half an instruction misleads)
_REGULAR: Final = ("100644", "100755")


@dataclass(frozen=True)
class InstructionFile:
    path: str  # in the repository, e.g. "CLAUDE.md"
    text: str

    @property
    def data(self) -> bytes:
        return self.text.encode()

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": hashlib.sha256(self.data).hexdigest(), "bytes": len(self.data)}


@dataclass(frozen=True)
class RepoInstructions:
    """The instruction files of one run's base commit: those given, those ignored and why."""

    commit: str
    files: tuple[InstructionFile, ...]
    ignored: tuple[tuple[str, str], ...] = ()  # (path, reason)

    def text(self) -> str | None:
        """What the agent is given (None: nothing): each file behind a line naming it."""
        if not self.files:
            return None
        parts = [
            f"Instructions from the repository's {file.path} (commit {self.commit[:12]}):\n\n{file.text.strip()}\n"
            for file in self.files
        ]
        return "\n".join(parts)

    def describe(self) -> dict[str, Any]:
        """The ``_baton/instructions`` note."""
        note: dict[str, Any] = {"files": [file.describe() for file in self.files], "commit": self.commit}
        if self.ignored:
            note["ignored"] = [{"path": path, "reason": reason} for path, reason in self.ignored]
        return note


def read_instructions(
    settings: Settings, record: WorkspaceRecord, names: tuple[str, ...], *, cwd: Path | None = None
) -> RepoInstructions | None:
    """The files ``names`` at the workspace's base commit, read through the git of ``cwd`` (the
    workspace's path by default); None: no base commit, or none of them is committed there.
    Given only for a trusted repository."""
    commit = record.base_commit
    if commit is None or not names:
        return None
    cwd = cwd if cwd is not None else Path(record.path)
    found = [(name, entry) for name in names if (entry := _tree_entry(cwd, commit, name)) is not None]
    if not found:
        return None
    if not is_trusted(settings, record.repo):
        reason = f"{record.repo} is not a trusted repository ([workspace] trusted)"
        return RepoInstructions(commit, (), tuple((name, reason) for name, _ in found))
    files: list[InstructionFile] = []
    ignored: list[tuple[str, str]] = []
    for name, (mode, kind, oid, size) in found:
        if kind != "blob" or mode not in _REGULAR:
            ignored.append((name, "not a regular file"))
        elif size > MAX_BYTES:
            ignored.append((name, f"larger than {MAX_BYTES} bytes"))
        else:
            try:
                files.append(InstructionFile(name, git(["cat-file", "blob", oid], cwd=cwd).decode("utf-8")))
            except UnicodeDecodeError:
                ignored.append((name, "not UTF-8 text"))
            except WorkspaceError as exc:
                ignored.append((name, f"unreadable: {exc.message}"))
    return RepoInstructions(commit, tuple(files), tuple(ignored))


def _tree_entry(cwd: Path, commit: str, name: str) -> tuple[str, str, str, int] | None:
    """(mode, type, object id, size) of ``name`` at the top of ``commit``'s tree, or None."""
    listing = git_text(["ls-tree", "--long", "--full-tree", commit, "--", name], cwd=cwd)
    if not listing:
        return None
    meta, _, path = listing.partition("\t")
    if path != name:
        return None
    mode, kind, oid, size = meta.split()
    return mode, kind, oid, int(size) if size.isdigit() else 0
