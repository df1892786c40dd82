"""Who delivers for `baton run` with no server up: the run's events wait in the store, and the
next `baton worker` (or `baton serve`) on that store delivers them — through the console script."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI, Started
from tests.conftest import make_git_repo
from tests.notify._receiver import receiver

pytestmark = [pytest.mark.claude, pytest.mark.slow(seconds=30), pytest.mark.timeout(120)]

SECRET = "whsec-worker-0123456789"


def stop_worker(started: Started) -> str:
    _, process = started
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    return stderr


def test_a_worker_delivers_what_baton_run_did_while_nobody_delivered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# a repository\n"})
    baton = BatonCLI(home)
    with receiver() as hook:
        (home / "baton.toml").write_text(
            f'[notify]\npoll_seconds = 0.1\n[[notify.webhooks]]\nurl = "{hook.url}"\nsecret = "{SECRET}"\n'
        )
        worker = baton.start("worker", "--interval", "0.2")
        try:
            assert worker[1].stderr is not None
            for line in worker[1].stderr:  # up; stopping, its notifier records where it read to
                if "scanning every" in line:
                    break
            stop_worker(worker)
        finally:
            BatonCLI.stop([worker])
        done = baton("run", "go", "--repo", str(repo), "--scenario", "plain", "--json")
        assert done.returncode == 0, done.describe()
        run_id = done.json_lines()[0]["run_id"]
        assert hook.received == []  # `baton run` itself sends nothing
        worker = baton.start("worker", "--interval", "0.2")
        try:
            (got,) = hook.wait_for(lambda r: len(r) >= 1, 60)
            stop_worker(worker)
        finally:
            BatonCLI.stop([worker])
    assert got.verified(SECRET)
    body = json.loads(got.body)
    assert (body["event"], body["run"]["id"], body["run"]["status"]) == ("run.finished", run_id, "finished")
