"""Runs as DBOS workflows in this process: the workflow rows, the concurrency queue, ``workspace_busy``.

The real Claude Code against the scripted model; DBOS's system database is the real SQLite file
under ``BATON_HOME`` (and the real Postgres server for the Postgres case). The CLI tests in
tests/cli/test_workers_cli.py drive several processes.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from tests.conftest import make_git_repo
from tests.runs.test_claude_host import scripted

from baton.agents.processes import run_process_ids
from baton.config import Settings
from baton.errors import RefusedError
from baton.runs import Baton, RunSpec
from baton.runs.executors import this_executor_id
from baton.runs.workflows import APPLICATION_VERSION, system_database_url
from baton.store import Store

pytestmark = pytest.mark.claude


def workflow_rows(settings: Settings) -> list[tuple[str, str, str, str, str | None]]:
    """``(workflow id, status, name, executor id, application version)`` from DBOS's SQLite file."""
    url = system_database_url(settings)
    assert url.startswith("sqlite:///")
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        return [
            (str(row[0]), str(row[1]), str(row[2]), str(row[3]), row[4])
            for row in connection.execute(
                "SELECT workflow_uuid, status, name, executor_id, application_version FROM workflow_status "
                "ORDER BY created_at"
            )
        ]


async def test_a_run_is_a_workflow_of_this_processes_executor(settings: Settings, repo: Path) -> None:
    with scripted(settings, "plain") as (configured, _):
        async with Baton(configured) as baton:
            outcome = await baton.run(RunSpec(prompt="hello", repo=repo))
            record = await baton.store.get_run(outcome.run_id)
    assert outcome.status == "finished"
    assert record.executor_id == this_executor_id() and record.heartbeat_at is not None
    rows = workflow_rows(configured)
    assert rows == [(f"{outcome.run_id}:1", "SUCCESS", "baton_run", this_executor_id(), APPLICATION_VERSION)]
    # DBOS's own file, in WAL mode, beside baton's.
    database = Path(system_database_url(configured).removeprefix("sqlite:///"))
    assert database.parent == configured.home and database.name == "dbos.sqlite"
    with sqlite3.connect(database) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_run_on_postgres_is_a_workflow_in_the_same_database(
    settings: Settings, repo: Path, postgres_url: str
) -> None:
    database_url = postgres_url
    with scripted(replace(settings, database_url=database_url), "plain") as (configured, _):
        async with Baton(configured) as baton:
            outcome = await baton.run(RunSpec(prompt="hello", repo=repo))
    assert outcome.status == "finished"
    store = Store.open(database_url)
    try:
        with store.engine.connect() as connection:
            row = connection.execute(
                text(
                    "SELECT status, executor_id, application_version FROM dbos.workflow_status "
                    "WHERE workflow_uuid = :id"
                ),
                {"id": f"{outcome.run_id}:1"},
            ).one()
    finally:
        store.close()
    assert tuple(row) == ("SUCCESS", this_executor_id(), APPLICATION_VERSION)


def overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant."""
    points = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, step in points:
        current += step
        most = max(most, current)
    return most


async def burst(settings: Settings, tmp_path: Path, runs: int, limit: int) -> None:
    """``runs`` runs started at once with a limit of ``limit``: never more agents than that at once."""
    repos = [make_git_repo(tmp_path / f"repo-{index}", {"README.md": f"# {index}\n"}) for index in range(runs)]
    with scripted(settings, "plain") as (configured, _):
        async with Baton(configured, concurrency=limit) as baton:
            handles = [await baton.start(RunSpec(prompt=f"run {index}", repo=repo)) for index, repo in enumerate(repos)]
            ids = [handle.run_id for handle in handles]
            statuses = [record.status for record in await baton.runs()]
            assert statuses.count("queued") >= runs - limit  # the burst waits
            most_agents = 0
            waiting = asyncio.gather(*(handle.wait() for handle in handles))
            while not waiting.done():  # OS sampling: the processes carrying each run's BATON_RUN_ID
                agents = sum(1 for run_id in ids if run_process_ids(run_id))
                most_agents = max(most_agents, agents)
                await asyncio.sleep(0.05)
            outcomes = await waiting
            intervals = []
            for run_id in ids:
                entries = await baton.log.read(run_id)
                stamps = [
                    datetime.fromisoformat(entry["ts"].replace("Z", "+00:00"))
                    for entry in entries
                    if entry["method"] == "_baton/status"
                ]
                intervals.append((stamps[0], stamps[-1]))  # running … finished: the agent's life
    assert [outcome.status for outcome in outcomes] == ["finished"] * runs
    assert 1 <= most_agents <= limit
    assert overlap(intervals) <= limit
    assert overlap(intervals) >= 2  # the limit is a limit, not one at a time


async def test_a_burst_waits_queued_within_the_limit(settings: Settings, tmp_path: Path) -> None:
    await burst(settings, tmp_path, runs=5, limit=2)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_twenty_runs_with_a_limit_of_four(settings: Settings, tmp_path: Path) -> None:
    await burst(settings, tmp_path, runs=20, limit=4)


async def test_one_running_run_per_workspace(settings: Settings, repo: Path, tmp_path: Path) -> None:
    with scripted(settings, "plain") as (configured, _):
        async with Baton(configured) as baton:
            first = await baton.start(RunSpec(prompt="first", repo=repo, run_mode="interactive"))
            with pytest.raises(RefusedError) as refused:
                await baton.start(RunSpec(prompt="second", repo=repo))
            assert refused.value.code == "workspace_busy"
            assert refused.value.details is not None and refused.value.details["run_id"] == first.run_id
            # The same tree through another path is the same workspace.
            with pytest.raises(RefusedError, match="one running run per workspace"):
                await baton.start(RunSpec(prompt="second", repo=repo / ".." / repo.name))
            other = make_git_repo(tmp_path / "other", {"README.md": "# other\n"})
            elsewhere = await baton.start(RunSpec(prompt="elsewhere", repo=other))
            assert (await elsewhere.wait()).status == "finished"
            await first.close()
            assert (await first.wait()).status == "finished"
            again = await baton.start(RunSpec(prompt="again", repo=repo))  # free once the first ended
            assert (await again.wait()).status == "finished"
    # Nothing was recorded for the refused starts.
    assert len(workflow_rows(configured)) == 3
