"""Where a file tool's path lands: resolved against the workspace, symlinks followed.

Protected paths are any path with a ``.baton``, ``.claude`` or ``.git`` component (compared
case-insensitively, for case-insensitive file systems), checked on both the path as written
and the resolved one, so neither a symlink into ``.git`` nor one out of it slips through.
Inside the workspace only the workspace-relative part counts; outside it (another checkout,
``~/.claude``) the whole absolute path does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["PROTECTED_DIRS", "ResolvedPath", "resolve_path"]

PROTECTED_DIRS: tuple[str, ...] = (".baton", ".claude", ".git")
_PROTECTED = frozenset(PROTECTED_DIRS)


@dataclass(frozen=True)
class ResolvedPath:
    """A tool's path: ``absolute`` with symlinks followed, ``lexical`` only normalized.

    ``relative`` is the resolved path relative to the workspace (``"."`` for the root), or
    None when it lies outside; ``lexical_relative`` likewise for the path as written.
    """

    absolute: str
    lexical: str
    relative: str | None
    lexical_relative: str | None

    @property
    def inside(self) -> bool:
        return self.relative is not None

    @property
    def protected(self) -> str | None:
        """The path that makes this protected (workspace-relative when inside), or None."""
        if self.relative is None:
            candidates = [self.absolute, self.lexical]
        else:
            candidates = [self.relative, self.lexical_relative or self.lexical]
        for path in candidates:
            if any(p.casefold() in _PROTECTED for p in PurePosixPath(path).parts):
                return path
        return None


def resolve_path(raw: str, root: Path) -> ResolvedPath:
    """Resolve ``raw`` (absolute, relative to ``root``, or ``~``-prefixed) against ``root``.

    ``root`` must already be resolved (``os.path.realpath``).
    """
    joined = str(root / Path(raw).expanduser())
    lexical = os.path.normpath(joined)
    absolute = os.path.realpath(joined)
    return ResolvedPath(absolute, lexical, _relative(absolute, root), _relative(lexical, root))


def _relative(path: str, root: Path) -> str | None:
    candidate = Path(path)
    if candidate == root:
        return "."
    if candidate.is_relative_to(root):
        return candidate.relative_to(root).as_posix()
    return None
