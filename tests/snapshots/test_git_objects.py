"""The objects baton writes without a git process are the ones git itself would write."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.snapshots._git import (
    EMPTY_TREE,
    GitFailed,
    clean_environment,
    commit_object,
    feed_git,
    run_git,
    write_object,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_commit_written_by_baton_is_the_one_commit_tree_makes(tmp_path: Path, object_format: str) -> None:
    git_dir = tmp_path / "shadow.git"
    run_git(["init", "-q", "--bare", f"--object-format={object_format}", str(git_dir)], clean_environment())
    env = clean_environment({"GIT_DIR": str(git_dir)})
    tree = run_git(["write-tree"], {**env, "GIT_INDEX_FILE": str(tmp_path / "index")}).decode().strip()
    assert len(tree) == (40 if object_format == "sha1" else 64)
    message = 'baton snapshot s1\n\n{"path": "caf\\u00e9 – ü"}\n'
    first = run_git(["commit-tree", tree, "-F", "-"], env, input=message.encode()).decode().strip()
    second = run_git(["commit-tree", tree, "-p", first, "-F", "-"], env, input=b"next\n").decode().strip()
    for path in (git_dir / "objects").rglob("*"):  # baton must write them again, not find them
        if path.is_file():
            path.chmod(0o644)
            path.unlink()

    assert write_object(git_dir, "commit", commit_object(tree, None, message), object_format=object_format) == first
    assert write_object(git_dir, "commit", commit_object(tree, first, "next\n"), object_format=object_format) == second
    assert run_git(["cat-file", "-t", second], env) == b"commit\n"
    assert run_git(["rev-parse", f"{second}^"], env).decode().strip() == first
    assert run_git(["cat-file", "commit", first], env).decode().endswith("\n\n" + message)
    written = git_dir / "objects" / second[:2] / second[2:]
    assert written.stat().st_mode & 0o777 == 0o444
    assert not [p for p in written.parent.iterdir() if p.name.startswith("tmp_obj_")]
    # writing it again finds it (the file is read-only) and gives the same id
    assert write_object(git_dir, "commit", commit_object(tree, first, "next\n"), object_format=object_format) == second
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], env=env, capture_output=True, check=False)
    assert fsck.returncode == 0, fsck.stderr


def test_the_empty_tree_has_the_id_git_gives_it(tmp_path: Path) -> None:
    git_dir = tmp_path / "objects.git"
    run_git(["init", "-q", "--bare", str(git_dir)], clean_environment())
    assert write_object(git_dir, "tree", b"") == EMPTY_TREE
    assert (git_dir / "objects" / EMPTY_TREE[:2] / EMPTY_TREE[2:]).is_file()
    env = clean_environment({"GIT_DIR": str(git_dir)})
    assert run_git(["cat-file", "-t", EMPTY_TREE], env) == b"tree\n"


def test_feed_git_streams_chunks_and_reports_a_refusal(tmp_path: Path) -> None:
    git_dir = tmp_path / "objects.git"
    run_git(["init", "-q", "--bare", str(git_dir)], clean_environment())
    env = clean_environment({"GIT_DIR": str(git_dir)})
    feed_git(
        ["-c", "fastimport.unpackLimit=0", "fast-import", "--quiet"], env, iter([b"blob\ndata 3\n", b"abc", b"\n"])
    )
    assert run_git(["cat-file", "-p", "f2ba8f84ab5c1bce84a7b441cb1959cfc7093b7f"], env) == b"abc"

    with pytest.raises(GitFailed, match="fast-import") as refused:
        feed_git(["fast-import", "--quiet"], env, iter([b"not a command\n"] + [b"x" * 65536] * 64))
    assert "Unsupported command" in refused.value.stderr


def test_feed_git_stops_git_when_the_chunks_fail(tmp_path: Path) -> None:
    git_dir = tmp_path / "objects.git"
    run_git(["init", "-q", "--bare", str(git_dir)], clean_environment())
    env = clean_environment({"GIT_DIR": str(git_dir)})

    def chunks() -> Iterator[bytes]:
        yield b"blob\ndata 3\n"
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="disk went away"):
        feed_git(["fast-import", "--quiet"], env, chunks())
    assert not list((git_dir / "objects" / "pack").glob("*.pack"))  # killed before it stored anything
