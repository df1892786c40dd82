"""``baton send``, ``baton close``, ``baton cancel`` and ``baton logs --follow`` from other processes
than the one executing the run (the real Claude Code against the scripted model)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI, Started, invoke_in_process, until_event

from baton.agents.processes import run_process_ids
from baton.store import Redactor, SessionLog, Store

pytestmark = pytest.mark.claude


def test_messages_and_close_from_other_processes_while_others_follow_the_log(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = baton.start("run", "first", "--repo", str(repo), "--scenario", "plain", "--interactive", "--json")
    followers: list[Started] = []
    try:
        run_id = until_event(running, "task.started")["run_id"]
        followers = [
            baton.start("logs", run_id, "--follow", "--view", "acp"),
            baton.start("logs", run_id, "--follow", "--view", "events"),
            baton.start("logs", run_id, "--follow", "--view", "acp", "--after", "5"),
        ]
        sent = [baton("send", run_id, "second"), baton("send", run_id, "third", "--json"), baton("close", run_id)]
        assert [one.returncode for one in sent] == [0, 0, 0], [one.describe() for one in sent]
        assert json.loads(sent[1].stdout)["status"] == "queued"
        ended = baton.finish(running, timeout=40)
        followed = [baton.finish(one, timeout=20) for one in followers]
    finally:
        baton.stop([running, *followers])
    assert ended.returncode == 0, ended.describe()
    # What the followers printed against what is stored, read back in this process.
    stored = baton.here(monkeypatch, "logs", run_id, "--view", "acp").json_lines()
    events = baton.here(monkeypatch, "logs", run_id, "--view", "events").json_lines()
    assert followed[0].json_lines() == stored
    assert followed[1].json_lines() == events
    assert followed[2].json_lines() == [entry for entry in stored if entry["seq"] > 5]
    prompts = [
        entry["payload"]["params"]["prompt"][0]["text"]
        for entry in stored
        if entry["method"] == "session/prompt" and entry["direction"] == "to_agent"
    ]
    assert prompts == ["first", "second", "third"]
    assert stored[-1]["payload"]["params"]["status"] == "finished"
    assert events[-1]["type"] == "task.finished"
    # The run has ended: refused (exit 3) with the code on stderr (the same app, in this process).
    late = baton.here(monkeypatch, "send", run_id, "too late", "--json")
    assert late.returncode == 3 and json.loads(late.stderr)["error"]["code"] == "run_not_running"
    missing = baton.here(monkeypatch, "close", "run_nope")
    assert missing.returncode == 1 and missing.stderr == "baton: run_not_found: no run run_nope\n"


@pytest.mark.slow  # cancel from elsewhere: tests/server (JSON-RPC cancel), every run
def test_cancel_from_another_process_interrupts_a_long_command(baton: BatonCLI, repo: Path) -> None:
    args = ("run", "go", "--repo", str(repo), "--scenario", "long-command", "--json")
    running = baton.start(*args, "--allow", "Bash(sleep:*)", "--allow", "Bash(echo:*)")
    try:
        run_id = until_event(running, "command.started")["run_id"]
        cancelled = baton("cancel", run_id, "--reason", "from elsewhere")
        ended = baton.finish(running, timeout=30)
    finally:
        baton.stop([running])
    assert cancelled.returncode == 0, cancelled.describe()
    assert ended.returncode == 5, ended.describe()
    stored = baton("logs", run_id, "--view", "acp").json_lines()
    assert stored[-1]["payload"]["params"]["status"] == "cancelled"
    taken = [entry["payload"]["params"] for entry in stored if entry["method"] == "_baton/inbox"]
    assert [(note["kind"], note["payload"]) for note in taken] == [("cancel", {"reason": "from elsewhere"})]
    assert not run_process_ids(run_id)


def test_follow_ends_by_itself_when_the_runs_executor_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    run_id = asyncio.run(_killed_run(home))
    followed = invoke_in_process(monkeypatch, home, "logs", run_id, "--follow", "--view", "acp")
    assert followed.returncode == 0, followed.describe()
    assert [entry["seq"] for entry in followed.json_lines()] == [1, 2, 3]
    refused = invoke_in_process(monkeypatch, home, "send", run_id, "hello")
    assert refused.returncode == 3 and "run_not_running" in refused.stderr
    assert invoke_in_process(monkeypatch, home, "cancel", run_id).returncode == 0  # kept for a resume


async def _killed_run(home: Path) -> str:
    """A run recorded as running by a process that is gone, with three committed entries."""
    home.mkdir(parents=True)
    store = await asyncio.to_thread(Store.open, f"sqlite:///{home / 'baton.db'}")
    async with store, SessionLog(store, Redactor()) as log:
        record = await store.create_run(agent="claude", run_mode="interactive")
        await store.update_run(record.id, status="running", executor_id="local:elsewhere:0:1:2")
        log.open_run(record.id)
        for index in range(3):
            log.append(record.id, "baton", "_baton/console", {"jsonrpc": "2.0", "params": {"n": index}})
        await log.flush()
        log.close_run(record.id)
    return record.id
