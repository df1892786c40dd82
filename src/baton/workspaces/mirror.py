"""Clones through a per-repository mirror cache (``BATON_HOME/mirrors/``).

The first clone of a URL makes a mirror (``git clone --mirror``); a later clone brings the
mirror up to date only when it has to (:func:`_mirror_current`), then clones *from the mirror*
sharing its objects (``--shared``: the clone's ``objects/info/alternates`` names the mirror), so
a second clone of a large repository costs a checkout. The clone's ``origin`` is the URL the run
was given, not the mirror (its remote-tracking branches are the mirror's). Mirrors never prune
unreachable objects (``gc.pruneExpire=never``): clones borrow from them.

When the mirror is fetched (``git remote update --prune``):

- a clone wanted at a full commit id (a run continued at its base commit: a takeover, a resume)
  that the mirror holds: never — a commit never changes;
- otherwise (a branch, a tag, the default branch): when the remote's refs (``git ls-remote``,
  one round trip, no pack negotiation) differ from the mirror's. A branch name therefore
  always resolves to the remote's current tip, as after a fetch.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from baton.errors import UsageError, WorkspaceError
from baton.snapshots import GitFailed, run_git
from baton.workspaces._git import git, git_text

__all__ = ["clone_from_mirror", "is_git_url", "mirror_path", "resolve_clone_ref"]

_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:")
_SCHEMES = ("file://", "ssh://", "git://", "http://", "https://", "git+ssh://")


def is_git_url(repo: str) -> bool:
    """A URL git clones (``file://``, ``ssh://``, ``https://``, ``user@host:path``), not a local path."""
    return repo.startswith(_SCHEMES) or bool(_SCP_LIKE.match(repo))


def mirror_path(home: Path, url: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", url.rstrip("/").rsplit("/", 1)[-1])[:40] or "repo"
    return home / "mirrors" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{name}"


def _network_env() -> dict[str, str]:
    """The caller's environment for talking to a remote (their credentials helpers, ssh keys and
    proxies apply), without a ``GIT_*`` variable that points git elsewhere, and never a prompt."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update(
        {"GIT_TERMINAL_PROMPT": "0", "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -oBatchMode=yes")}
    )
    return env


@contextlib.contextmanager
def _locked(mirror: Path) -> Iterator[None]:
    """One clone or fetch of a mirror at a time (across processes)."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{mirror}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


_COMMIT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def _mirror_current(url: str, mirror: Path, want: str | None, env: dict[str, str]) -> bool:
    """Whether a fetch of the mirror would change nothing that a clone at ``want`` needs: ``want``
    is a commit id the mirror holds, or the remote's refs are exactly the mirror's."""
    if want is not None and _COMMIT_ID.match(want):
        try:
            run_git(["-C", str(mirror), "cat-file", "-e", f"{want}^{{commit}}"], env)
            return True
        except GitFailed:
            pass  # not here (yet): compare the refs, fetch if they differ
    remote = run_git(["ls-remote", "--", url], env).decode()
    theirs = {ref: sha for sha, _, ref in (line.partition("\t") for line in remote.splitlines()) if ref}
    ours_text = run_git(["-C", str(mirror), "for-each-ref", "--format=%(objectname)\t%(refname)"], env).decode()
    ours = {ref: sha for sha, _, ref in (line.partition("\t") for line in ours_text.splitlines()) if ref}
    # HEAD is the symbolic default branch (a fetch never changes a mirror's), ^{} a peeled tag.
    theirs = {ref: sha for ref, sha in theirs.items() if ref != "HEAD" and not ref.endswith("^{}")}
    return theirs == ours


def _refresh_mirror(url: str, mirror: Path, want: str | None = None) -> None:
    env = _network_env()
    try:
        if (mirror / "HEAD").is_file():
            if not _mirror_current(url, mirror, want, env):
                run_git(["-C", str(mirror), "remote", "update", "--prune"], env)
            return
        partial = mirror.with_name(mirror.name + ".incoming")
        shutil.rmtree(partial, ignore_errors=True)
        run_git(["clone", "--quiet", "--mirror", "--", url, str(partial)], env)
        run_git(["-C", str(partial), "config", "gc.pruneExpire", "never"], env)
        partial.rename(mirror)
    except GitFailed as exc:
        raise WorkspaceError(
            "clone_failed", f"cannot clone {url}: {exc.stderr.strip()[-800:]}", details={"url": url}
        ) from exc


def clone_from_mirror(home: Path, url: str, dest: Path, want: str | None = None) -> Path:
    """Clone ``url`` into ``dest`` through its mirror (made, or fetched first when it lacks what
    ``want`` — a commit, a tag or branch, None for the default branch — names now); the mirror."""
    if dest.exists():
        raise UsageError("invalid_argument", f"{dest} exists already")
    mirror = mirror_path(home, url)
    with _locked(mirror):
        _refresh_mirror(url, mirror, want)
        dest.parent.mkdir(parents=True, exist_ok=True)
        git(
            ["clone", "--quiet", "--shared", "--no-checkout", str(mirror), str(dest)],
            cwd=dest.parent,
            code="clone_failed",
        )
    git(["remote", "set-url", "origin", url], cwd=dest, code="clone_failed")
    return mirror


def resolve_clone_ref(clone: Path, ref: str | None) -> str:
    """The commit of ``ref`` in a fresh clone: a commit, a tag, or a branch of ``origin``;
    without ``ref`` the remote's default branch."""
    candidates = [ref, f"origin/{ref}"] if ref else ["HEAD", "origin/HEAD"]
    for candidate in candidates:
        found = git_text(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"], cwd=clone)
        if found:
            return found
    name = ref or "HEAD"
    raise WorkspaceError(
        "ref_not_found", f"--ref {name}: no such commit, tag or branch in {clone}", details={"ref": name}
    )
