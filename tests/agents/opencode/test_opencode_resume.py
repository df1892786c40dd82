"""Resuming an OpenCode run (opencode-ai 1.18.33 offers ``session/resume``): the run continuing a
finished one resumes OpenCode's own session from the copied agent home; the model gets the first
turn back and nothing of it is projected again. OpenCode's ``usage_update.cost`` is its session's
total, so the continuing run's ``total_cost_usd`` includes the first run's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import ANTHROPIC_KEY

from baton.config import Settings
from baton.events.project import project
from baton.runs import Baton, RunSpec
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow(seconds=25)]  # two OpenCode starts, 5-10 s each


async def test_an_opencode_run_continues_through_session_resume(settings: Settings, repo: Path) -> None:
    spec = RunSpec(prompt="go", repo=repo, agent="opencode", permission_mode="acceptEdits", allow=("Bash",))
    with ScriptedModelServer("write-and-run") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=ANTHROPIC_KEY)
        async with Baton(configured) as baton:
            first = await baton.run(spec)
            second = await (await baton.resume(first.run_id, "[scenario:plain] again")).wait()
            entries = await baton.log.read(second.run_id)
        last_request = server.requests[-1].body
    assert first.status == second.status == "finished", (first, second)
    methods = [e["method"] for e in entries if e["direction"] == "to_agent"]
    assert "session/resume" in methods and "session/new" not in methods
    [resumed] = [e["payload"]["params"] for e in entries if e["method"] == "_baton/resume"]
    assert resumed["path"] == "native"
    assert "echo hi" in json.dumps(last_request)
    events = project(entries)
    assert not [e for e in events if e["type"].startswith(("command.", "file."))]
    assert first.total_cost_usd is not None and second.total_cost_usd is not None
    assert second.total_cost_usd > first.total_cost_usd  # the session's total, not the run's
