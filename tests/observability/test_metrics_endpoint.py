"""``GET /metrics`` on a real ``baton serve`` (loopback), parsed with prometheus_client's parser."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.server._server import running_server

from baton.config import Settings
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.claude, pytest.mark.timeout(90)]

MODEL_KEY = "sk-scripted-metrics-key-0123456789abcdef"


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_metrics_count_the_runs_this_server_executed(settings: Settings, repo: Path) -> None:
    with ScriptedModelServer("plain") as model:
        configured = replace(settings, anthropic_base_url=model.base_url, anthropic_api_key=MODEL_KEY)
        with running_server(configured) as server:
            async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
                ids = []
                for _ in range(2):
                    created = await client.post("/v1/runs", json={"prompt": "hi", "repo": str(repo)})
                    assert created.status_code == 201, created.text
                    run_id = created.json()["id"]
                    ids.append(run_id)
                    async with asyncio.timeout(60):
                        while True:
                            if (await client.get(f"/v1/runs/{run_id}")).json()["finished_at"] is not None:
                                break
                            await asyncio.sleep(0.05)
                answer = await client.get("/metrics")
                anonymous = await client.get("/metrics", headers={"Authorization": ""})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    found = samples(answer.text)
    assert found[("baton_runs_started_total", (("agent", "claude"),))] == 2
    assert found[("baton_runs_finished_total", (("agent", "claude"),))] == 2
    assert found[("baton_run_duration_seconds_count", (("agent", "claude"), ("status", "finished")))] == 2
    assert found[("baton_tokens_total", (("agent", "claude"), ("type", "output")))] > 0
    assert found[("baton_cost_usd_total", (("agent", "claude"),))] > 0
    assert found[("baton_runs_running", (("agent", "claude"),))] == 0  # both ended
    assert sum(v for (name, _labels), v in found.items() if name == "baton_log_entries_total") > 10
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "token_missing"
