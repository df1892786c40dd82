"""What the web page needs from the API, on a real server with JWT keys: the gate stream across
a caller's runs (``GET /v1/gates/events``), run-list filters, newest first and summaries, and
sessions signed in with a JWT (its subject, its ``exp``, another subject's runs unseen)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.server._server import KeyPair, RunningServer, SseMessage, make_key_pair, running_server, sign, sse_messages
from tests.server.test_server_gates import binding, open_gate, run_of

from baton.config import Settings
from baton.server import ServerConfig

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def key() -> KeyPair:
    return make_key_pair()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, key: KeyPair) -> Iterator[RunningServer]:
    tmp_path = tmp_path_factory.mktemp("web-api")
    settings = Settings.load({"BATON_HOME": str(tmp_path / "baton-home"), "PATH": os.environ.get("PATH", "")})
    config = ServerConfig(jwt_public_keys=(key.write_public(tmp_path / "k.pem"),), sse_heartbeat_seconds=0.2)
    with running_server(settings, config) as running:
        yield running


def bearer(key: KeyPair, sub: str, scope: str = "runs:read runs:write gates:decide", **claims: Any) -> dict[str, str]:
    return {"Authorization": "Bearer " + sign(key, sub=sub, scope=scope, **claims)}


async def next_message(messages: Any) -> SseMessage:
    message: SseMessage = await asyncio.wait_for(anext(messages), 5)
    return message


async def test_the_gate_stream_sends_a_snapshot_then_each_change_of_the_callers_gates(
    server: RunningServer, key: KeyPair
) -> None:
    mine, theirs = run_of(server, "carol"), run_of(server, "dave")
    before = open_gate(server, mine, command="ls before")
    async with (
        httpx.AsyncClient(base_url=server.base_url, timeout=30) as client,
        client.stream("GET", "/v1/gates/events", headers=bearer(key, "carol")) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        messages = aiter(sse_messages(response))
        snapshot = await next_message(messages)
        assert snapshot.event == "snapshot" and snapshot.id is None
        assert [gate["id"] for gate in snapshot.data["gates"]] == [before.id]
        assert snapshot.data["gates"][0]["suggested_rule"] == "Bash(ls before:*)"
        open_gate(server, theirs, command="ls theirs")  # dave's: never sent to carol
        opened = open_gate(server, mine, command="ls after")
        # The new gate supersedes the older one of the run (another input): both are told.
        changes = {}
        while len(changes) < 2:
            message = await next_message(messages)
            assert message.event == "gate"
            changes[message.data["gate"]["id"]] = message.data["gate"]["status"]
        assert changes == {before.id: "superseded", opened.id: "pending"}
        decided = await client.post(
            f"/v1/gates/{opened.id}/decide",
            json={"decision": "approve", **binding(opened)},
            headers=bearer(key, "carol"),
        )
        assert decided.status_code == 200, decided.text
        message = await next_message(messages)
        assert message.data["gate"]["id"] == opened.id and message.data["gate"]["status"] == "approved"
    # A token limited to one run sees that run's gates only.
    limited = bearer(key, "carol", run_id=theirs)
    async with (
        httpx.AsyncClient(base_url=server.base_url, timeout=30) as client,
        client.stream("GET", "/v1/gates/events", headers=limited) as response,
    ):
        snapshot = await next_message(aiter(sse_messages(response)))
        assert snapshot.data["gates"] == []


def test_the_gate_stream_needs_a_token(server: RunningServer) -> None:
    refused = httpx.get(server.base_url + "/v1/gates/events")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "token_missing"


def test_the_run_list_filters_orders_and_summarises(server: RunningServer, key: KeyPair) -> None:
    first = run_of(server, "erin", agent="claude")
    second = run_of(server, "erin", agent="codex")
    third = run_of(server, "erin", agent="claude")
    open_gate(server, third, command="ls one")
    open_gate(server, third, command="ls one")  # the same input: both stay pending
    headers = bearer(key, "erin")

    def listed(**params: Any) -> dict[str, Any]:
        response = httpx.get(server.base_url + "/v1/runs", params=params, headers=headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    assert [run["id"] for run in listed()["runs"]] == [first, second, third]
    assert "summaries" not in listed()
    newest = listed(order="newest", limit=2)
    assert [run["id"] for run in newest["runs"]] == [third, second] and newest["next_cursor"] == second
    assert [run["id"] for run in listed(order="newest", cursor=second)["runs"]] == [first]
    assert [run["id"] for run in listed(agent="codex")["runs"]] == [second]
    assert listed(repo="/tmp/x", agent="claude", order="newest")["runs"][0]["id"] == third
    assert listed(repo="/elsewhere")["runs"] == []
    summaries = listed(summary="true")["summaries"]
    assert summaries[third] == {"pending_gates": 2, "input_tokens": 0, "output_tokens": 0, "prompt": None}
    assert summaries[first]["pending_gates"] == 0
    bad = httpx.get(server.base_url + "/v1/runs", params={"order": "sideways"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "request_invalid"


def test_summaries_add_up_the_reported_usage(server: RunningServer, key: KeyPair) -> None:
    run_id = run_of(server, "frank")

    async def log_usage() -> None:
        server.baton.log.open_run(run_id)
        for tokens in (100, 250):
            server.baton.log.append(
                run_id, "from_agent", "_baton/usage", {"jsonrpc": "2.0", "method": "_baton/usage",
                "params": {"usage": {"input_tokens": tokens, "output_tokens": tokens // 10}}},
            )  # fmt: skip
        await server.baton.log.flush()
        server.baton.log.close_run(run_id)

    server.call(log_usage)
    body = httpx.get(server.base_url + "/v1/runs?summary=true", headers=bearer(key, "frank")).json()
    assert body["summaries"][run_id] == {"pending_gates": 0, "input_tokens": 350, "output_tokens": 35, "prompt": None}


def test_summaries_give_the_first_line_of_what_each_run_was_asked(server: RunningServer, key: KeyPair) -> None:
    long = "Fix the failing test in calc.js " + "and explain why " * 20

    async def runs() -> list[str]:
        store = server.baton.store
        task = await store.create_task("the task's prompt\nmore", owner="ivan")
        titled = await store.create_task("the prompt", title="A titled task", owner="ivan")
        made = [
            await store.create_run(agent="claude", owner="ivan", request={"prompt": "\n  Add a README\nwith details"}),
            await store.create_run(agent="claude", owner="ivan", request={"prompt": long}),
            await store.create_run(agent="claude", owner="ivan", task_id=task.id),
            await store.create_run(agent="claude", owner="ivan", task_id=titled.id, request={"prompt": "own"}),
            await store.create_run(agent="claude", owner="ivan"),
        ]
        logged = made[-1].id  # a run with only its start logged (recorded before runs.request)
        server.baton.log.open_run(logged)
        started = {"jsonrpc": "2.0", "method": "_baton/run_started", "params": {"prompt": "Logged at the start"}}
        server.baton.log.append(logged, "baton", "_baton/run_started", started)
        await server.baton.log.flush()
        server.baton.log.close_run(logged)
        return [run.id for run in made]

    ids = server.call(runs)
    body = httpx.get(server.base_url + "/v1/runs?summary=true", headers=bearer(key, "ivan")).json()
    prompts = [body["summaries"][run_id]["prompt"] for run_id in ids]
    assert prompts[0] == "Add a README"
    assert len(prompts[1]) == 200 and prompts[1].endswith("…") and prompts[1].startswith("Fix the failing test")
    assert prompts[2:] == ["the task's prompt", "A titled task", "Logged at the start"]


def test_a_session_signed_in_with_a_jwt_is_its_subject_until_its_exp(server: RunningServer, key: KeyPair) -> None:
    mine, theirs = run_of(server, "grace"), run_of(server, "heidi")
    token = sign(key, sub="grace", scope="runs:read gates:decide", ttl=3)
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        signed = client.post("/v1/session", json={"token": token})
        assert signed.status_code == 201, signed.text
        session = signed.json()
        assert session["sub"] == "grace" and session["scopes"] == ["gates:decide", "runs:read"]
        assert client.get(f"/v1/runs/{mine}").status_code == 200
        hidden = client.get(f"/v1/runs/{theirs}")  # another subject's run: as if missing
        assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "run_not_found"
        assert [run["id"] for run in client.get("/v1/runs").json()["runs"]] == [mine]
        refused = client.post(
            "/v1/runs", json={"prompt": "x", "repo": "/tmp"}, headers={"X-CSRF-Token": session["csrf_token"]}
        )
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "scope_missing"
        assert client.get("/v1/session").json()["sub"] == "grace"
        session_id = client.cookies["baton_session"]
        time.sleep(3.2)  # the JWT's exp: the session ends with it (and the cookie's max-age)
        ended = httpx.get(server.base_url + "/v1/runs", headers={"Cookie": f"baton_session={session_id}"})
        assert ended.status_code == 401 and ended.json()["error"]["code"] == "session_expired"
    wrong = httpx.post(server.base_url + "/v1/session", json={"token": sign(make_key_pair(), sub="grace")})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "token_invalid"
    assert "set-cookie" not in wrong.headers
    empty = httpx.post(server.base_url + "/v1/session", content=json.dumps({"token": ""}))
    assert empty.status_code == 422
