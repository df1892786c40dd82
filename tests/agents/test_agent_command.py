"""``baton run --agent-cmd "CMD ARGS"``: any ACP agent, refused unless its permissions are trusted.

The agent is ``acp_script_agent.py ask``: it writes ``unasked.txt`` without asking anyone, then
asks permission for ``touch asked.txt`` (options ``yes``/``no``) and runs it when allowed.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import SCRIPT, permission_answers, run_to_end
from tests.cli._baton_cli import invoke_in_process

from baton.agents.command import COMMAND_AGENT
from baton.config import Settings
from baton.errors import RefusedError
from baton.events.project import project
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.timeout(60)

COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(SCRIPT))} ask"


def test_an_agent_command_without_trust_is_not_enforceable(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for mode in ("default", "acceptEdits"):
        done = invoke_in_process(
            monkeypatch, tmp_path / "home", "run", "go", "--repo", str(repo), "--agent-cmd", COMMAND, "--mode", mode
        )
        assert done.returncode == 3, done
        assert done.stderr.startswith("baton: mode_not_enforceable: command cannot be made to ask"), done.stderr
    assert not (repo / "unasked.txt").exists()  # nothing was started


def test_a_trusted_agent_command_is_gated_on_what_it_asks(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["run", "go", "--repo", str(repo), "--agent-cmd", COMMAND, "--trust-agent-permissions", "--json"]
    done = invoke_in_process(monkeypatch, tmp_path / "home", *args, "--mode", "acceptEdits", "--allow", "Bash")
    assert done.returncode == 0, done
    assert "--trust-agent-permissions: only what" in done.stderr and "is gated" in done.stderr
    events = done.json_lines()
    assert [e["type"] for e in events if e["type"].startswith(("command", "task"))] == [
        "task.started",
        "command.started",
        "command.finished",
        "task.finished",
    ]
    started = events[0]["data"]
    assert started["agent"] == COMMAND_AGENT
    assert (repo / "asked.txt").exists()
    assert (repo / "unasked.txt").exists()  # not gated: the user trusted the agent


async def test_a_trusted_agent_command_asking_under_default_is_denied(settings: Settings, repo: Path) -> None:
    spec = RunSpec(
        prompt="go",
        repo=repo,
        agent=COMMAND_AGENT,
        agent_command=tuple(shlex.split(COMMAND)),
        trust_agent_permissions=True,
    )
    # What it asks opens a gate like any agent's; nobody decides, so it expires as a denial.
    done = await run_to_end(replace(settings, gate_expiry_seconds=0.5), spec)
    assert done.outcome.status == "finished", done.outcome
    [(_request, result)] = permission_answers(done.entries)
    assert result["outcome"] == {"outcome": "selected", "optionId": "no"}
    baton = result["_meta"]["baton"]
    assert (baton["decision"], baton["tool_name"]) == ("deny", "Bash")
    assert baton["bound_call_id"] == "call-1" and len(baton["bound_input_hash"]) == 64
    assert not (repo / "asked.txt").exists()
    opening = done.entries[0]["payload"]["params"]
    assert opening["trust_agent_permissions"] is True and opening["agent_command"][-1] == "ask"
    assert [e["type"] for e in project(done.entries)][-1] == "task.finished"


async def test_the_python_api_refuses_an_untrusted_agent_command(settings: Settings, repo: Path) -> None:
    async with Baton(settings) as baton:
        with pytest.raises(RefusedError) as refused:
            await baton.start(
                RunSpec(prompt="go", repo=repo, agent=COMMAND_AGENT, agent_command=tuple(shlex.split(COMMAND)))
            )
        assert await baton.store.list_runs() == []
    assert refused.value.code == "mode_not_enforceable"


def test_baton_resume_starts_the_command_the_run_recorded(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``--agent-cmd`` run continues with its own command and trust: ``baton resume`` needs
    neither flag again (the ``load`` script agent keeps its sessions under ``$HOME``)."""
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(SCRIPT))} load"
    home = tmp_path / "home"
    args = ["--agent-cmd", command, "--trust-agent-permissions", "--mode", "acceptEdits", "--allow", "Bash"]
    first = invoke_in_process(monkeypatch, home, "run", "first", "--repo", str(repo), *args, "--json")
    assert first.returncode == 0, first
    run_id = first.json_lines()[0]["run_id"]
    second = invoke_in_process(monkeypatch, home, "resume", run_id, "second", "--json")
    assert second.returncode == 0, second
    events = second.json_lines()
    assert events[0]["type"] == "task.started" and events[0]["run_id"] != run_id
    assert events[0]["data"]["agent"] == COMMAND_AGENT
    assert [e["data"]["text"] for e in events if e["type"] == "message" and e["data"]["role"] == "agent"] == [
        "turn 2: second"
    ]
    assert events[-1]["type"] == "task.finished" and events[-1]["data"]["total_cost_usd"] == 0.02


async def test_an_agent_that_ignores_the_interrupt_is_stopped_when_its_seconds_budget_runs_out(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that goes on after `session/cancel` (this one streams for 20 s reading nothing):
    the run does not wait for it past the interrupt's grace; the agent is stopped and the run
    parks on its resource_limit gate (never fail open)."""
    import baton.runs.executor
    from baton.agents.processes import run_process_ids
    from baton.gates.ledger import GateLedger

    monkeypatch.setattr(baton.runs.executor, "_INTERRUPT_WAIT_SECONDS", 0.5)
    spec = RunSpec(
        prompt="go",
        repo=repo,
        agent=COMMAND_AGENT,
        agent_command=(sys.executable, str(SCRIPT), "echo", "1000", "50"),
        trust_agent_permissions=True,
        budget_seconds=1,
    )
    async with Baton(settings) as api:
        handle = await api.start(spec)
        parked = await handle.wait(through_parks=False)
        [gate] = await GateLedger(api.store).list(run_id=handle.run_id)
        entries = await api.log.read(handle.run_id)
        assert run_process_ids(handle.run_id) == []
    assert parked.status == "paused" and parked.gate_id == gate.id, parked
    assert gate.kind == "resource_limit" and gate.input is not None and gate.input["limits"] == ["seconds"]
    [turn] = [e["payload"]["params"] for e in entries if e["method"] == "_baton/turn_complete"]
    assert turn["stop_reason"] == "cancelled" and turn["duration_ms"] is None  # the agent never ended it
    chunks = [e for e in entries if e["method"] == "session/update"]
    assert 0 < len(chunks) < 1000
