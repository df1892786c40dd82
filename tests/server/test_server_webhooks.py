"""baton serve delivering webhooks: a real Claude Code run (scripted model) opens a gate, which is
approved over HTTP, and finishes; a receiver on loopback gets the signed ``gate.opened``,
``gate.resolved`` and ``run.finished`` (checked here as a receiver checks them)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from tests.notify._receiver import receiver
from tests.server._server import running_server

from baton.config import Settings, Webhook
from baton.runs.spec import RunSpec
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.claude, pytest.mark.timeout(120)]

MODEL_KEY = "sk-scripted-model-key-0123456789abcdef"
SECRET = "whsec-server-0123456789"


async def test_a_server_delivers_a_real_runs_gate_and_end(settings: Settings, repo: Path) -> None:
    with receiver() as hook, ScriptedModelServer("needs-approval") as model:
        configured = replace(
            settings,
            anthropic_base_url=model.base_url,
            anthropic_api_key=MODEL_KEY,
            notify_webhooks=(Webhook(url=hook.url, secret=SECRET),),
            notify_poll_seconds=0.1,
        )
        with running_server(configured) as server:
            spec = RunSpec(prompt="go", repo=repo, owner="local")
            handle = await server.acall(lambda: server.baton.start(spec))
            server.state.handles[handle.run_id] = handle
            (opened,) = await asyncio.to_thread(hook.wait_for, lambda r: len(r) >= 1, 60)
            gate = json.loads(opened.body)["gate"]
            async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=30) as client:
                decided = await client.post(
                    f"/v1/gates/{gate['id']}/decide",
                    json={"decision": "approve", "bound_call_id": gate["bound_call_id"],
                          "bound_input_hash": gate["bound_input_hash"]},
                )  # fmt: skip
                assert decided.status_code == 200, decided.text
            got = await asyncio.to_thread(hook.wait_for, lambda r: len(r) >= 3, 60)
            # A webhook is never the run's business: nothing of it is in the run's log.
            entries = server.call(lambda: server.baton.log.read(handle.run_id))
    assert [json.loads(request.body)["event"] for request in got] == ["gate.opened", "gate.resolved", "run.finished"]
    assert all(request.verified(SECRET) for request in got)
    assert not got[0].verified("another-secret-0123456789")
    assert gate["status"] == "pending" and gate["run_id"] == handle.run_id and "touch approved.txt" in gate["summary"]
    assert json.loads(got[1].body)["gate"]["decided_by"] == "local"
    finished = json.loads(got[2].body)["run"]
    assert (finished["id"], finished["status"], finished["agent"]) == (handle.run_id, "finished", "claude")
    assert (repo / "approved.txt").exists()
    logged = json.dumps(entries)
    assert SECRET not in logged and hook.url not in logged
