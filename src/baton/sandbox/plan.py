"""A run's sandbox: what its agent may write, may read, and cannot see (docs/sandbox.md).

One bubblewrap invocation gives both:

- **containment** (always, where bubblewrap works): ``--unshare-pid --die-with-parent``, a PID
  namespace whose init dies with the thread that spawned it (baton's event loop);
- **the filesystem sandbox** (mode ``bwrap``, the default where containment works): a new root
  holding only the system read-only (``/usr``, ``/etc`` and the top-level links into ``/usr``),
  baton's and the agents' installations read-only (the interpreter, the virtual environment,
  ``src/`` of an editable install, ``agents/node_modules``, the agent's executable), the run's
  workspace and agent home writable, a private ``/tmp``, and the ``--mount-ro``/``--mount-rw``
  paths. Everything else — ``BATON_HOME`` beyond the run's agent home, the user's home, other
  repositories — is not there. Every bind is at its own path, so paths in events stay true.

Mode ``none`` keeps the containment and binds ``/`` as it is. Where containment cannot be made
(:mod:`baton.sandbox.bwrap`), the plan says so and the agent starts as before: behind
``setpriv --pdeathsig KILL`` in a session of its own.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from baton.errors import RefusedError, UsageError
from baton.sandbox.bwrap import Containment, containment
from baton.sandbox.netns import netns_method
from baton.sandbox.network import NetworkPlan
from baton.sandbox.proxy_allow import AllowList

__all__ = [
    "SANDBOX_MODES",
    "Mount",
    "SandboxPlan",
    "check_sandbox",
    "command_paths",
    "installation_paths",
    "path_directories",
    "plan_sandbox",
]

SANDBOX_MODES = ("bwrap", "none")
SandboxMode = Literal["bwrap", "none"]
MountKind = Literal["ro", "rw", "tmpfs", "symlink"]

_SYSTEM = ("/usr", "/etc")
_TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # merged-/usr links (or dirs)
_PRIVATE = ("/tmp", "/var/tmp")


@dataclass(frozen=True)
class Mount:
    """One entry of the new root: a bind (``ro``/``rw``) at its own path, a tmpfs, a symlink."""

    path: Path
    kind: MountKind
    target: str | None = None  # a symlink's target

    def args(self) -> list[str]:
        path = str(self.path)
        if self.kind == "ro":
            return ["--ro-bind", path, path]
        if self.kind == "rw":
            return ["--bind", path, path]
        if self.kind == "tmpfs":
            return ["--tmpfs", path]
        assert self.target is not None
        return ["--symlink", self.target, path]


@dataclass(frozen=True)
class SandboxPlan:
    """Where one run's agent runs; :meth:`wrap` turns its command line into the contained one."""

    mode: SandboxMode
    containment: Containment
    mounts: tuple[Mount, ...] = ()
    requested: tuple[Path, ...] = field(default=(), compare=False)  # --mount-ro/--mount-rw, for the record
    network: NetworkPlan = field(default_factory=lambda: NetworkPlan(False))

    @property
    def contained(self) -> bool:
        return self.containment.available

    @property
    def filesystem(self) -> bool:
        """Whether the filesystem is confined (mode ``bwrap`` with containment)."""
        return self.contained and self.mode == "bwrap"

    def with_read_only(self, paths: Iterable[Path]) -> SandboxPlan:
        """The plan with ``paths`` (an agent's own files) bound read-only too."""
        if not self.filesystem:
            return self
        return replace(self, mounts=tuple(_ordered([*self.mounts, *_binds(paths, "ro")])))

    def bwrap_args(self, cwd: Path) -> list[str]:
        """bubblewrap and its options, up to (not including) ``--`` and the command."""
        assert self.containment.bwrap is not None
        args = [self.containment.bwrap, "--unshare-pid", "--die-with-parent"]
        if self.filesystem:
            args += ["--proc", "/proc", "--dev", "/dev"]
            for mount in self.mounts:
                args += mount.args()
            args += ["--remount-ro", "/"]  # the new root itself: a write beside a bind fails
        else:
            args += ["--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc"]
        if self.network.isolated:  # a namespace of its own: only what baton serves in it (netns.py)
            args.append("--unshare-net")
        return [*args, "--chdir", str(cwd)]

    def wrap(self, argv: Sequence[str], cwd: Path, *, door: Sequence[str] = ()) -> list[str]:
        """``argv`` contained (bubblewrap; ``door``: a :class:`~baton.sandbox.netns.Door`'s
        options), else behind ``setpriv --pdeathsig KILL`` where util-linux has it."""
        if self.contained:
            return [*self.bwrap_args(cwd), *door, "--", *argv]
        setpriv = shutil.which("setpriv")
        return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)

    def describe(self) -> dict[str, Any]:
        """The ``_baton/sandbox`` params: the mode, the containment, every path and rule."""
        body: dict[str, Any] = {
            "mode": self.mode if self.contained else "none",
            "containment": "pid_namespace" if self.contained else "none",
            "bwrap": self.containment.describe(),
            "network": self.network.describe(),
        }
        if self.filesystem:
            body["writable"] = [str(m.path) for m in self.mounts if m.kind == "rw"]
            body["read_only"] = [str(m.path) for m in self.mounts if m.kind == "ro"]
            body["private"] = [str(m.path) for m in self.mounts if m.kind == "tmpfs"]
            body["symlinks"] = {str(m.path): m.target for m in self.mounts if m.kind == "symlink"}
        else:
            body["writable"] = ["/"]
        if not self.contained:
            body["code"] = self.containment.describe()["code"]
            body["message"] = (
                f"agents are not contained: {self.containment.reason}; each agent gets a death signal "
                "and the run's processes are swept by BATON_RUN_ID (best effort)"
            )
        return body


def plan_sandbox(
    mode: str | None,
    *,
    workspace: Path,
    agent_home: Path,
    baton_home: Path,
    read_only: Iterable[Path] = (),
    writable: Iterable[Path] = (),
    agent_paths: Iterable[Path] = (),
    allow_net: Iterable[str] = (),
    probe: Containment | None = None,
) -> SandboxPlan:
    """The sandbox of one run: ``mode`` ``bwrap``, ``none`` or None (``bwrap`` where it works).

    ``agent_paths`` are the agent's own files (its executable, the files its command names),
    bound read-only. Mode ``bwrap`` isolates the network too (``allow_net``: the hosts the
    allow-list proxy lets through). Refused with ``sandbox_unavailable`` when ``bwrap`` is asked for where
    bubblewrap cannot contain; ``invalid_argument`` for an unknown mode or a missing mount.
    """
    found = probe or containment()
    chosen = check_sandbox(mode, read_only, writable, found, allow_net=allow_net)
    extra_ro, extra_rw = [Path(p) for p in read_only], [Path(p) for p in writable]
    if chosen == "none" or not found.available:
        return SandboxPlan(chosen, found, requested=(*extra_ro, *extra_rw))
    workspace, agent_home = workspace.resolve(), agent_home.resolve()
    agent_home.mkdir(parents=True, exist_ok=True)
    mounts: list[Mount] = []
    for top in (*_SYSTEM, *_TOP_LINKS):
        path = Path(top)
        if path.is_symlink():
            mounts.append(Mount(path, "symlink", str(path.readlink())))
        elif path.is_dir():
            mounts.append(Mount(path, "ro"))
    resolv = Path("/etc/resolv.conf")
    if resolv.is_symlink() and resolv.exists():  # e.g. into /run/systemd/resolve: the name servers
        mounts.append(Mount(resolv.resolve(), "ro"))
    mounts += [Mount(Path(path), "tmpfs") for path in _PRIVATE]
    mounts += _binds([*installation_paths(), *agent_paths, *extra_ro, *_git_paths(workspace, "ro")], "ro")
    mounts += _binds([workspace, agent_home, *extra_rw, *_git_paths(workspace, "rw")], "rw")
    home = baton_home.resolve()
    if any(_inside(home, m.path) and home != m.path for m in mounts if m.kind in ("ro", "rw")):
        mounts.append(Mount(home, "tmpfs"))  # BATON_HOME inside a bound path stays invisible
    allow = AllowList.parse(allow_net)
    network = NetworkPlan(True, allow, method=netns_method())
    return SandboxPlan("bwrap", found, tuple(_ordered(mounts)), requested=(*extra_ro, *extra_rw), network=network)


def check_sandbox(
    mode: str | None,
    read_only: Iterable[Path],
    writable: Iterable[Path],
    found: Containment | None = None,
    *,
    allow_net: Iterable[str] = (),
) -> SandboxMode:
    """The mode a run gets (``bwrap`` where it works when none is asked), or the refusal:
    ``invalid_argument`` (an unknown mode, a mount that is not an existing absolute path, a host
    that is not ``HOST[:PORT]``/``*.DOMAIN``), ``sandbox_unavailable`` (``bwrap`` asked for
    where bubblewrap cannot contain)."""
    AllowList.parse(allow_net)
    found = found or containment()
    if mode is not None and mode not in SANDBOX_MODES:
        raise UsageError("invalid_argument", f"--sandbox {mode!r}: use one of {', '.join(SANDBOX_MODES)}")
    for option, paths in (("--mount-ro", read_only), ("--mount-rw", writable)):
        for path in paths:
            if not Path(path).is_absolute() or not Path(path).exists():
                raise UsageError("invalid_argument", f"{option} {path}: not an existing absolute path")
    if mode == "bwrap" and not found.available:
        raise RefusedError("sandbox_unavailable", f"--sandbox bwrap cannot be used here: {found.reason}")
    if mode is None:
        return "bwrap" if found.available else "none"
    return "bwrap" if mode == "bwrap" else "none"


def installation_paths() -> list[Path]:
    """What baton and the agents need read-only: the interpreter and its environment, baton's
    own package (``src/`` of an editable install), the agents' npm prefix and its node_modules."""
    from baton import config
    from baton.config import AGENTS_DIR

    paths = [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
    paths.append(Path(config.__file__).resolve().parents[1])  # src/ holding the baton package
    if AGENTS_DIR.is_dir():
        paths += [AGENTS_DIR, AGENTS_DIR / "node_modules"]
    return paths + path_directories(os.environ.get("PATH", ""))


def path_directories(search_path: str) -> list[Path]:
    """The tools the user put on ``PATH`` (the agents get the same ``PATH``): each directory, or
    for a version manager's ``shims`` (pyenv's ``~/.pyenv/shims``) the manager's root, which
    the shims run from. ``/`` and the home directory itself are never among them."""
    home = Path.home().resolve()
    found: list[Path] = []
    for entry in search_path.split(os.pathsep):
        path = Path(entry)
        if not path.is_absolute() or not os.access(path, os.R_OK | os.X_OK) or not path.is_dir():
            continue  # not there, or not this user's to read
        if path.name == "shims":
            path = path.parent
        if path.resolve() not in (Path("/"), home):
            found.append(path)
    return found


def command_paths(argv: Sequence[str]) -> list[Path]:
    """The files a command line names by absolute path (its program, a script it runs)."""
    return [Path(arg) for arg in argv if arg.startswith("/") and Path(arg).exists()]


def _binds(paths: Iterable[Path], kind: MountKind) -> list[Mount]:
    """Each path bound at its own (resolved) path, and a symlink where the path given is one."""
    mounts: list[Mount] = []
    for path in paths:
        if not path.exists():
            continue
        real = path.resolve()
        mounts.append(Mount(real, kind))
        if Path(path).absolute() != real:
            mounts.append(Mount(Path(path).absolute(), "symlink", str(real)))
    return mounts


def _ordered(mounts: list[Mount]) -> list[Mount]:
    """Parents before children (a later mount shows through an earlier one); a path under a bind
    of the same kind, or a symlink inside a bind or behind another symlink, is dropped."""
    kept: list[Mount] = []
    seen: set[tuple[Path, str]] = set()
    for mount in sorted(mounts, key=lambda m: len(m.path.parts)):
        if (mount.path, mount.kind) in seen:
            continue
        if mount.kind == "symlink" and any(_inside(mount.path, m.path) for m in kept if m.kind != "tmpfs"):
            continue  # a bind already shows it, or it lies behind another link (/bin/sh behind /bin)
        if mount.kind in ("ro", "rw"):
            enclosing = [m for m in kept if m.kind != "symlink" and _inside(mount.path, m.path)]
            if enclosing and max(enclosing, key=lambda m: len(m.path.parts)).kind == mount.kind:
                continue
        seen.add((mount.path, mount.kind))
        kept.append(mount)
    return kept


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _git_paths(workspace: Path, kind: MountKind) -> list[Path]:
    """A worktree's repository (read-only but its ``objects/`` and its own ``worktrees/<id>/``)
    and the object stores a clone borrows from (``objects/info/alternates``, read-only)."""
    dot_git = workspace / ".git"
    paths: list[Path] = []
    git_dir = dot_git
    if dot_git.is_file():
        text = dot_git.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            git_dir = (workspace / text.removeprefix("gitdir:").strip()).resolve()
            common_file = git_dir / "commondir"
            common = (git_dir / common_file.read_text().strip()).resolve() if common_file.is_file() else git_dir
            paths += [common] if kind == "ro" else [common / "objects", git_dir]
    alternates = git_dir / "objects" / "info" / "alternates"
    if kind == "ro" and alternates.is_file():
        for line in alternates.read_text(errors="replace").splitlines():
            if line.strip() and not line.startswith("#"):
                paths.append((git_dir / "objects" / line.strip()).resolve())
    return paths
