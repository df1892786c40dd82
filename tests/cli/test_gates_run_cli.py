"""Gates through the installed ``baton`` command: a run parks (``--no-wait`` exits 4), the gate is
decided from another process with no process executing the run, and ``baton resume`` finishes it;
and a ``baton run`` killed (SIGKILL) while its gate is pending loses nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.cli._terminal import run_in_terminal
from tests.conftest import make_git_repo

from baton.agents.processes import kill_run_processes, run_process_ids
from baton.config import Settings
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs import Baton
from baton.runs.executors import effective_status
from baton.store import Store
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})


def test_no_wait_exits_4_then_approve_and_resume_finish_the_run(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baton.env["BATON_GATE_GRACE_SECONDS"] = "1"
    run = baton("run", "go", "--repo", str(repo), "--scenario", "gate-park", "--no-wait", "--json")
    assert run.returncode == 4, run.describe()
    types = [event["type"] for event in run.json_lines()]
    assert "gate.opened" in types and "task.finished" not in types
    listed = baton.here(monkeypatch, "gates", "--status", "pending", "--json")  # the listing: test_gates_cli.py
    [gate] = json.loads(listed.stdout)
    assert gate["kind"] == "tool" and gate["input"]["command"] == "touch approved.txt"
    approved = baton("approve", gate["id"])
    assert approved.returncode == 0, approved.describe()
    resumed = baton("resume", gate["run_id"], "--scenario", "gate-park", "--json")
    assert resumed.returncode == 0, resumed.describe()
    assert (repo / "approved.txt").exists()
    events = resumed.json_lines()
    assert events[-1]["type"] == "task.finished"
    assert "Resumed after the decision" in events[-1]["data"]["result"]


@pytest.mark.slow
def test_resume_before_the_decision_is_refused_and_a_cancel_ends_the_parked_run_at_once(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baton.env["BATON_GATE_GRACE_SECONDS"] = "600"  # --no-wait parks as soon as the gate is open, whatever the grace
    run = baton("run", "go", "--repo", str(repo), "--scenario", "gate-park", "--no-wait", "--json")
    assert run.returncode == 4, run.describe()
    run_id = run.json_lines()[0]["run_id"]
    refused = baton("resume", run_id, "--scenario", "gate-park")
    assert refused.returncode == 3 and "run_paused" in refused.stderr, refused.describe()
    # Nobody executes the parked run: the cancel itself ends it, and says so.
    cancelled = baton("cancel", run_id, "--json")
    assert cancelled.returncode == 0, cancelled.describe()
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    shown = json.loads(baton.here(monkeypatch, "show", run_id, "--json").stdout)
    assert shown["status"] == "cancelled", shown
    [gate] = json.loads(baton.here(monkeypatch, "gates", "--run", run_id, "--json").stdout)
    assert gate["status"] == "denied" and gate["decided_by"] == "cancel" and gate["decision"]["reason"] == "cancelled"
    events = baton.here(monkeypatch, "logs", run_id).json_lines()
    assert [event["type"] for event in events][-2:] == ["gate.resolved", "task.finished"]
    assert events[-1]["data"]["stop_reason"] == "cancelled"
    again = baton.here(monkeypatch, "cancel", run_id)
    assert again.returncode == 3 and "run_not_running" in again.stderr, again.describe()
    assert not (repo / "approved.txt").exists()


def test_needs_approval_parks_at_once_with_no_wait_and_one_approval_finishes_it(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--no-wait`` exits 4 as soon as the gate opens, the run parked properly; after the
    approval ``baton resume`` runs the approved call once and the run finishes: no second gate."""
    baton.env["BATON_GATE_GRACE_SECONDS"] = "600"  # before, --no-wait waited out the grace period first
    run = baton("run", "go", "--repo", str(repo), "--scenario", "needs-approval", "--no-wait", "--json")
    assert run.returncode == 4, run.describe()
    run_id = run.json_lines()[0]["run_id"]
    assert json.loads(baton.here(monkeypatch, "show", run_id, "--json").stdout)["status"] == "paused"
    approved = baton.here(monkeypatch, "approve", run_id)
    assert approved.returncode == 0, approved.describe()
    resumed = baton("resume", run_id, "--scenario", "needs-approval", "--no-wait", "--json")
    assert resumed.returncode == 0, resumed.describe()
    assert (repo / "approved.txt").exists()
    events = resumed.json_lines()
    assert "gate.opened" not in [event["type"] for event in events]
    assert events[-1]["type"] == "task.finished"
    assert "The command finished after the decision" in events[-1]["data"]["result"]
    assert len(json.loads(baton.here(monkeypatch, "gates", "--run", run_id, "--json").stdout)) == 1


@pytest.mark.slow
async def test_a_run_killed_while_its_gate_is_pending_is_decided_then_resumed(baton: BatonCLI, repo: Path) -> None:
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(baton.home), "PATH": os.environ["PATH"]})
    started = baton.start("run", "go", "--repo", str(repo), "--scenario", "gate-park", "--json")
    _, process = started
    try:
        store = Store.open(settings.resolved_database_url)
        try:
            gate = await _pending_gate(store)
            os.killpg(process.pid, signal.SIGKILL)  # baton run and everything in its session
            process.communicate(timeout=30)
            kill_run_processes(gate.run_id)  # Claude Code runs in a session of its own
            record = await store.get_run(gate.run_id)
            assert effective_status(record.status, record.executor_id, record.heartbeat_at) == "paused"
            # Decided with no process executing the run: recorded on the gate and in the inbox.
            await GateLedger(store).decide(
                gate.id,
                {"decision": "approve", "bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash},
                decided_by="test",
            )
        finally:
            await store.aclose()
    finally:
        baton.stop([started])
    with ScriptedModelServer("gate-park") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key="sk-scripted-0123456789")
        async with Baton(configured) as api:
            handle = await api.resume(gate.run_id)
            outcome = await handle.wait()
            entries = await api.log.read(gate.run_id)
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    [resume] = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/resume"]
    assert "[baton:approved-rerun Bash]" in resume["prompt"] and resume["decided_gates"] == [gate.id]
    used = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/gate_used"]
    assert used and used[0]["gate_id"] == gate.id
    assert run_process_ids(gate.run_id) == []


async def _pending_gate(store: Store) -> GateRecord:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            gates = await GateLedger(store).list(status="pending")
        except Exception:  # the database is being created by the run
            gates = []
        if gates:
            return gates[0]
        await asyncio.sleep(0.1)
    pytest.fail("no gate opened")


def test_baton_run_in_a_terminal_asks_and_runs_the_approved_command(baton: BatonCLI, repo: Path) -> None:
    args = ("run", "go", "--repo", str(repo), "--scenario", "needs-approval")
    session = run_in_terminal(baton, args, [("approve?", "y")])
    assert session.answered == 1 and "touch approved.txt" in session.shown, session.describe()
    assert "[y]es / [n]o / [e]dit / [a]lways" in session.shown
    assert "allow Bash(touch approved.txt:*) for the rest of this run" in session.shown
    assert session.returncode == 0, session.describe()
    assert (repo / "approved.txt").exists()
    assert "by terminal" in session.shown  # the gate.resolved line names who decided


def test_a_gate_decided_elsewhere_ends_the_question_in_the_terminal(baton: BatonCLI, repo: Path) -> None:
    async def approve() -> None:  # through the store, as `baton approve` does
        settings = Settings.load(
            {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(baton.home), "PATH": os.environ["PATH"]}
        )
        async with Store.open(settings.resolved_database_url) as store:
            gate = await _pending_gate(store)
            binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
            await GateLedger(store).decide(gate.id, {"decision": "approve", **binding}, decided_by="reviewer")

    def approve_from_another_shell() -> None:
        asyncio.run(approve())

    args = ("run", "go", "--repo", str(repo), "--scenario", "needs-approval")
    session = run_in_terminal(baton, args, [("approve?", approve_from_another_shell)])
    assert session.returncode == 0 and session.answered == 1, session.describe()
    assert (repo / "approved.txt").exists()
    assert "was decided by reviewer" in session.shown  # nothing was typed: the question ended by itself


def test_an_edit_at_the_terminal_for_codex_is_refused_and_the_gate_asked_again(baton: BatonCLI, repo: Path) -> None:
    # codex cannot apply an edit: the terminal says so and asks again with the other choices
    args = ("run", "go", "--repo", str(repo), "--scenario", "needs-approval", "--agent", "codex")
    replies = [("approve?", "e"), ("new command: ", "touch edited.txt"), ("[y]es / [n]o / [a]lways", "y")]
    session = run_in_terminal(baton, args, replies)
    assert session.returncode == 0 and session.answered == 3, session.describe()
    assert "edit_not_supported" in session.shown and "codex cannot run an edited call" in session.shown
    assert (repo / "approved.txt").exists() and not (repo / "edited.txt").exists()
