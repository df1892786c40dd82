"""How a capture stages files: named tracked files in one step, many files through one pack."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

import baton.snapshots.shadow as shadow_module
from baton.snapshots import ShadowRepo, Snapshot

from .conftest import git, init_repo, shadow

pytestmark = pytest.mark.timeout(60)

MANY = 80  # over the threshold from which blobs go into one pack


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_entries(shadow_repo: ShadowRepo, tree: str) -> dict[str, tuple[str, str]]:
    """Path → (mode, object id) of every entry of ``tree``."""
    entries = {}
    for line in shadow_repo.git("ls-tree", "-r", "-z", tree).split(b"\0"):
        if line:
            info, _, path = line.partition(b"\t")
            mode, _, oid = info.decode().split(" ")
            entries[os.fsdecode(path)] = (mode, oid)
    return entries


def disk_entries(root: Path) -> dict[str, tuple[str, str]]:
    """What the tree of ``root`` (outside ``.git``) must hold."""
    entries = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                entries[rel] = ("120000", blob_id(os.fsencode(path.readlink())))
            else:
                mode = "100755" if path.stat().st_mode & 0o100 else "100644"
                entries[rel] = (mode, blob_id(path.read_bytes()))
    return entries


def assert_consistent(shadow_repo: ShadowRepo, snapshot: Snapshot) -> None:
    """The snapshot's tree is the work tree but what it skipped, and every object it needs is stored."""
    on_disk = disk_entries(shadow_repo.work_tree)
    for skipped in snapshot.skipped:
        on_disk.pop(skipped.path)
    assert tree_entries(shadow_repo, snapshot.tree_hash) == on_disk
    shadow_repo.git("fsck", "--no-dangling", "--connectivity-only", snapshot.commit)


class Spy:
    """Records the git commands the shadow runs (the real ones run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commands: list[str] = []
        real_run, real_many = shadow_module.run_git, shadow_module.run_git_many

        def run_git(args: Sequence[str], env: Mapping[str, str], **options: object) -> bytes:
            self.commands.append(next(a for a in args if not a.startswith("-") and "=" not in a))
            return real_run(args, env, **options)  # type: ignore[arg-type]

        def run_git_many(commands: Sequence[Sequence[str]], env: Mapping[str, str]) -> list[bytes]:
            self.commands.extend(command[0] for command in commands)
            return real_many(commands, env)

        monkeypatch.setattr(shadow_module, "run_git", run_git)
        monkeypatch.setattr(shadow_module, "run_git_many", run_git_many)

    def take(self) -> list[str]:
        commands, self.commands = self.commands, []
        return commands


def test_a_named_tracked_file_takes_one_update_and_a_new_one_is_checked_against_the_ignore_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo", {".gitignore": "*.log\n", "a.txt": "a\n", "b.txt": "b\n"})
    (repo / "kept.log").write_text("tracked though ignored\n")
    git(repo, "add", "-f", "kept.log")
    git(repo, "commit", "-q", "-m", "kept")
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a1\n")
    assert shadow_repo.capture(["a.txt"]) is not None  # the first snapshot also diffs against the base
    spy = Spy(monkeypatch)

    (repo / "a.txt").write_text("a2\n")
    (repo / "kept.log").write_text("still tracked\n")
    (repo / "b.txt").unlink()
    snapshot = shadow_repo.capture(["a.txt", "kept.log", "b.txt", "never-existed.txt"])
    assert snapshot is not None
    assert (snapshot.changes.modified, snapshot.changes.deleted) == (("a.txt", "kept.log"), ("b.txt",))
    assert spy.take() == ["update-index", "write-tree", "diff-index"]  # no listing of ignored files, no commit-tree

    (repo / "a.txt").write_text("a3\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "debug.log").write_text("ignored\n")
    snapshot = shadow_repo.capture(["a.txt", "new.txt", "debug.log"])
    assert snapshot is not None
    assert (snapshot.changes.added, snapshot.changes.modified) == (("new.txt",), ("a.txt",))
    assert [(s.path, s.reason) for s in snapshot.skipped] == [("debug.log", "ignored")]
    # the attempt without --add is refused as a whole; then ignored files are listed and the rest added
    assert spy.take() == ["update-index", "ls-files", "update-index", "write-tree", "diff-index"]
    assert_consistent(shadow_repo, snapshot)

    # a secret among tracked files: listed with its reason, as a full scan would
    (repo / "a.txt").write_text("a4\n")
    (repo / ".env").write_text("TOKEN=1\n")
    snapshot = shadow_repo.capture(["a.txt", ".env"])
    assert snapshot is not None and snapshot.changes.modified == ("a.txt",)
    assert [(s.path, s.reason) for s in snapshot.skipped] == [(".env", "secret")]


def test_many_files_go_into_one_pack_with_their_modes(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"pkg/m{i:03d}.py": f"v = {i}\n" for i in range(MANY)}
    files["tool.sh"] = "#!/bin/sh\n"
    files["old-name.txt"] = "moved content\n" * 20
    repo = init_repo(tmp_path / "repo", files)
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()

    for i in range(MANY):  # half distinct new content, half one shared content
        (repo / f"pkg/m{i:03d}.py").write_text(f"v = {i * 7}\n" if i % 2 else "same = True\n")
    for i in range(MANY // 2):
        (repo / f"new/n{i:03d}.txt").parent.mkdir(exist_ok=True)
        (repo / f"new/n{i:03d}.txt").write_bytes(bytes([i]) * (i + 1))
    (repo / "tool.sh").chmod(0o755)
    (repo / "link").symlink_to("tool.sh")
    (repo / "dangling").symlink_to("no/such/file")
    (repo / "old-name.txt").rename(repo / "new-name.txt")
    (repo / "pkg" / "m000.py").unlink()
    (repo / "big.bin").write_bytes(bytes(range(256)) * 6000)  # over the 1 MiB batch: handed over alone
    loose_before = sum(1 for _ in (shadow_repo.git_dir / "objects").glob("??/*"))

    snapshot = shadow_repo.capture()
    assert snapshot is not None
    assert_consistent(shadow_repo, snapshot)
    assert snapshot.changes.renamed == (("old-name.txt", "new-name.txt"),)
    assert snapshot.changes.deleted == ("old-name.txt", "pkg/m000.py")
    assert set(snapshot.changes.added) == {"big.bin", "dangling", "link", "new-name.txt"} | {
        f"new/n{i:03d}.txt" for i in range(MANY // 2)
    }
    assert "tool.sh" in snapshot.changes.modified and len(snapshot.changes.modified) == MANY
    # the blobs are in a pack: the loose objects written are the trees and the commit
    loose = sum(1 for _ in (shadow_repo.git_dir / "objects").glob("??/*")) - loose_before
    assert loose <= 5

    # many named paths, all tracked: the same one-step update, through the pack
    for i in range(1, MANY):
        (repo / f"pkg/m{i:03d}.py").write_text(f"round two {i}\n")
    named = shadow_repo.capture([f"pkg/m{i:03d}.py" for i in range(1, MANY)])
    assert named is not None and len(named.changes.modified) == MANY - 1
    assert_consistent(shadow_repo, named)


class ChangingUnderfoot(ShadowRepo):
    """A shadow whose fast-import gets every file as it was a moment before update-index hashes it.

    (A busy agent rewriting its files: the pack holds the older content, the index the newer.)
    """

    def _blob_content(self, full: str) -> bytes | None:
        content = super()._blob_content(full)
        return None if content is None else content + b"# as it was a moment earlier\n"


def test_a_file_changed_between_the_pack_and_the_index_is_stored_as_the_index_has_it(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {f"f{i:03d}.txt": f"{i}\n" for i in range(MANY)})
    shadow_repo = ChangingUnderfoot(tmp_path / "shadow.git", repo)
    shadow_repo.prepare()
    for i in range(MANY):
        (repo / f"f{i:03d}.txt").write_text(f"edited {i}\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    assert_consistent(shadow_repo, snapshot)  # the tree has the content update-index hashed, all stored
    assert len(snapshot.changes.modified) == MANY
    # the index agrees with the work tree: nothing is left to capture
    assert ShadowRepo(shadow_repo.git_dir, repo).capture() is None


def test_an_index_left_naming_blobs_never_stored_is_mended_by_the_next_capture(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"one.txt": "1\n", "sub/two.txt": "2\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "one.txt").write_text("one, edited\n")
    (repo / "sub" / "two.txt").write_text("two, edited\n")
    # what a capture killed between update-index --info-only and fast-import's end leaves behind
    shadow_repo.git("update-index", "--info-only", "--", "one.txt")
    unstored = blob_id(b"one, edited\n")
    assert unstored in shadow_repo.git("ls-files", "--stage", "one.txt").decode()
    assert shadow_repo.git("cat-file", "--batch-check", input=unstored.encode()) == f"{unstored} missing\n".encode()

    snapshot = ShadowRepo(shadow_repo.git_dir, repo).capture(["sub/two.txt"])  # another process
    assert snapshot is not None
    assert snapshot.changes.modified == ("one.txt", "sub/two.txt")
    assert_consistent(shadow_repo, snapshot)


def test_an_intent_to_add_entry_in_the_users_index_is_captured_with_its_content(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (repo / "planned.txt").write_text("planned\n")
    git(repo, "add", "--intent-to-add", "planned.txt")
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a2\n")
    snapshot = shadow_repo.capture(["a.txt"])
    assert snapshot is not None
    assert snapshot.changes.modified == ("a.txt",)
    assert (snapshot.since_base.added, snapshot.since_base.modified) == (("planned.txt",), ("a.txt",))
    assert_consistent(shadow_repo, snapshot)
