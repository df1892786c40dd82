"""Fixtures of the workspace tests: settings whose runs take the default workspace (not the
in-place one the older tests use), and a fingerprint of everything of the user's repository
baton must never write (HEAD, index, working tree, refs, stash, config)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from baton.config import Settings

GIT = ["git", "-c", "user.name=baton tests", "-c", "user.email=tests@baton.invalid"]


def git(repo: Path, *args: str, check: bool = True) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=check, capture_output=True, text=True).stdout.strip()


def bare_clone(repo: Path, bare: Path) -> Path:
    """``repo`` as a bare repository at ``bare`` (an upstream to clone by URL)."""
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    return bare


def load_settings(home: Path, **overrides: object) -> Settings:
    """Settings with the default workspace kind (no ``BATON_WORKSPACE``)."""
    return Settings.load({"BATON_HOME": str(home), "PATH": os.environ.get("PATH", "")}, **overrides)


@pytest.fixture
def ws_settings(tmp_path: Path) -> Settings:
    return load_settings(tmp_path / "baton-home")


def fingerprint(repo: Path) -> dict[str, str]:
    """What of ``repo`` a run must leave byte-identical: HEAD, the index file, every file of the
    working tree (ignored ones too), every ref (loose and packed) and the stash, the config.
    The result branches runs add (``refs/heads/baton/*``, docs/workspaces.md "Results") are left
    out of ``refs``: a run may add its branch, never change another ref."""
    dot_git = repo / ".git"
    tree = hashlib.sha256()
    for path in sorted(repo.rglob("*")):
        if dot_git in path.parents or path == dot_git:
            continue
        tree.update(str(path.relative_to(repo)).encode() + b"\0")
        if path.is_symlink():
            tree.update(str(path.readlink()).encode())
        elif path.is_file():
            tree.update(path.read_bytes())
    return {
        "HEAD": (dot_git / "HEAD").read_text(),
        "index": hashlib.sha256((dot_git / "index").read_bytes()).hexdigest() if (dot_git / "index").exists() else "",
        "tree": tree.hexdigest(),
        "refs": "\n".join(
            line
            for line in git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
            if not line.startswith("refs/heads/baton/")
        ),
        "packed": (dot_git / "packed-refs").read_text() if (dot_git / "packed-refs").exists() else "",
        "stash": git(repo, "stash", "list"),
        "config": (dot_git / "config").read_text(),
    }
