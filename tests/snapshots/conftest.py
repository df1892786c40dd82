"""Helpers for the snapshot tests: real git repositories, trees compared file by file."""

# ruff: noqa: PTH118, PTH115
# (os.walk over bytes paths: names that are not UTF-8 must survive)

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

from baton.snapshots import ShadowRepo

GIT = ["git", "-c", "user.name=baton tests", "-c", "user.email=tests@baton.invalid"]


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, env=env).stdout.decode()


def commit_all(repo: Path, message: str = "commit") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def init_repo(path: Path, files: dict[str, str | bytes] | None = None, *, commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in (files or {}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    if commit:
        commit_all(path, "initial")
    return path


def names(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def hash_every_file(root: Path) -> dict[str, tuple[int, str]]:
    """Mode and sha256 (or link target) of every entry under ``root``, ``.git`` included."""
    found: dict[str, tuple[int, str]] = {}
    for folder, dirs, files in os.walk(os.fsencode(root)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.fsdecode(os.path.relpath(path, os.fsencode(root)))
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = (info.st_mode, os.fsdecode(os.readlink(path)))
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    found[rel] = (info.st_mode, hashlib.sha256(handle.read()).hexdigest())
            else:
                found[rel] = (info.st_mode, "dir")
    return found


def work_tree_state(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """Files and symlinks under ``root`` outside ``.git``: kind+mode bits, content hash or target."""
    state: dict[str, tuple[str, str]] = {}
    for rel, (mode, digest) in hash_every_file(root).items():
        if rel == ".git" or rel.startswith(".git/") or (skip and rel.startswith(skip)):
            continue
        if stat.S_ISLNK(mode):
            state[rel] = ("link", digest)
        elif stat.S_ISREG(mode):
            state[rel] = ("exec" if mode & 0o100 else "file", digest)
    return state


def shadow(tmp_path: Path, repo: Path, **options: int) -> ShadowRepo:
    return ShadowRepo(tmp_path / "home" / "runs" / "r1" / "shadow.git", repo, **options)  # type: ignore[arg-type]
