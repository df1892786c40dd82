"""A snapshot committed as a branch and merged, on real git repositories (no agent: the shadow
captures what the test writes, as it does for a run)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.snapshots.conftest import commit_all, git, hash_every_file, init_repo

from baton.errors import NotFoundError, RefusedError, UsageError
from baton.results import Author, Repository, check_branch_name, commit_archive, commit_message, merge_branch
from baton.snapshots import ShadowRepo, Snapshot, build_archive

pytestmark = pytest.mark.timeout(60)

AUTHOR = Author("Baton Bot", "bot@baton.invalid")
ALLOWED = (".git/objects/", ".git/refs/heads/baton", ".git/logs/refs/heads/baton")  # objects, the new ref


def _shadow(tmp_path: Path, repo: Path) -> ShadowRepo:
    """The run's shadow, prepared before the run changes anything (as the recorder does)."""
    shadow = ShadowRepo(tmp_path / "shadow.git", repo)
    shadow.prepare()
    return shadow


def _again(tmp_path: Path, shadow: ShadowRepo) -> tuple[Snapshot, Path]:
    snapshot = shadow.capture()
    assert snapshot is not None
    archive = tmp_path / f"{snapshot.id}.tar.gz"
    build_archive(shadow, snapshot, archive)
    return snapshot, archive


def _changed(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> set[str]:
    return {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}


def test_the_branch_holds_the_snapshot_and_nothing_else_of_the_repository_moves(tmp_path: Path) -> None:
    repo = init_repo(
        tmp_path / "repo",
        {
            "README.md": "# r\n",
            "src/old.txt": "old\n",
            "run.sh": "echo\n",
            "keep.txt": "keep\n",
            ".gitignore": "*.log\n",
        },
    )
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "feature")  # the user's own branch and ref stay as they are
    shadow = _shadow(tmp_path, repo)
    (repo / "src" / "old.txt").unlink()
    (repo / "src" / "new.txt").write_text("new\n")
    (repo / "README.md").write_text("# r\nmore\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("keep.txt")
    (repo / ".env").write_text("TOKEN=secret\n")  # left out of the snapshot: listed, never committed
    (repo / "debug.log").write_text("ignored\n")
    (repo / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name\n")
    snapshot, archive = _again(tmp_path, shadow)
    assert {s.reason for s in snapshot.skipped} >= {"secret"}
    before = hash_every_file(repo)
    skipped = [s.to_dict() for s in snapshot.skipped if s.reason != "ignored"]
    message = commit_message("Tidy the sources\nand the README", "Done: moved old.txt.", skipped, "run_x")

    made = commit_archive(
        Repository.at(repo), archive, base=snapshot.base_commit, name="baton/t1", message=message, author=AUTHOR
    )

    assert made is not None and made.base == base
    assert made.tree == snapshot.tree_hash  # exactly the tree the run left
    assert (made.files_changed, made.insertions, made.deletions) == (6, 4, 1)
    changed = _changed(before, hash_every_file(repo))
    assert ".git/refs/heads/baton/t1" in changed
    assert [path for path in changed if not path.startswith(ALLOWED)] == []
    assert git(repo, "rev-parse", "baton/t1^").strip() == base
    body = git(repo, "log", "-1", "--format=%an <%ae>%n%B", "baton/t1")
    assert body.startswith("Baton Bot <bot@baton.invalid>\nTidy the sources\n")
    assert "Done: moved old.txt." in body and "- .env (secret)" in body
    assert body.rstrip().endswith("Baton-Run: run_x")
    listed = git(repo, "ls-tree", "-r", "--name-only", "baton/t1").split()
    assert ".env" not in listed and "debug.log" not in listed and "src/old.txt" not in listed
    assert git(repo, "show", "baton/t1:src/new.txt") == "new\n"
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"


def test_an_existing_branch_is_refused_and_an_unchanged_tree_makes_none(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    shadow = _shadow(tmp_path, repo)
    (repo / "a.txt").write_text("b\n")
    snapshot, archive = _again(tmp_path, shadow)
    target = Repository.at(repo)
    made = commit_archive(target, archive, base=snapshot.base_commit, name="baton/x", message="m\n", author=AUTHOR)
    assert made is not None
    with pytest.raises(RefusedError) as refused:
        commit_archive(target, archive, base=snapshot.base_commit, name="baton/x", message="m\n", author=AUTHOR)
    assert refused.value.code == "branch_exists"
    assert git(repo, "rev-parse", "baton/x").strip() == made.commit
    (repo / "a.txt").write_text("a\n")  # back to the base: a snapshot whose tree is the base's
    unchanged, unchanged_archive = _again(tmp_path, shadow)
    assert unchanged.tree_hash == git(repo, "rev-parse", "HEAD^{tree}").strip()
    none = commit_archive(
        target, unchanged_archive, base=unchanged.base_commit, name="baton/y", message="m\n", author=AUTHOR
    )
    assert none is None and subprocess.run(["git", "-C", str(repo), "rev-parse", "-q", "--verify", "baton/y"],
                                           capture_output=True).returncode == 1  # fmt: skip
    for bad in ("a..b", "-x", "has space", "end/"):
        with pytest.raises(UsageError):
            check_branch_name(bad)


def _branch_of(tmp_path: Path, repo: Path, files: dict[str, str], name: str = "baton/r") -> str:
    """A branch made as a run's would be: the files written in the work tree, captured, committed,
    and the work tree put back (the run worked elsewhere)."""
    shadow = _shadow(tmp_path, repo)
    for path, text in files.items():
        (repo / path).write_text(text)
    snapshot, archive = _again(tmp_path, shadow)
    made = commit_archive(Repository.at(repo), archive, base=snapshot.base_commit, name=name, message="r\n",
                          author=AUTHOR)  # fmt: skip
    assert made is not None
    for path in files:
        git(repo, "checkout", "-q", "--", path) if path in git(repo, "ls-files") else (repo / path).unlink()
    return made.commit


def test_merge_fast_forward_then_merge_commit(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n"})
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = _branch_of(tmp_path / "one", repo, {"hello.txt": "hello\n"}, "baton/one")
    target = Repository.at(repo)

    merged = merge_branch(target, "baton/one", None, AUTHOR)
    assert (merged.kind, merged.into, merged.commit) == ("fast-forward", "main", first)
    assert (repo / "hello.txt").read_text() == "hello\n" and git(repo, "status", "--porcelain") == ""
    assert merge_branch(target, "baton/one", None, AUTHOR).kind == "up-to-date"

    second = _branch_of(tmp_path / "two", repo, {"a.txt": "a changed\n"}, "baton/two")
    (repo / "b.txt").write_text("b changed by the user\n")
    commit_all(repo, "the user's own commit")
    merged = merge_branch(target, "baton/two", None, AUTHOR)
    assert merged.kind == "merge"
    assert git(repo, "rev-parse", "HEAD^2").strip() == second
    assert (repo / "a.txt").read_text() == "a changed\n" and (repo / "b.txt").read_text() == "b changed by the user\n"


def test_a_conflict_or_a_dirty_file_changes_nothing(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (tmp_path / "one").mkdir()
    _branch_of(tmp_path / "one", repo, {"a.txt": "the run's a\n", "new.txt": "new\n"}, "baton/one")
    target = Repository.at(repo)
    (repo / "a.txt").write_text("the user's a\n")
    commit_all(repo, "conflicting")
    before = hash_every_file(repo)
    with pytest.raises(RefusedError) as conflict:
        merge_branch(target, "baton/one", None, AUTHOR)
    assert conflict.value.code == "merge_conflict" and conflict.value.details["paths"] == ["a.txt"]
    assert all(path.startswith(".git/objects/") for path in _changed(before, hash_every_file(repo)))

    git(repo, "reset", "-q", "--hard", "HEAD^")  # back to the base: a fast-forward again
    (repo / "new.txt").write_text("the user's untracked new.txt\n")
    (repo / "other.txt").write_text("not involved\n")
    before = hash_every_file(repo)
    with pytest.raises(RefusedError) as dirty:
        merge_branch(target, "baton/one", None, AUTHOR)
    assert dirty.value.code == "workspace_dirty" and dirty.value.details["files"] == ["new.txt"]
    assert hash_every_file(repo) == before  # not even the index was refreshed
    with pytest.raises(NotFoundError):
        merge_branch(target, "baton/none", None, AUTHOR)


def test_merge_into_another_branch_moves_only_its_ref(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (tmp_path / "one").mkdir()
    made = _branch_of(tmp_path / "one", repo, {"n.txt": "n\n"}, "baton/one")
    git(repo, "branch", "release")
    (repo / "a.txt").write_text("user\n")
    commit_all(repo, "on main")
    main = git(repo, "rev-parse", "main").strip()
    before = hash_every_file(repo)
    merged = merge_branch(Repository.at(repo), "baton/one", "release", AUTHOR)
    assert (merged.kind, merged.commit) == ("fast-forward", made)
    assert git(repo, "rev-parse", "release").strip() == made and git(repo, "rev-parse", "main").strip() == main
    changed = _changed(before, hash_every_file(repo))
    assert changed and all(p.startswith((".git/refs/heads/release", ".git/logs/refs/heads/release")) for p in changed)
