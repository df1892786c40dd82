"""A run handed from one ``BATON_HOME`` to another and finished there with the real Claude Code
(scripted): ``baton run`` killed mid-command → ``baton export`` → ``baton import`` into a fresh home
and another repository → ``baton resume``. The agent home travels, so the resume is native; without
it the conversation is rebuilt; with a shared store and blob store ``baton resume --repo`` brings
the tree over without a file."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from tests.cli._baton_cli import baton_command, cli_environment, invoke_in_process
from tests.conftest import make_git_repo
from tests.runs._killed_run import PERMISSION_ANSWERS, count, run_killed_once

from baton.config import Settings
from baton.events.project import project
from baton.runs import Baton
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-handoff-key-0123456789abcdef"


@dataclass(frozen=True)
class Handed:
    run_id: str
    home: Path  # the first machine's BATON_HOME, where the run was killed
    repo: Path  # its repository (one.txt, two.txt written by the agent, not committed)
    origin: Path  # a bare clone of the repository at its base commit, for the other machines
    export: Path


def _clone(origin: Path, target: Path) -> None:
    subprocess.run(["git", "clone", "-q", str(origin), str(target)], check=True)


def _baton(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*baton_command(), *args],
        env=env or cli_environment(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def handed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Handed]:
    """A three-steps run killed while its `sleep 1; echo hi` runs, both files snapshotted, exported."""
    base = tmp_path_factory.mktemp("handoff")
    home = base / "home-a"
    repo = make_git_repo(base / "repo-a", {"README.md": "# a repository\n"})
    origin = base / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(origin)], check=True)
    with ScriptedModelServer("three-steps") as server:
        env = cli_environment(home) | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": MODEL_KEY}

        def ready(database: Path) -> bool:
            # The third answer lets `sleep 1; echo hi` start; by then two.txt's snapshot is recorded.
            return count(database, PERMISSION_ANSWERS) >= 3 and count(database, "SELECT COUNT(*) FROM snapshots") >= 2

        run_id = run_killed_once(repo, env, ready)
    export = base / "run.tar.gz"
    exported = _baton(home, "export", run_id, "--out", str(export), "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["snapshots"] == 2
    yield Handed(run_id=run_id, home=home, repo=repo, origin=origin, export=export)


def _resume(
    home: Path, run_id: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[list[dict[str, object]], list[object]]:
    """``baton resume RUN --json`` against a fresh scripted server: its events and the model's requests."""
    with ScriptedModelServer("three-steps") as server:
        base_env = env or cli_environment(home)
        resumed = _baton(
            home,
            "resume",
            run_id,
            "--json",
            *extra,
            env=base_env | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": MODEL_KEY},
        )
        requests = [request.body for request in server.requests]
    assert resumed.returncode == 0, resumed.stderr
    return [json.loads(line) for line in resumed.stdout.splitlines()], requests


def _log(database: Path, run_id: str) -> list[dict[str, object]]:
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT seq, method, payload FROM log_entries JOIN runs USING (run_key) WHERE runs.id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [{"seq": seq, "method": method, "payload": json.loads(text)} for seq, method, text in rows]


def _import(monkeypatch: pytest.MonkeyPatch, home: Path, handed: Handed, repo: Path) -> None:
    imported = invoke_in_process(monkeypatch, home, "import", str(handed.export), "--repo", str(repo), "--json")
    assert imported.returncode == 0, imported.describe()
    body = json.loads(imported.stdout)
    assert body["status"] == "interrupted" and body["snapshot_id"] == "s2" and body["restored"]["base"] == "base_repo"
    assert (repo / "one.txt").read_text() == "one\n" and (repo / "two.txt").read_text() == "two\n"


def _finished_there(events: list[dict[str, object]], repo: Path, home: Path, run_id: str) -> list[dict[str, object]]:
    types = [event["type"] for event in events]
    assert "task.started" not in types and types[-1] == "task.finished"
    commands = [event["data"]["command"] for event in events if event["type"] == "command.finished"]  # type: ignore[index]
    assert commands == ["sleep 1; echo hi"]
    assert (repo / "one.txt").read_text() == "one\n" and (repo / "two.txt").read_text() == "two\n"
    entries = _log(home / "baton.db", run_id)
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    return entries


def _resume_params(entries: list[dict[str, object]]) -> dict[str, object]:
    [params] = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/resume"]  # type: ignore[index]
    return params  # type: ignore[no-any-return]


def test_an_imported_run_finishes_on_the_native_path(
    tmp_path: Path, handed: Handed, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home-b"
    repo = tmp_path / "elsewhere" / "repo-b"
    _clone(handed.origin, repo)
    before = {path.name: path.read_bytes() for path in handed.repo.iterdir() if path.is_file()}
    _import(monkeypatch, home, handed, repo)
    events, requests = _resume(home, handed.run_id)
    entries = _finished_there(events, repo, home, handed.run_id)
    resume = _resume_params(entries)
    assert resume["path"] == "native" and str(resume["prompt"]).startswith("[baton:resume]")
    # Claude Code restored the session from the transcript that travelled: the model sees the
    # first machine's turns as its own history, not a rebuilt transcript.
    history = json.dumps(requests[0])
    assert "Step 1: writing one.txt." in history and "<baton-transcript>" not in history
    assert "[baton:interrupted Bash]" in history
    with sqlite3.connect(home / "baton.db") as connection:
        cwd, status = connection.execute("SELECT cwd, status FROM runs WHERE id = ?", (handed.run_id,)).fetchone()
    assert cwd == str(repo.resolve()) and status == "finished"
    # The first machine's repository was only read.
    assert {path.name: path.read_bytes() for path in handed.repo.iterdir() if path.is_file()} == before


async def test_an_imported_run_without_its_agent_home_is_rebuilt(tmp_path: Path, handed: Handed) -> None:
    repo = tmp_path / "repo-c"
    _clone(handed.origin, repo)
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home-c"), "PATH": os.environ.get("PATH", "")}
    )
    with ScriptedModelServer("three-steps") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=MODEL_KEY)
        async with Baton(configured) as baton:
            imported = await baton.import_run(handed.export, repo=repo)
            assert imported.status == "interrupted" and imported.restored is not None
            shutil.rmtree(settings.run_dir(handed.run_id) / "agent-home")
            handle = await baton.resume(handed.run_id)
            outcome = await handle.wait()
            entries = await baton.log.read(handed.run_id)
        requests = [request.body for request in server.requests]
    assert outcome.status == "finished"
    assert handle.resume_plan is not None and handle.resume_plan.params["path"] == "rebuilt"
    assert any("<baton-transcript>" in json.dumps(body) for body in requests)
    assert (repo / "one.txt").read_text() == "one\n" and (repo / "two.txt").read_text() == "two\n"
    commands = [event["data"]["command"] for event in project(entries) if event["type"] == "command.finished"]
    assert commands == ["sleep 1; echo hi"]


async def test_resume_with_repo_on_a_shared_store_restores_the_latest_snapshot(
    tmp_path: Path, handed: Handed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine with the same database and blob store: no file, `resume --repo DIR`."""
    shared = tmp_path / "shared"
    # the database and the blobs only (not the runs, nor the doorbell FIFOs of live processes)
    shutil.copytree(handed.home, shared, ignore=shutil.ignore_patterns("runs", "*-wake"))
    repo = tmp_path / "repo-d"
    _clone(handed.origin, repo)
    monkeypatch.setenv("BATON_BLOB_URL", f"file://{shared / 'blobs'}")
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home-d"), "PATH": os.environ.get("PATH", "")}
    )
    with ScriptedModelServer("three-steps") as server:
        configured = replace(
            settings,
            database_url=f"sqlite:///{shared / 'baton.db'}",
            anthropic_base_url=server.base_url,
            anthropic_api_key=MODEL_KEY,
        )
        async with Baton(configured) as baton:
            handle = await baton.resume(handed.run_id, repo=repo)
            assert (repo / "one.txt").read_text() == "one\n"  # restored before the agent started
            outcome = await handle.wait()
            entries = await baton.log.read(handed.run_id)
            stored = [snapshot["id"] for snapshot in await baton.store.list_snapshots(handed.run_id)]
    assert outcome.status == "finished"
    assert handle.resume_plan is not None and handle.resume_plan.params["path"] == "rebuilt"
    assert (repo / "two.txt").read_text() == "two\n"
    # Captures after the hand-off go on after s2: none is dropped as a second s1.
    logged = [
        entry["payload"]["params"]["snapshot_id"] for entry in entries if entry["method"] == "_baton/tree_snapshot"
    ]
    assert stored[:2] == ["s1", "s2"] and sorted(stored) == sorted(set(logged)) and len(logged) == len(set(logged))
