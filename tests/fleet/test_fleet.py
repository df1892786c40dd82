"""The fleet (docs/fleet.md) on one host: ``baton serve --no-execute`` queues, ``baton worker``s — each
in a UTS namespace with its own host name and its own ``BATON_HOME`` — take the runs from DBOS's
queue on the shared Postgres, clone the repository through their own mirror cache and execute
them. Real processes, the trivial ACP agent (``--agent-cmd``) and the real Claude Code on the
scripted model.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.cli._baton_cli import invoke_in_process
from tests.conftest import make_git_repo
from tests.fleet._fleet import TRIVIAL_AGENT, Fleet, host_of, read_runs, until_ended

from baton.snapshots.blobs import blob_store_for
from baton.snapshots.s3 import S3BlobStore
from baton.testing import ScriptedModelServer
from baton.testing.postgres import TemporaryPostgres
from baton.testing.s3 import S3Server, TemporaryS3

pytestmark = [pytest.mark.timeout(240)]

MODEL_KEY = "sk-scripted-fleet-key-0123456789abcdef"


@pytest.fixture
def fleet(tmp_path: Path, postgres_server: TemporaryPostgres) -> Iterator[Fleet]:
    with Fleet(tmp_path / "fleet", postgres_server.create_schema()) as started:
        yield started


def max_overlap(intervals: list[tuple[str, str]]) -> int:
    """The most intervals (ISO start, end) open at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def gapless(entries: list[dict[str, object]]) -> bool:
    return [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))


@pytest.mark.parametrize(
    "args",
    [("serve", "--no-execute"), ("worker", "--fleet"), ("run", "hi", "--repo", ".", "--queue")],
    ids=["serve", "worker", "run"],
)
def test_fleet_modes_refuse_sqlite(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: tuple[str, ...]) -> None:
    refused = invoke_in_process(monkeypatch, tmp_path / "home", *args)
    assert refused.returncode == 3, refused.describe()
    assert "fleet_requires_postgres" in refused.stderr and "Postgres" in refused.stderr


@pytest.mark.claude
def test_an_api_server_and_two_workers_run_every_task_within_the_limits(tmp_path: Path, fleet: Fleet) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# fleet\n"})
    with ScriptedModelServer("plain") as model:
        fleet.extra.update(ANTHROPIC_BASE_URL=model.base_url, ANTHROPIC_API_KEY=MODEL_KEY)
        server, url = fleet.server()
        token = fleet.baton("api", "token").stdout.strip()
        # Queued before any worker is up: nobody can take them yet, and the run object says so.
        first = fleet.queue(str(repo), "first")
        waiting = httpx.get(f"{url}/v1/runs/{first}", headers={"Authorization": f"Bearer {token}"}).json()
        assert (waiting["status"], waiting["status_reason"]) == ("queued", "no_live_worker")
        workers = [fleet.worker(name, "--concurrency", "1") for name in ("w1", "w2")]
        created = httpx.post(
            f"{url}/v1/runs",
            json={"prompt": "hello from the API", "repo": str(repo), "permission_mode": "acceptEdits"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert created.status_code == 201, created.text
        assert created.json()["status"] == "queued"
        run_ids = [first, created.json()["id"], *(fleet.queue(str(repo), f"task {n}") for n in range(4))]
        records = until_ended(fleet.database_url, run_ids)
        assert {run_id: record.status for run_id, record in records.items()} == dict.fromkeys(run_ids, "finished"), [
            (record.error_code, record.error_message) for record in records.values()
        ]
        stored = read_runs(fleet.database_url, run_ids)
        # Every run ran on one of the workers, in a clone of its own there; both workers took some.
        hosts = {run_id: host_of(record.executor_id) for run_id, (record, _) in stored.items()}
        assert set(hosts.values()) == {"w1", "w2"}, hosts
        for run_id, (record, entries) in stored.items():
            worker_home = fleet.root / str(hosts[run_id])
            assert record.cwd == str(worker_home / "workspaces" / run_id)
            assert gapless(entries), run_id  # seqs 1..n: nothing lost, nothing twice
        # Never more than one run at once on a worker (--concurrency 1), nor two in all.
        spans = {host: [] for host in ("w1", "w2")}  # type: dict[str, list[tuple[str, str]]]
        for run_id, (record, _) in stored.items():
            assert record.started_at and record.finished_at
            spans[str(hosts[run_id])].append((record.started_at, record.finished_at))
        assert all(max_overlap(intervals) == 1 for intervals in spans.values()), spans
        # The API server executed nothing: no DBOS workflow of its, no workspace in its home.
        assert not (fleet.root / "api" / "workspaces").exists()
        assert all(proc.process.poll() is None for proc in (server, *workers))


def test_a_repository_that_cannot_be_cloned_fails_on_the_worker_with_gits_message(tmp_path: Path, fleet: Fleet) -> None:
    server, url = fleet.server()
    fleet.worker("w1")
    token = fleet.baton("api", "token").stdout.strip()
    missing = f"file://{tmp_path}/nowhere.git"
    run_id = fleet.queue(missing)
    records = until_ended(fleet.database_url, [run_id])
    assert records[run_id].status == "failed"
    shown = httpx.get(f"{url}/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}).json()
    assert (shown["status"], shown["status_reason"], shown["error_code"]) == ("failed", "clone_failed", "clone_failed")
    assert missing in shown["error_message"] and "fatal:" in shown["error_message"], shown
    assert server.process.poll() is None


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with TemporaryS3() as server:
        yield server


def shared_blobs(fleet: Fleet, s3: S3Server, bucket: str) -> None:
    """Every process of the fleet on one S3-compatible blob store (moto's server)."""
    url = s3.blob_url(bucket)
    blobs = blob_store_for(url, fleet.root, s3.environ)
    assert isinstance(blobs, S3BlobStore)
    blobs.create_bucket()
    fleet.extra.update(BATON_BLOB_URL=url, **s3.environ)


# Slow, and not yet reliable: in 2 of 5 runs on this loaded machine the surviving worker did not
# report the takeover within 60 s (cause not found yet; docs/fleet.md "Not built yet").
@pytest.mark.slow
def test_a_killed_workers_run_continues_on_another_worker(tmp_path: Path, fleet: Fleet, s3: S3Server) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# fleet\n"})
    shared_blobs(fleet, s3, "fleet-takeover")
    first = fleet.worker("w1", "--concurrency", "1")
    # A turn of 40 chunks, 4 a second: long enough to be killed in.
    run_id = fleet.queue(str(repo), "count slowly", agent_cmd=f"{TRIVIAL_AGENT.removesuffix(' 3')} 40 4")
    deadline = time.monotonic() + 90
    while True:
        record, entries = read_runs(fleet.database_url, [run_id])[run_id]
        if record.status == "running" and any(entry["method"] == "session/update" for entry in entries):
            break
        assert time.monotonic() < deadline, (record, first.output)
        time.sleep(0.1)
    assert host_of(record.executor_id) == "w1"
    second = fleet.worker("w2", "--concurrency", "1")
    os.killpg(first.process.pid, signal.SIGKILL)  # the worker and everything in its session
    first.process.wait()
    second.wait_for(rf"run {run_id} of dead executor .* enqueued again")
    records = until_ended(fleet.database_url, [run_id])
    record, entries = read_runs(fleet.database_url, [run_id])[run_id]
    assert records[run_id].status == "finished", (record.error_code, record.error_message, second.output)
    assert host_of(record.executor_id) == "w2"
    assert record.cwd == str(fleet.root / "w2" / "workspaces" / run_id)  # a clone of its own there
    assert gapless(entries)
    # It continued from its log: its resume note (native first; the agent here has no session to
    # load on this machine, so the rebuilt conversation follows), then the continuation prompt.
    resumes = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/resume"]
    assert resumes and resumes[-1]["path"] in ("native", "rebuilt")
    prompts = [
        e["payload"]["params"]["prompt"][0]["text"]
        for e in entries
        if e["method"] == "session/prompt" and e["direction"] == "to_agent"
    ]
    assert prompts[0] == "count slowly" and prompts[-1].startswith("[baton:resume]")
    statuses = [e["payload"]["params"]["status"] for e in entries if e["method"] == "_baton/status"]
    assert statuses[-1] == "finished" and statuses.count("running") == 2
