"""The mode matrix of docs/agents.md, proven command by command against the real codex-acp.

Each native setting of the registry's codex entry runs the same scripted turn (safe commands,
a writing command, patches inside the workspace and under ``.claude/``) with a recording
client: under ``ask-all`` every call reaches the client (baton's Gatekeeper), under ``auto``
none does. Then the judgement on policies, and the binding hashes of real proposals.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.agents.conftest import decisions, run_to_end, scripted_openai
from tests.agents.native import COMMANDS, EDIT, WRITES, bash, matrix_scenario, run_native

from baton.agents.registry import AGENTS, CODEX, bound_input_hash, choose_setting, codex_bound_input
from baton.config import Settings
from baton.errors import RefusedError
from baton.gates import Gatekeeper, Policy
from baton.runs import Baton, RunSpec
from baton.testing import Scenario

pytestmark = pytest.mark.timeout(60)

ASK_ALL = next(setting for setting in CODEX.settings if setting.name == "ask-all")
AUTO = next(setting for setting in CODEX.settings if setting.name == "auto")

MATRIX = matrix_scenario(*WRITES, EDIT, bash("echo hi"))


async def test_ask_all_sends_every_command_and_patch_to_the_gatekeeper(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(CODEX, ASK_ALL.config, MATRIX, workspace, tmp_path / "home")
    assert recording.stop_reason == "end_turn"
    kinds = [request["kind"] for request in recording.requests]
    assert recording.asked_commands()[:5] == COMMANDS
    assert kinds[5:8] == ["edit", "edit", "edit"]
    patched = [next(iter(request["rawInput"]["changes"])) for request in recording.requests[5:8]]
    assert patched == [
        str(workspace / "new.txt"),
        str(workspace / ".claude/settings.json"),
        str(workspace / "README.md"),
    ]
    assert recording.asked_commands()[8] == "echo hi"
    assert len(recording.requests) == 9
    # Approved by kind: Codex's allow_once option is `approved`, its reject option `abort`.
    for options in recording.options:
        assert ("approved", "allow_once") in options and ("abort", "reject_once") in options
    assert (workspace / "made.txt").exists() and (workspace / "new.txt").read_text() == "new\n"
    assert (workspace / "README.md").read_text() == "# b repository\n"
    # Binding: the same command proposed twice hashes the same; another command differs.
    hashes = [bound_input_hash(codex_bound_input(request)) for request in recording.requests]
    assert hashes[0] == hashes[8]
    assert len(set(hashes[:8])) == 8
    assert recording.requests[0]["rawInput"]["call_id"] != recording.requests[8]["rawInput"]["call_id"]


async def test_auto_runs_commands_and_patches_without_asking(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(CODEX, AUTO.config, MATRIX, workspace, tmp_path / "home")
    assert recording.stop_reason == "end_turn"
    assert recording.requests == []
    assert sorted(recording.ran_commands()) == sorted([*COMMANDS, "echo hi"])
    assert (workspace / "made.txt").exists()
    # Including baton's protected paths: .claude/ is written without a request.
    assert (workspace / ".claude" / "settings.json").read_text() == "{}\n"


def test_ask_all_is_chosen_for_every_mode_and_auto_never(tmp_path: Path) -> None:
    cases = [
        ("default", ()),
        ("plan", ()),
        ("acceptEdits", ("Bash",)),
        ("acceptEdits", ()),
        ("default", ("Bash", "Edit", "Write")),
    ]
    for mode, allow in cases:
        gatekeeper = Gatekeeper(Policy.build(mode, allow=allow), tmp_path)
        assert choose_setting(CODEX, gatekeeper).name == "ask-all", (mode, allow)


def test_a_policy_codex_would_bypass_is_refused_with_the_reason(tmp_path: Path) -> None:
    presets_only = replace(CODEX, settings=(AUTO,))  # what codex-acp's own session modes offer
    gatekeeper = Gatekeeper(Policy.build("acceptEdits", allow=["Bash"]), tmp_path)
    with pytest.raises(RefusedError) as refused:
        choose_setting(presets_only, gatekeeper)
    assert refused.value.code == "mode_not_enforceable"
    assert "patch files under .claude/ and .baton/" in refused.value.message
    assert "protected_path:.claude/settings.json" in refused.value.message
    assert "touch made.txt" not in refused.value.message  # Bash is allowed: that call is fine
    default = Gatekeeper(Policy.build("default"), tmp_path)
    with pytest.raises(RefusedError) as refused_default:
        choose_setting(presets_only, default)
    assert "`touch made.txt` (ask, mode:default)" in refused_default.value.message


async def test_a_refused_policy_starts_nothing(settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(AGENTS, "codex", replace(CODEX, settings=(AUTO,)))
    with scripted_openai(settings, "plain") as (configured, server):
        async with Baton(configured) as baton:
            with pytest.raises(RefusedError) as refused:
                await baton.start(RunSpec(prompt="go", repo=repo, agent="codex"))
            assert await baton.store.list_runs() == []
    assert refused.value.code == "mode_not_enforceable"
    assert server.requests == []


async def test_accept_edits_with_bash_allowed_runs_under_ask_all(settings: Settings, repo: Path) -> None:
    with scripted_openai(settings, "write-and-run") as (configured, _):
        spec = RunSpec(prompt="go", repo=repo, agent="codex", permission_mode="acceptEdits", allow=("Bash",))
        done = await run_to_end(configured, spec)
    assert done.outcome.status == "finished", done.outcome
    assert decisions(done.entries) == [
        ("allow", "mode:acceptEdits", "Write"),
        ("allow", "rule:Bash", "Bash"),
    ]
    assert (repo / "hello.txt").read_text() == "hello from baton\n"


async def test_without_the_prompt_rules_untrusted_runs_safe_commands_unasked(workspace: Path, tmp_path: Path) -> None:
    untrusted = replace(ASK_ALL.config, ask_for_safe_commands=False)
    two = Scenario.from_dict(
        {"steps": [{"tools": [{"name": "Bash", "input": {"command": c}}]} for c in ("echo hi", "touch made.txt")]},
        name="two",
    )
    recording = await run_native(CODEX, untrusted, two, workspace, tmp_path / "home")
    assert recording.asked_commands() == ["touch made.txt"]
    assert "echo hi" in recording.ran_commands()


async def test_model_selection_through_the_model_config_option(workspace: Path, tmp_path: Path) -> None:
    from baton.runs.executor import _select_model

    async def select(conn: Any, session: Any) -> None:
        offered = [o.model_dump(by_alias=True) for o in session.config_options]
        assert any(o["id"] == "model" and o["currentValue"] == "gpt-5.5" for o in offered)
        await _select_model(conn, session, "gpt-5.4")

    recording = await run_native(CODEX, ASK_ALL.config, "plain", workspace, tmp_path / "home", before_prompt=select)
    assert {r.body["model"] for r in recording.model_requests if r.path == "/v1/responses"} == {"gpt-5.4"}
