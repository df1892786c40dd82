"""ShadowRepo.capture against real git repositories (and plain folders)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.snapshots import ShadowRepo

from .conftest import commit_all, git, hash_every_file, init_repo, shadow

pytestmark = pytest.mark.timeout(60)


def test_snapshots_are_numbered_and_an_unchanged_tree_gives_none(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    assert shadow_repo.capture(log_seq_to=3) is None  # nothing changed since the run started

    (repo / "a.txt").write_text("a2\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "b.txt").unlink()
    first = shadow_repo.capture(log_seq_to=7)
    assert first is not None
    assert first.id == "s1"
    assert first.base_commit == head
    assert (first.changes.added, first.changes.modified, first.changes.deleted) == (
        ("new.txt",),
        ("a.txt",),
        ("b.txt",),
    )
    assert (first.log_seq_from, first.log_seq_to) == (1, 7)
    assert first.tree_hash == shadow_repo.git("rev-parse", f"{first.commit}^{{tree}}").decode().strip()
    assert shadow_repo.capture(log_seq_to=9) is None

    (repo / "c.txt").rename(repo / "moved.txt")
    second = shadow_repo.capture(log_seq_to=12)
    assert second is not None and second.id == "s2"
    assert second.changes.renamed == (("c.txt", "moved.txt"),)
    assert second.changes.added == ("moved.txt",) and second.changes.deleted == ("c.txt",)
    assert (second.log_seq_from, second.log_seq_to) == (8, 12)  # since s1, though the capture at 9 made none
    assert set(second.since_base.deleted) == {"b.txt", "c.txt"}
    assert [record["id"] for record in shadow_repo.snapshots()] == ["s1", "s2"]

    # a new ShadowRepo object (another process) continues the numbering from the shadow
    again = ShadowRepo(shadow_repo.git_dir, repo)
    (repo / "a.txt").write_text("a3\n")
    third = again.capture(log_seq_to=20)
    assert third is not None and third.id == "s3" and third.log_seq_from == 13


def test_targeted_capture_updates_only_the_named_paths(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"one.txt": "1\n", "two.txt": "2\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "one.txt").write_text("1b\n")
    (repo / "two.txt").write_text("2b\n")
    snapshot = shadow_repo.capture([str(repo / "one.txt"), "/etc/passwd", "../outside"])
    assert snapshot is not None
    assert snapshot.changes.modified == ("one.txt",)
    scanned = shadow_repo.capture()
    assert scanned is not None and scanned.changes.modified == ("two.txt",)
    assert shadow_repo.capture(["/somewhere/else"]) is None


def test_modes_symlinks_binary_and_odd_names(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"run.sh": "#!/bin/sh\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("run.sh")
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (repo / "with space.txt").write_text("s\n")
    (repo / "new\nline.txt").write_text("n\n")
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    record = snapshot.to_dict()
    assert record["modes"]["run.sh"] == "100755"
    assert record["modes"]["link"] == "120000"
    assert set(record["added"]) == {"blob.bin", "link", "new\nline.txt", "with space.txt", "caf\\xe9.txt"}
    assert record["modified"] == ["run.sh"]


def test_skipped_files_are_listed_with_a_reason(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {".gitignore": "build/\n*.log\n", "src.py": "x = 1\n"})
    (repo / ".git" / "info" / "exclude").write_text("local-only.txt\n")
    shadow_repo = shadow(tmp_path, repo, max_file_bytes=1000)
    shadow_repo.prepare()
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_bytes(b"\0" * 10)
    (repo / "debug.log").write_text("log\n")
    (repo / "local-only.txt").write_text("mine\n")
    (repo / ".env").write_text("API_KEY=secret-value\n")
    (repo / ".env.example").write_text("API_KEY=\n")
    (repo / "server.pem").write_text("-----BEGIN-----\n")
    (repo / "huge.bin").write_bytes(b"x" * 5000)
    (repo / "src.py").write_text("x = 2\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    reasons = {s.path: s.reason for s in snapshot.skipped}
    assert reasons == {
        "build/": "ignored",
        "debug.log": "ignored",
        "local-only.txt": "ignored",
        ".env": "secret",
        "server.pem": "secret",
        "huge.bin": "too_large",
    }
    assert snapshot.changes.added == (".env.example",)
    assert snapshot.changes.modified == ("src.py",)
    # a targeted capture of a skipped file says so too
    (repo / ".env").write_text("API_KEY=other-secret\n")
    assert shadow_repo.capture([".env"]) is None


def test_a_repository_without_commits_and_a_plain_folder(tmp_path: Path) -> None:
    empty = init_repo(tmp_path / "empty", {"a.txt": "a\n"}, commit=False)
    first = shadow(tmp_path / "one", empty)
    first.prepare()
    (empty / "b.txt").write_text("b\n")
    snapshot = first.capture()
    assert snapshot is not None
    assert snapshot.base_commit is None
    assert snapshot.changes.added == ("b.txt",)
    assert set(snapshot.since_base.added) == {"a.txt", "b.txt"}

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "x.txt").write_text("x\n")
    second = shadow(tmp_path / "two", plain)
    second.prepare()
    (plain / "y.txt").write_text("y\n")
    snapshot = second.capture()
    assert snapshot is not None and snapshot.base_commit is None
    assert set(snapshot.since_base.added) == {"x.txt", "y.txt"}


def test_a_folder_inside_another_repository_is_not_that_repository(tmp_path: Path) -> None:
    outer = init_repo(tmp_path / "outer", {"top.txt": "t\n"})
    inner = outer / "inner"
    inner.mkdir()
    (inner / "f.txt").write_text("f\n")
    shadow_repo = shadow(tmp_path, inner)
    shadow_repo.prepare()
    (inner / "g.txt").write_text("g\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None and snapshot.base_commit is None
    assert set(snapshot.since_base.added) == {"f.txt", "g.txt"}


def test_submodules_are_recorded_not_descended(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    nested = init_repo(repo / "lib", {"inside.txt": "i\n"})
    nested_head = git(nested, "rev-parse", "HEAD").strip()
    init_repo(repo / "scratch", {"x.txt": "x\n"}, commit=False)  # a repository with no commit yet
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a2\n")
    (nested / "inside.txt").write_text("changed inside\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    entries = {e.path: e for e in snapshot.since_base_entries}
    assert entries["lib"].new_mode == "160000" and entries["lib"].new_sha == nested_head
    assert "lib/inside.txt" not in entries
    assert {s.path: s.reason for s in snapshot.skipped} == {"scratch": "nested_repository"}


def test_the_users_git_folder_is_untouched_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n", "sub/b.txt": "b\n"})
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")  # the user's index differs from HEAD
    nested = init_repo(repo / "lib", {"inside.txt": "i\n"})
    before = hash_every_file(repo / ".git")
    nested_before = hash_every_file(nested / ".git")
    # A caller's GIT_* variables must not send baton's git into the user's repository.
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    for round_ in range(3):
        (repo / "a.txt").write_text(f"a{round_}\n")
        (repo / f"new{round_}.txt").write_text("n\n")
        (nested / "inside.txt").write_text(f"inside {round_}\n")
        assert shadow_repo.capture() is not None
        assert shadow_repo.capture(["a.txt"]) is None
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert hash_every_file(repo / ".git") == before
    assert hash_every_file(nested / ".git") == nested_before
    assert "staged.txt" in git(repo, "diff", "--cached", "--name-only")
    assert not str(shadow_repo.git_dir).startswith(str(repo))


def test_a_commit_by_the_agent_moves_the_base(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a2\n")
    new_head = commit_all(repo, "the agent commits")
    (repo / "b.txt").write_text("b\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    assert snapshot.base_commit == new_head
    assert snapshot.since_base.added == ("b.txt",) and snapshot.since_base.modified == ()


def test_a_path_named_through_a_symlink_to_the_workspace_counts(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    alias = tmp_path / "alias"
    alias.symlink_to(repo)
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a2\n")
    snapshot = shadow_repo.capture([str(alias / "a.txt")])
    assert snapshot is not None and snapshot.changes.modified == ("a.txt",)
