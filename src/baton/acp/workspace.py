"""``fs/read_text_file`` and ``fs/write_text_file``, confined to the run's workspace.

A path is resolved against the workspace with every symlink followed (``..``, an absolute
path elsewhere, a link pointing out) and refused with ``path_outside_workspace`` unless the
result lies inside the workspace. The refusal is a JSON-RPC error whose ``data`` carries the
code, so it is in the log like every answer. A write is an effect baton performs: it waits for
the commit of the request's log entry first (docs/design.md "The log").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from acp import RequestError

from baton.errors import WorkspaceError

__all__ = ["Workspace", "workspace_error"]

_READ_LIMIT = 16 * 1024 * 1024  # bytes: a bigger file is refused rather than held in memory


def workspace_error(error: WorkspaceError) -> RequestError:
    """The JSON-RPC error the agent gets (and the log records) for a refused request."""
    return RequestError(-32602, error.message, {"code": error.code, "message": error.message, **error.details})


class Workspace:
    """The files of one run's workspace, as the agent may reach them over ACP."""

    def __init__(self, root: Path, wait_logged: Callable[[], Awaitable[None]] | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self._wait_logged = wait_logged

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative paths are taken from the root), or refuse it."""
        if not path or "\0" in path:
            raise WorkspaceError("path_outside_workspace", f"not a path: {path!r}", details={"path": path})
        candidate = Path(path) if Path(path).is_absolute() else self.root / path
        real = Path(os.path.realpath(candidate))
        if real != self.root and self.root not in real.parents:
            raise WorkspaceError(
                "path_outside_workspace",
                f"{path} is outside the workspace {self.root}",
                details={"path": path, "resolved": str(real)},
            )
        return real

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        real = self.resolve(path)
        try:
            if real.stat().st_size > _READ_LIMIT:
                raise RequestError.invalid_params({"message": f"{path} is larger than {_READ_LIMIT} bytes"})
            text = await asyncio.to_thread(real.read_text, "utf-8", "replace")
        except FileNotFoundError as exc:
            raise RequestError.resource_not_found(path) from exc
        except IsADirectoryError as exc:
            raise RequestError.invalid_params({"message": f"{path} is a directory"}) from exc
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return "".join(lines[start:end])

    async def write_text_file(self, path: str, content: str) -> None:
        real = self.resolve(path)
        if self._wait_logged is not None:
            await self._wait_logged()
        real = self.resolve(path)  # again: the tree may have changed while the log committed
        try:
            await asyncio.to_thread(_write, real, content)
        except IsADirectoryError as exc:
            raise RequestError.invalid_params({"message": f"{path} is a directory"}) from exc


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, "utf-8")
