"""``baton import FILE --repo EMPTY_DIR``: the archive holds only what the run changed, so an empty
folder is refused with ``base_commit_missing`` (nothing written, the message naming options that
exist), and ``--base-repo CLONE`` supplies the base commit's files: the whole tree arrives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process
from tests.runs.test_handoff import clone, every_file, make_source


def test_an_import_into_an_empty_folder_needs_the_base_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = asyncio.run(make_source(tmp_path))
    source.store.close()
    out = tmp_path / "run.tar.gz"
    exported = invoke_in_process(monkeypatch, source.settings.home, "export", source.run_id, "--out", str(out))
    assert exported.returncode == 0, exported.describe()
    home = tmp_path / "home-b"
    empty = tmp_path / "empty"
    empty.mkdir()

    refused = invoke_in_process(monkeypatch, home, "import", str(out), "--repo", str(empty), "--json")
    assert refused.returncode == 3, refused.describe()
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "base_commit_missing" and "--base-repo" in error["message"]
    assert "git clone" in error["message"]
    assert list(empty.iterdir()) == []  # nothing partially written
    assert every_file(home) == {}
    assert json.loads(invoke_in_process(monkeypatch, home, "runs", "--json").stdout) == []

    # --base-repo: an option of `baton import`, every file of the tree in the empty folder.
    not_git = invoke_in_process(monkeypatch, home, "import", str(out), "--repo", str(empty), "--base-repo", str(home))
    assert not_git.returncode == 2 and "not a git repository" in not_git.stderr, not_git.describe()
    base = clone(source.repo, tmp_path / "some-clone")
    imported = invoke_in_process(
        monkeypatch, home, "import", str(out), "--repo", str(empty), "--base-repo", str(base), "--json"
    )
    assert imported.returncode == 0, imported.describe()
    result = json.loads(imported.stdout)
    assert result["run_id"] == source.run_id and result["restored"]["base"] == "base_repo"
    assert (empty / "README.md").read_text() == "# a repository\n"
    assert (empty / "src" / "app.py").read_text() == "v2\n" and (empty / "one.txt").read_text() == "one\n"
