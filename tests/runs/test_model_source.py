"""``RunSpec(scenario=…)``: the Python API runs an agent on baton's scripted model with no model
credentials configured, records the run's ``model_source``, and refuses an unknown scenario
before recording anything (baton.runs.model_source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.config import Settings
from baton.errors import RefusedError, UsageError
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.claude


async def test_a_run_on_a_scenario_needs_no_credentials_and_records_its_model_source(
    settings: Settings, repo: Path
) -> None:
    assert settings.anthropic_api_key is None
    async with Baton(settings) as baton:
        outcome = await baton.run(RunSpec(prompt="go", repo=repo, scenario="plain"))
        record = await baton.store.get_run(outcome.run_id)
        entries = await baton.log.read(outcome.run_id)
    assert outcome.status == "finished", outcome
    assert outcome.total_cost_usd is not None and outcome.total_cost_usd > 0
    assert record.request is not None and record.request["model_source"] == {"kind": "scenario", "scenario": "plain"}
    [started] = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/run_started"]
    assert started["model_source"] == {"kind": "scenario", "scenario": "plain"}
    assert not any("scripted-" in str(entry["payload"]) for entry in entries)  # its key is redacted


async def test_an_unknown_scenario_and_a_missing_key_are_refused_before_a_run_is_recorded(
    settings: Settings, repo: Path
) -> None:
    async with Baton(settings) as baton:
        with pytest.raises(UsageError) as unknown:
            await baton.start(RunSpec(prompt="go", repo=repo, scenario="no-such-scenario"))
        with pytest.raises(RefusedError) as no_key:  # a real endpoint still needs its key
            await baton.start(RunSpec(prompt="go", repo=repo))
        assert await baton.store.list_runs() == []
    assert unknown.value.code == "invalid_argument" and "no-such-scenario" in unknown.value.message
    assert no_key.value.code == "model_credentials_missing"
