"""``mcp`` in ``POST /v1/runs``: a server baton.toml names may be asked for by any writer; a
command or a URL (code baton runs, a host it reaches), or a name baton.toml does not know, needs
the ``admin`` scope (``require_acting_field``). A run started over HTTP calls its server."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from tests.mcp.conftest import mcp_agent_entry, mcp_test_config
from tests.server._server import KeyPair, RunningServer, make_key_pair, running_server, sign

from baton.agents.registry import AGENTS
from baton.config import Settings
from baton.server import ServerConfig

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def key() -> KeyPair:
    return make_key_pair()


@pytest.fixture
def server(tmp_path: Path, key: KeyPair, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    entry = mcp_agent_entry()
    monkeypatch.setitem(AGENTS, entry.name, entry)
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}
    )
    settings = replace(settings, mcp_servers=(mcp_test_config(),), openai_api_key="sk-scripted-openai-key-0123456789")
    config = ServerConfig(jwt_public_keys=(key.write_public(tmp_path / "k.pem"),), jwt_issuer="https://issuer.example")
    with running_server(settings, config) as running:
        yield running


def bearer(key: KeyPair, scope: str) -> dict[str, str]:
    signed = sign(key, sub="mcp-" + scope.replace(" ", "-").replace(":", ""), scope=scope, iss="https://issuer.example")
    return {"Authorization": f"Bearer {signed}"}


def post(server: RunningServer, headers: dict[str, str], **body: object) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/runs", json=body, headers=headers, timeout=30)


def events_when_ended(server: RunningServer, headers: dict[str, str], run_id: str) -> list[dict[str, object]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = httpx.get(f"{server.base_url}/v1/runs/{run_id}", headers=headers, timeout=10).json()
        if run["status"] in ("finished", "failed", "cancelled"):
            response = httpx.get(f"{server.base_url}/v1/runs/{run_id}/events", headers=headers, timeout=30)
            lines = response.text.splitlines()  # SSE: the stream of an ended run ends with its last event
            return [json.loads(line.removeprefix("data:")) for line in lines if line.startswith("data:")]
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not end")


def test_a_configured_server_needs_no_admin_and_the_run_calls_it(
    server: RunningServer, key: KeyPair, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    writer = bearer(key, "runs:write runs:read")
    body = {"prompt": 'call t echo {"text": "over http"}', "repo": str(repo), "agent": mcp_agent()}
    started = post(server, writer, **body, mcp=["t"], allow=["mcp__t__echo"], sandbox="bwrap")
    assert started.status_code == 201, started.text
    events = events_when_ended(server, writer, started.json()["id"])
    [finished] = [event["data"] for event in events if event["type"] == "mcp.finished"]
    assert finished["output"] == "echo: over http" and finished["is_error"] is False


@pytest.mark.parametrize("entry", ["x=python3 -c pass", "x=https://mcp.example/mcp", "unknown"])
def test_a_command_a_url_or_an_unknown_name_needs_the_admin_scope(
    server: RunningServer, key: KeyPair, repo: Path, entry: str
) -> None:
    refused = post(server, bearer(key, "runs:write"), prompt="go", repo=str(repo), mcp=[entry])
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "scope_missing" and error["message"].startswith("mcp:"), error
    passed = post(server, bearer(key, "runs:write admin"), prompt="go", repo=str(repo), mcp=[entry])
    assert passed.json().get("error", {}).get("code") != "scope_missing", passed.text  # past the rule
