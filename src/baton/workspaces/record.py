"""A run's workspace as ``runs.request["workspace"]`` records it, and as the run object shows it.

``{"kind": "worktree"|"clone"|"in-place", "path", "base_commit", "repo"}`` — ``repo`` the user's
repository (a path) or the URL a clone was made from — and, where they apply, ``ref``,
``include_uncommitted``, ``carried``, ``included``, ``submodules``, ``port_base``, ``mirror``,
``setup``; ``branch``, ``head_commit`` and ``pull_request_url`` once the run's result is a branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["RESULT_FIELDS", "WorkspaceRecord", "workspace_of", "workspace_view"]

RESULT_FIELDS: Final = ("branch", "head_commit", "pull_request_url")


@dataclass(frozen=True)
class WorkspaceRecord:
    kind: str
    path: str
    base_commit: str | None
    repo: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def separate(self) -> bool:
        """A folder of its own (worktree or clone), not the user's."""
        return self.kind != "in-place"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "base_commit": self.base_commit, "repo": self.repo, **self.extra}


def workspace_of(request: Any) -> WorkspaceRecord | None:
    """The workspace ``runs.request`` records, or None (a run recorded before workspaces)."""
    raw = request.get("workspace") if isinstance(request, Mapping) else None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("path"), str):
        return None
    extra = {key: value for key, value in raw.items() if key not in ("kind", "path", "base_commit", "repo")}
    return WorkspaceRecord(
        kind=str(raw.get("kind") or "in-place"),
        path=str(raw["path"]),
        base_commit=raw.get("base_commit") if isinstance(raw.get("base_commit"), str) else None,
        repo=str(raw.get("repo") or raw["path"]),
        extra=extra,
    )


def workspace_view(request: Any, cwd: str | None) -> dict[str, Any]:
    """The run object's ``workspace``: ``{kind, path, base_commit, branch, head_commit,
    pull_request_url}`` (an older run: in place, in its ``cwd``)."""
    found = workspace_of(request)
    if found is None:
        return {"kind": "in-place", "path": cwd, "base_commit": None, **dict.fromkeys(RESULT_FIELDS)}
    view: dict[str, Any] = {"kind": found.kind, "path": found.path, "base_commit": found.base_commit}
    for name in RESULT_FIELDS:
        view[name] = found.extra.get(name)
    return view
