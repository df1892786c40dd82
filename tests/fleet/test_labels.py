"""Labels and priority on the fleet's queue (docs/fleet.md "Labels and priority"): real Postgres,
real ``baton worker``s in "machines" of their own, the trivial ACP agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import make_git_repo
from tests.fleet._fleet import TRIVIAL_AGENT, Fleet, host_of, until_ended

from baton.testing.postgres import TemporaryPostgres

pytestmark = [pytest.mark.timeout(240)]


@pytest.fixture
def fleet(tmp_path: Path, postgres_server: TemporaryPostgres) -> Iterator[Fleet]:
    with Fleet(tmp_path / "fleet", postgres_server.create_schema()) as started:
        yield started


def queue(fleet: Fleet, repo: str, *args: str) -> dict[str, object]:
    done = fleet.baton(
        "client", "run", "go", "--repo", repo, "--agent-cmd", TRIVIAL_AGENT, "--trust-agent-permissions",
        "--queue", "--json", *args,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run: dict[str, object] = json.loads(done.stdout)
    return run


def shown(fleet: Fleet, run_id: str) -> dict[str, object]:
    done = fleet.baton("client", "show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    body: dict[str, object] = json.loads(done.stdout)
    return body


def test_a_labelled_run_waits_for_a_worker_with_its_labels_and_goes_only_to_it(fleet: Fleet, tmp_path: Path) -> None:
    repo = str(make_git_repo(tmp_path / "repo", {"README.md": "# labels\n"}))
    fleet.worker("plain")
    gpu_run = queue(fleet, repo, "--label", "gpu=yes")
    assert gpu_run["status"] == "queued"
    assert gpu_run["status_reason"] == "no_worker_with_labels"
    body = shown(fleet, str(gpu_run["id"]))
    assert body["labels"] == "gpu=yes" and body["priority"] == 100
    plain_run = queue(fleet, repo)
    assert plain_run["status_reason"] == "waiting_for_worker"
    assert until_ended(fleet.database_url, [str(plain_run["id"])])[str(plain_run["id"])].status == "finished"
    assert shown(fleet, str(gpu_run["id"]))["status"] == "queued"  # the plain worker never takes it
    fleet.worker("gpu", "--labels", "gpu=yes,region=eu")
    ended = until_ended(fleet.database_url, [str(gpu_run["id"])])[str(gpu_run["id"])]
    assert ended.status == "finished"
    assert host_of(ended.executor_id) == "gpu"


def test_higher_priority_is_dequeued_first_when_slots_are_scarce(fleet: Fleet, tmp_path: Path) -> None:
    repo = str(make_git_repo(tmp_path / "repo", {"README.md": "# labels\n"}))
    fleet.extra["BATON_FLEET_WORKER_CONCURRENCY"] = "1"  # one [fleet] configuration for every process
    late = [str(queue(fleet, repo, "--priority", "500")["id"]) for _ in range(2)]
    first = str(queue(fleet, repo, "--priority", "1")["id"])
    fleet.worker("only", "--concurrency", "1")
    records = until_ended(fleet.database_url, [first, *late])
    assert all(record.status == "finished" for record in records.values())
    started = {run_id: record.started_at or "" for run_id, record in records.items()}
    assert started[first] < min(started[run_id] for run_id in late)


def test_bad_labels_and_priorities_are_refused_with_their_codes(fleet: Fleet, tmp_path: Path) -> None:
    repo = str(make_git_repo(tmp_path / "repo", {"README.md": "# labels\n"}))
    for args, code in [
        (("--label", "gpu"), "invalid_labels"),
        (("--label", "g p u=yes"), "invalid_labels"),
        (("--priority", "0"), "invalid_priority"),
    ]:
        done = fleet.baton(
            "client", "run", "go", "--repo", repo, "--agent-cmd", TRIVIAL_AGENT, "--trust-agent-permissions",
            "--queue", *args,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert code in done.stderr
    done = fleet.baton("client", "run", "go", "--repo", repo, "--priority", "3")
    assert done.returncode == 2 and "invalid_argument" in done.stderr
