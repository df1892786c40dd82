"""The gate in front of an untrusted repository's ``.baton/setup`` ([workspace] untrusted_setup =
"ask"): real git, real Claude Code on baton's scripted model, the Python API deciding.

Approved, the script the gate showed runs before the agent; denied, it is skipped and logged; a
binding to another script is refused; nobody deciding in the grace period parks the run, and its
resume after the approval runs the setup, then the agent."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from tests.conftest import make_git_repo
from tests.workspaces.conftest import load_settings

from baton.errors import BatonError
from baton.gates.handles import Gate
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.claude

WRITE = {"scenario": "write-prompt-file", "permission_mode": "acceptEdits"}
SCRIPT = "echo setting up\necho ran > made-by-setup.txt\n"


def _notes(entries: list[dict[str, object]], method: str) -> list[dict[str, object]]:
    return [entry["payload"]["params"] for entry in entries if entry["method"] == method]  # type: ignore[index]


async def _pending_gate(baton: Baton, run_id: str) -> Gate:
    for _ in range(3000):
        pending = await baton.gates(run_id=run_id, status="pending")
        if pending:
            [gate] = pending
            return gate
        await asyncio.sleep(0.01)
    raise AssertionError("no gate opened")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"README.md": "# r\n", ".baton/setup": SCRIPT})


@pytest.mark.slow(seconds=30)
async def test_an_approved_gate_runs_exactly_the_script_it_showed(tmp_path: Path, repo: Path) -> None:
    (repo / ".baton" / "setup").write_text("echo the working tree's copy never runs\n")  # uncommitted
    settings = load_settings(tmp_path / "home", workspace_untrusted_setup="ask", gate_grace_seconds=600.0)
    async with Baton(settings) as baton:
        handle = await baton.start(RunSpec(prompt="a.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        gate = await _pending_gate(baton, handle.run_id)
        record = gate.record
        assert record.kind == "tool" and record.tool_name == "baton_setup" and record.bound_call_id == "setup"
        assert record.input == {
            "path": ".baton/setup",
            "base_commit": (await baton.store.get_run(handle.run_id)).request["workspace"]["base_commit"],  # type: ignore[index]
            "sha256": hashlib.sha256(SCRIPT.encode()).hexdigest(),
            "script": SCRIPT,  # the base commit's, not the working tree's
        }
        for _ in range(3000):  # the gate is stored first, then the run is paused on it
            if (await baton.store.get_run(handle.run_id)).status == "paused":
                break
            await asyncio.sleep(0.01)
        assert (await baton.store.get_run(handle.run_id)).status_reason == record.id
        workspace = settings.workspace_dir(handle.run_id)
        assert not (workspace / "made-by-setup.txt").exists()  # nothing ran before the decision
        with pytest.raises(BatonError) as refused:  # an approval bound to another script
            await gate.approve(bound_call_id="setup", bound_input_hash="0" * 64)
        assert refused.value.code == "approval_binding_mismatch"
        await gate.approve()
        outcome = await handle.wait()
        log = [dict(e) for e in await baton.log.read(handle.run_id)]
    assert outcome.status == "finished", outcome
    assert (workspace / "made-by-setup.txt").read_text() == "ran\n"
    assert (workspace / "a.txt").is_file()  # then the agent did its task
    setup = _notes(log, "_baton/setup")
    assert setup[0] == {"status": "gated", "gate_id": record.id, "sha256": record.input["sha256"]}
    assert setup[1] == {"status": "started", "source": "approved", "command": ".baton/setup"}
    assert {"status": "output", "text": "setting up"} in setup and setup[-1]["status"] == "finished"
    methods = [entry["method"] for entry in log]
    assert methods.index("_baton/gate_resolved") < methods.index("_baton/setup", methods.index("_baton/gate_resolved"))
    assert methods.index("_baton/setup") < methods.index("session/prompt")


@pytest.mark.slow(seconds=30)
async def test_a_denied_gate_skips_the_setup_and_the_run_goes_on(tmp_path: Path, repo: Path) -> None:
    settings = load_settings(tmp_path / "home", workspace_untrusted_setup="ask", gate_grace_seconds=600.0)
    async with Baton(settings) as baton:
        handle = await baton.start(RunSpec(prompt="b.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        gate = await _pending_gate(baton, handle.run_id)
        await gate.deny(reason="not on my machine")
        outcome = await handle.wait()
        log = [dict(e) for e in await baton.log.read(handle.run_id)]
    assert outcome.status == "finished", outcome
    workspace = settings.workspace_dir(handle.run_id)
    assert not (workspace / "made-by-setup.txt").exists() and (workspace / "b.txt").is_file()
    setup = _notes(log, "_baton/setup")
    assert [note["status"] for note in setup] == ["gated", "skipped"]
    assert setup[-1]["gate_id"] == gate.id
    assert "was denied (not on my machine)" in str(setup[-1]["reason"])


@pytest.mark.slow(seconds=30)
async def test_the_default_skips_without_a_gate(tmp_path: Path, repo: Path) -> None:
    settings = load_settings(tmp_path / "home")
    assert settings.workspace_untrusted_setup == "skip"
    async with Baton(settings) as baton:
        outcome = await baton.run(RunSpec(prompt="c.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        gates = await baton.gates(run_id=outcome.run_id)
    assert outcome.status == "finished" and gates == []
    assert not (settings.workspace_dir(outcome.run_id) / "made-by-setup.txt").exists()


@pytest.mark.slow(seconds=40)
async def test_nobody_deciding_parks_the_run_and_its_resume_after_the_approval_sets_up(
    tmp_path: Path, repo: Path
) -> None:
    settings = load_settings(tmp_path / "home", workspace_untrusted_setup="ask", gate_grace_seconds=0.0)
    async with Baton(settings) as baton:
        started = await baton.start(RunSpec(prompt="d.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        parked = await started.wait(through_parks=False)
        assert parked.status == "paused" and parked.gate_id is not None, parked
        record = await baton.store.get_run(parked.run_id)
        assert record.status == "paused" and record.executor_id is None  # parked: no process holds it
        workspace = settings.workspace_dir(parked.run_id)
        assert not (workspace / "made-by-setup.txt").exists()
        gate = await baton.gate(parked.gate_id)
        await gate.approve()
    async with Baton(settings) as baton:  # another process, as after a restart
        handle = await baton.resume(parked.run_id, None, scenario="write-prompt-file")
        outcome = await handle.wait()
        log = [dict(e) for e in await baton.log.read(parked.run_id)]
        gates = await baton.gates(run_id=parked.run_id)
    assert outcome.status == "finished", outcome
    assert (workspace / "made-by-setup.txt").read_text() == "ran\n" and (workspace / "d.txt").is_file()
    assert [g.id for g in gates] == [parked.gate_id]  # the same gate, never a second one
    assert [note["status"] for note in _notes(log, "_baton/setup")][:2] == ["gated", "started"]
