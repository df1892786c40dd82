"""Reading a repository's instructions (baton.workspaces.instructions) with real git: the base
commit only, a trusted repository only, regular UTF-8 files of bounded size only."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from tests.conftest import make_git_repo
from tests.workspaces.conftest import git

from baton.config import Settings
from baton.workspaces.instructions import MAX_BYTES, read_instructions
from baton.workspaces.record import WorkspaceRecord
from baton.workspaces.trust import is_trusted

NAMES = ("CLAUDE.md", "AGENTS.md")


def _record(repo: Path, commit: str | None = None, *, source: str | None = None) -> WorkspaceRecord:
    return WorkspaceRecord("in-place", str(repo), commit or git(repo, "rev-parse", "HEAD"), source or str(repo))


def _trusting(settings: Settings, *repos: str) -> Settings:
    return replace(settings, workspace_trusted=repos)


def test_the_base_commit_s_files_are_read_never_the_working_tree(settings: Settings, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"CLAUDE.md": "committed\n"})
    base = git(repo, "rev-parse", "HEAD")
    (repo / "CLAUDE.md").write_text("edited\n")
    (repo / "AGENTS.md").write_text("never committed\n")
    found = read_instructions(_trusting(settings, str(repo)), _record(repo, base), NAMES)
    assert found is not None
    assert [(file.path, file.text) for file in found.files] == [("CLAUDE.md", "committed\n")]
    assert found.describe() == {
        "files": [{"path": "CLAUDE.md", "sha256": hashlib.sha256(b"committed\n").hexdigest(), "bytes": 10}],
        "commit": base,
    }
    assert found.text() == f"Instructions from the repository's CLAUDE.md (commit {base[:12]}):\n\ncommitted\n"
    # a later commit is not the run's base
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "later")
    again = read_instructions(_trusting(settings, str(repo)), _record(repo, base), NAMES)
    assert again is not None and [file.text for file in again.files] == ["committed\n"]


def test_an_untrusted_repository_s_files_are_named_not_given(settings: Settings, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"AGENTS.md": "a\n", "CLAUDE.md": "c\n"})
    found = read_instructions(settings, _record(repo), NAMES)
    assert found is not None and found.files == () and found.text() is None
    assert [path for path, _ in found.ignored] == ["CLAUDE.md", "AGENTS.md"]
    assert all("is not a trusted repository" in reason for _, reason in found.ignored)


def test_nothing_committed_or_no_base_commit_is_nothing(settings: Settings, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "r\n", "docs/CLAUDE.md": "not at the top\n"})
    (repo / "CLAUDE.md").write_text("only in the working tree\n")
    trusted = _trusting(settings, str(repo))
    assert read_instructions(trusted, _record(repo), NAMES) is None
    assert read_instructions(trusted, WorkspaceRecord("in-place", str(repo), None, str(repo)), NAMES) is None
    assert read_instructions(trusted, _record(repo), ()) is None


def test_a_symlink_a_large_file_and_bytes_that_are_not_utf8_are_ignored(settings: Settings, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "r\n"})
    (repo / "CLAUDE.md").symlink_to("/etc/passwd")
    (repo / "AGENTS.md").write_bytes(b"\xff\xfe not utf-8\n")
    (repo / "GEMINI.md").write_text("x" * (MAX_BYTES + 1))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "odd files")
    found = read_instructions(_trusting(settings, str(repo)), _record(repo), ("CLAUDE.md", "AGENTS.md", "GEMINI.md"))
    assert found is not None and found.files == ()
    assert dict(found.ignored) == {
        "CLAUDE.md": "not a regular file",
        "AGENTS.md": "not UTF-8 text",
        "GEMINI.md": f"larger than {MAX_BYTES} bytes",
    }


def test_trust_is_one_rule_a_url_or_a_path_that_resolves_to_the_repository(settings: Settings, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "r\n"})
    (tmp_path / "link").symlink_to(repo)
    url = "https://example.invalid/r.git"
    trusted = _trusting(settings, str(tmp_path / "link"), url)
    assert is_trusted(trusted, str(repo.resolve()))
    assert is_trusted(trusted, url)
    assert not is_trusted(trusted, str(tmp_path))
    assert not is_trusted(settings, str(repo.resolve()))
    clone = read_instructions(trusted, _record(repo, source=url), NAMES)
    assert clone is None  # nothing committed: trust alone gives nothing
