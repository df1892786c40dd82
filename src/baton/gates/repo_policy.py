"""The repository's ``.baton/policy.toml`` as committed at HEAD (never the working tree).

An agent can edit the working tree (and ``.baton/**`` is protected anyway), so only what a
human committed counts. No commit yet, or no file at HEAD: no rules. A file that is not valid
UTF-8 TOML of the form below is ``config_invalid``::

    [permissions]
    allow = ["Bash(npm test:*)"]
    deny = ["Bash(rm:*)"]
    ask = ["WebFetch"]
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path

from baton.errors import UsageError

__all__ = ["POLICY_PATH", "read_policy_document", "read_repo_policy", "rule_lists"]

POLICY_PATH = ".baton/policy.toml"
_MAX_BYTES = 1 << 20
_LISTS = ("allow", "deny", "ask")
# Variables that would point git at another repository than ``repo``.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")


def read_repo_policy(repo: Path) -> dict[str, list[str]]:
    """The ``allow``/``deny``/``ask`` lists of ``repo``'s committed policy (empty if none)."""
    document = read_policy_document(repo)
    permissions = document.get("permissions", {})
    if not isinstance(permissions, dict):
        raise _invalid(f"[permissions] in {POLICY_PATH} must be a table")
    return rule_lists(permissions, where=f"[permissions] in {POLICY_PATH}")


def read_policy_document(repo: Path) -> dict[str, object]:
    """``repo``'s committed ``.baton/policy.toml`` as TOML (empty if none): its ``[permissions]``,
    and its ``[mcp.NAME]`` servers (baton.mcp.servers, for a trusted repository only)."""
    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise UsageError("invalid_argument", f"{repo} is not a git repository (cannot read {POLICY_PATH})")
    if _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").returncode != 0:
        return {}
    listing = _git(repo, "ls-tree", "-z", "HEAD", "--", POLICY_PATH)
    if listing.returncode != 0:
        raise _invalid(f"git ls-tree failed: {listing.stderr.decode(errors='replace').strip()}")
    if not listing.stdout:
        return {}
    meta, _, _ = listing.stdout.partition(b"\t")
    mode, kind, oid = meta.decode().split()
    if kind != "blob" or mode not in ("100644", "100755"):
        raise _invalid(f"{POLICY_PATH} at HEAD is not a regular file")
    blob = _git(repo, "cat-file", "blob", oid)
    if blob.returncode != 0:
        raise _invalid(f"cannot read {POLICY_PATH} at HEAD")
    if len(blob.stdout) > _MAX_BYTES:
        raise _invalid(f"{POLICY_PATH} is larger than {_MAX_BYTES} bytes")
    try:
        return tomllib.loads(blob.stdout.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _invalid(f"{POLICY_PATH} at HEAD is not valid TOML: {exc}") from exc


def rule_lists(value: Mapping[str, object], *, where: str) -> dict[str, list[str]]:
    """Check a ``{allow, deny, ask}`` mapping of string lists (``config_invalid`` otherwise)."""
    unknown = sorted(set(value) - set(_LISTS))
    if unknown:
        raise _invalid(f"unknown key(s) {', '.join(unknown)} in {where}; expected allow, deny, ask")
    lists: dict[str, list[str]] = {}
    for name in _LISTS:
        items = value.get(name, [])
        if isinstance(items, str) or not isinstance(items, list | tuple):
            raise _invalid(f"{name} in {where} must be a list of rule strings")
        if not all(isinstance(item, str) for item in items):
            raise _invalid(f"{name} in {where} must contain only strings")
        lists[name] = list(items)
    return lists


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _invalid(f"cannot run git to read {POLICY_PATH}: {exc}") from exc


def _invalid(message: str) -> UsageError:
    return UsageError("config_invalid", message, details={"path": POLICY_PATH})
