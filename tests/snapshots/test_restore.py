"""Archives and restore: round trips, dirty targets, the saga's rollback, hostile archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import random
import tarfile
from pathlib import Path
from typing import Any

import pytest

from baton.errors import BatonError
from baton.snapshots import ArchiveLimits, GitObjects, ShadowRepo, build_archive, restore_archive, verify_archive
from baton.snapshots.archive import ARCHIVE_FORMAT
from baton.snapshots.shadow import parse_raw_diff

from .conftest import commit_all, git, hash_every_file, init_repo, names, shadow, work_tree_state

pytestmark = pytest.mark.timeout(60)


def capture_archive(shadow_repo: ShadowRepo, out: Path) -> dict[str, Any]:
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    return build_archive(shadow_repo, snapshot, out)


def test_round_trip_reproduces_the_tree(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"keep.txt": "k\n", "gone.txt": "g\n", "dir/old.txt": "o\n", "x.sh": "x"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "gone.txt").unlink()
    (repo / "dir" / "old.txt").rename(repo / "dir" / "renamed.txt")
    (repo / "x.sh").chmod(0o755)
    (repo / "bin.dat").write_bytes(os.urandom(3000))
    (repo / "a link").symlink_to("dir/renamed.txt")
    (repo / "new\nline").write_text("nl\n")
    (repo / os.fsdecode(b"\xff.txt")).write_text("not utf-8\n")
    manifest = capture_archive(shadow_repo, tmp_path / "s1.tar.gz")
    assert set(manifest["deleted"]) == {"gone.txt", "dir/old.txt"}
    assert manifest["symlinks"] == {"a link": "dir/renamed.txt"}

    target = tmp_path / "restored"
    result = restore_archive(tmp_path / "s1.tar.gz", target, base=GitObjects(shadow_repo.environment))
    assert result.base == "shadow" and not result.notes
    assert work_tree_state(target) == work_tree_state(repo)


def test_without_its_base_only_the_listed_files_are_written(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"base.txt": "b\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "new.txt").write_text("n\n")
    capture_archive(shadow_repo, tmp_path / "s1.tar.gz")
    result = restore_archive(tmp_path / "s1.tar.gz", tmp_path / "bare", base=None)
    assert set(names(tmp_path / "bare")) == {"new.txt"}
    assert result.base == "none" and "only the archive's 1 files were written" in result.notes[0]
    # --base-repo: a clone of the user's repository supplies the base
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    with_base = restore_archive(
        tmp_path / "s1.tar.gz", tmp_path / "full", base=GitObjects.of_repository(clone), base_label="base_repo"
    )
    assert with_base.base == "base_repo"
    assert work_tree_state(tmp_path / "full") == work_tree_state(repo)


def test_random_edit_sequences_round_trip(tmp_path: Path) -> None:
    """Property: for random trees and edits, capture → archive → restore gives the tree back."""
    rng = random.Random(7)
    names = ["a.txt", "b c.txt", "d/e.txt", "d/f/g.bin", "h\nnl", os.fsdecode(b"i\xfe"), "j.sh", "k/l.txt"]
    repo = init_repo(tmp_path / "repo", {n: f"{n}\n".encode() for n in names[:4]})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    for round_ in range(12):
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(names)
            path = repo / name
            action = rng.choice(["write", "write", "delete", "chmod", "link", "rename"])
            if path.is_symlink() or path.exists():
                if action == "delete":
                    path.unlink()
                    continue
                if action == "chmod" and not path.is_symlink():
                    path.chmod(0o755 if not path.stat().st_mode & 0o100 else 0o644)
                    continue
                if action == "rename":
                    other = repo / rng.choice(names)
                    if not other.exists() and not other.is_symlink() and not str(other).startswith(str(path) + "/"):
                        other.parent.mkdir(parents=True, exist_ok=True)
                        path.rename(other)
                    continue
                path.unlink()
            if not path.parent.is_dir():
                if path.parent.exists() or path.parent.is_symlink():
                    continue
                path.parent.mkdir(parents=True)
            if action == "link":
                path.symlink_to(rng.choice(["a.txt", "../a.txt" if "/" in name else "d", "missing"]))
            else:
                path.write_bytes(os.urandom(rng.randint(0, 2000)) if name.endswith(".bin") else f"{round_}\n".encode())
        snapshot = shadow_repo.capture()
        if snapshot is None:
            continue
        # the changes against the base, advanced step by step, equal a whole diff
        whole = parse_raw_diff(
            shadow_repo.git("diff-tree", "-r", "-z", "--no-renames", "--raw", snapshot.base_tree, snapshot.tree_hash)
        )
        assert set(snapshot.since_base_entries) == set(whole), f"round {round_}"
        archive = tmp_path / f"{snapshot.id}.tar.gz"
        build_archive(shadow_repo, snapshot, archive)
        target = tmp_path / f"out-{snapshot.id}"
        restore_archive(archive, target, base=GitObjects(shadow_repo.environment))
        assert work_tree_state(target) == work_tree_state(repo), f"round {round_}"


def test_a_dirty_target_is_refused_unless_forced(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("changed\n")
    capture_archive(shadow_repo, tmp_path / "s1.tar.gz")
    target = tmp_path / "target"
    target.mkdir()
    (target / "a.txt").write_text("my own work\n")
    (target / "unrelated.txt").write_text("kept\n")
    with pytest.raises(BatonError) as refused:
        restore_archive(tmp_path / "s1.tar.gz", target, base=GitObjects(shadow_repo.environment))
    assert refused.value.code == "workspace_dirty"
    assert refused.value.details["files"] == ["a.txt"]
    assert (target / "a.txt").read_text() == "my own work\n"
    restore_archive(tmp_path / "s1.tar.gz", target, base=GitObjects(shadow_repo.environment), force=True)
    assert (target / "a.txt").read_text() == "changed\n"
    assert (target / "unrelated.txt").read_text() == "kept\n"
    # the same restore again finds nothing it would lose
    again = restore_archive(tmp_path / "s1.tar.gz", target, base=GitObjects(shadow_repo.environment))
    assert (again.base_written, again.files_written) == (0, 1)
    # a git repository with uncommitted changes is dirty as a whole
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    (clone / "scratch.txt").write_text("uncommitted\n")
    with pytest.raises(BatonError) as dirty_repo:
        restore_archive(tmp_path / "s1.tar.gz", clone, base=GitObjects(shadow_repo.environment))
    assert dirty_repo.value.code == "workspace_dirty" and dirty_repo.value.details["files"] == ["scratch.txt"]


def test_a_failing_step_rolls_everything_back(tmp_path: Path) -> None:
    """A real failure midway (a folder of the target is a symlink leading out of it) undoes every step."""
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n", "gone.txt": "g\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a2\n")
    (repo / "gone.txt").unlink()
    (repo / "m.sh").write_text("#!/bin/sh\n")
    (repo / "m.sh").chmod(0o755)
    (repo / "zz").mkdir()
    (repo / "zz" / "late.txt").write_text("written last\n")
    capture_archive(shadow_repo, tmp_path / "s1.tar.gz")

    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "a.txt").write_text("old a\n")
    (target / "gone.txt").write_text("old gone\n")
    (target / "mine.txt").write_text("mine\n")
    (target / "zz").symlink_to(outside)  # the archive's zz/late.txt would land outside
    before = hash_every_file(target)
    with pytest.raises(BatonError) as failed:
        restore_archive(tmp_path / "s1.tar.gz", target, base=GitObjects(shadow_repo.environment), force=True)
    assert failed.value.code == "path_outside_workspace"
    assert hash_every_file(target) == before
    assert names(outside) == []
    assert sorted(names(tmp_path)) == ["home", "outside", "repo", "s1.tar.gz", "target"]  # no backup left


# -- hostile archives ------------------------------------------------------------------------


def _manifest(files: dict[str, bytes], **extra: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "format": ARCHIVE_FORMAT,
        "snapshot_id": "s1",
        "base_commit": None,
        "tree_hash": None,
        "deleted": [],
        "modes": {},
        "symlinks": {},
        "submodules": {},
        "files": [
            {"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest(), "mode": "100644"}
            for p, d in files.items()
        ],
    }
    manifest.update(extra)
    return manifest


def _write(path: Path, manifest: dict[str, Any] | bytes, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb") as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        data = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        info = tarfile.TarInfo("MANIFEST.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, content = member
                info = tarfile.TarInfo(name)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    path.write_bytes(raw.getvalue())
    return path


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _device(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info


def _cut_short(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _bomb(path: Path, size: int) -> Path:
    zeros = b"\0" * size
    return _write(path, _manifest({"zeros.bin": zeros}), [("zeros.bin", zeros)])


HOSTILE: dict[str, tuple[str, Any]] = {
    "dotdot": ("archive_unsafe_entry", lambda p: _write(p, _manifest({"../evil": b"x"}), [("../evil", b"x")])),
    "dotdot_inside": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({"a/../../evil": b"x"}), [("a/../../evil", b"x")]),
    ),
    "absolute": ("archive_unsafe_entry", lambda p: _write(p, _manifest({"/tmp/evil": b"x"}), [("/tmp/evil", b"x")])),
    "unlisted_dotdot": ("archive_unsafe_entry", lambda p: _write(p, _manifest({}), [("../evil", b"x")])),
    "symlink_out": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({}, symlinks={"out": "../../etc"}), [_link("out", "../../etc")]),
    ),
    "symlink_absolute": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({}, symlinks={"out": "/etc"}), [_link("out", "/etc")]),
    ),
    "symlink_unlisted": ("archive_unsafe_entry", lambda p: _write(p, _manifest({}), [_link("out", "/etc")])),
    "hardlink_out": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({}), [_link("h", "/etc/passwd", tarfile.LNKTYPE)]),
    ),
    "char_device": ("archive_unsafe_entry", lambda p: _write(p, _manifest({}), [_device("null", tarfile.CHRTYPE)])),
    "block_device": ("archive_unsafe_entry", lambda p: _write(p, _manifest({}), [_device("sda", tarfile.BLKTYPE)])),
    "fifo": ("archive_unsafe_entry", lambda p: _write(p, _manifest({}), [_device("pipe", tarfile.FIFOTYPE)])),
    "lying_size": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({"a.txt": b"short"}), [("a.txt", b"much longer than the manifest says")]),
    ),
    "lying_hash": ("archive_unsafe_entry", lambda p: _write(p, _manifest({"a.txt": b"aaaa"}), [("a.txt", b"bbbb")])),
    "missing_file": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({"a.txt": b"a", "b.txt": b"b"}), [("a.txt", b"a")]),
    ),
    "duplicate": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({"a.txt": b"a"}), [("a.txt", b"a"), ("a.txt", b"a")]),
    ),
    "deleted_outside": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({"a.txt": b"a"}, deleted=["../victim"]), [("a.txt", b"a")]),
    ),
    "into_dot_git": (
        "archive_unsafe_entry",
        lambda p: _write(p, _manifest({".git/hooks/x": b"x"}), [(".git/hooks/x", b"x")]),
    ),
    "not_json": ("archive_unsafe_entry", lambda p: _write(p, b"{not json", [])),
    "not_gzip": ("archive_corrupt", lambda p: (p.write_bytes(b"plain text, not an archive"), p)[1]),
    "cut_short": (
        "archive_corrupt",
        lambda p: _cut_short(_write(p, _manifest({"a.txt": b"a" * 5000}), [("a.txt", b"a" * 5000)])),
    ),
    "other_version": (
        "archive_version_unsupported",
        lambda p: _write(p, {**_manifest({}), "format": "baton-snapshot/9"}, []),
    ),
    "manifest_claims_too_much": (
        "archive_too_large",
        lambda p: _write(
            p,
            {**_manifest({}), "files": [{"path": "big", "size": 10**13, "sha256": "0" * 64, "mode": "100644"}]},
            [],
        ),
    ),
    "bomb_ratio": ("archive_too_large", lambda p: _bomb(p, 40 * 1024 * 1024)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_are_refused_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    code, make = HOSTILE[case]
    archive = make(tmp_path / "hostile.tar.gz")
    work = tmp_path / "work"
    work.mkdir()
    existing = work / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("keep\n")
    before_work = hash_every_file(work)
    before_tmp = sorted(names(tmp_path))
    for target in (work / "fresh", existing):
        with pytest.raises(BatonError) as refused:
            restore_archive(archive, target, base=None, force=True)
        assert refused.value.code == code, refused.value
    assert hash_every_file(work) == before_work
    assert sorted(names(tmp_path)) == before_tmp


def test_a_total_size_limit_stops_a_bomb_early(tmp_path: Path) -> None:
    archive = _bomb(tmp_path / "bomb.tar.gz", 8 * 1024 * 1024)
    limits = ArchiveLimits(max_total_bytes=1024 * 1024)
    with pytest.raises(BatonError) as refused:
        verify_archive(archive, limits)
    assert refused.value.code == "archive_too_large"
    with pytest.raises(BatonError):
        restore_archive(archive, tmp_path / "out", base=None, limits=limits)
    assert not (tmp_path / "out").exists()


def test_a_failure_after_the_base_checkout_removes_the_fresh_target(tmp_path: Path) -> None:
    """An empty target gets the base in one checkout; a later failure undoes that step too."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = init_repo(tmp_path / "repo", {"keep.txt": "k\n"})
    (repo / "zz").symlink_to("../outside")  # a symlink leading out: allowed in a repository
    head = commit_all(repo, "a symlink")
    files = {"a.txt": b"first\n", "zz/late.txt": b"through the symlink\n"}
    archive = _write(tmp_path / "s.tar.gz", _manifest(files, base_commit=head), list(files.items()))
    target = tmp_path / "fresh"
    with pytest.raises(BatonError) as failed:
        restore_archive(archive, target, base=GitObjects.of_repository(repo), base_label="base_repo")
    assert failed.value.code == "path_outside_workspace"
    assert not target.exists()
    assert names(outside) == []
    assert names(tmp_path) == ["outside", "repo", "s.tar.gz"]


def test_a_clean_clone_at_the_base_takes_only_the_archive(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n", "gone.txt": "g\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "a.txt").write_text("a2\n")
    (repo / "gone.txt").unlink()
    (repo / "new.txt").write_text("n\n")
    capture_archive(shadow_repo, tmp_path / "s1.tar.gz")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    result = restore_archive(
        tmp_path / "s1.tar.gz", clone, base=GitObjects.of_repository(clone), base_label="base_repo"
    )
    assert (result.base_written, result.files_written, result.deleted) == (0, 2, 1)
    assert work_tree_state(clone) == work_tree_state(repo)
