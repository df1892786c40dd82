"""REST, errors and limits of a real server on loopback (no agent runs here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.server._server import RunningServer, running_server

from baton.config import Settings
from baton.errors import CODES, UsageError
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.executors import this_executor_id
from baton.server import HTTP_STATUS, ServerConfig, create_app
from baton.store import RunRecord


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server for the module: these tests only add runs and read what they added."""
    home = tmp_path_factory.mktemp("server") / "baton-home"
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home), "PATH": os.environ.get("PATH", "")}
    )
    with running_server(settings, ServerConfig(max_body_bytes=4096)) as running:
        yield running


@pytest.fixture
def client(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as client:
        yield client


def stored_run(server: RunningServer, owner: str | None = "local", status: str | None = None) -> RunRecord:
    record = server.call(lambda: server.baton.store.create_run(agent="claude", owner=owner, repo="/tmp/x"))
    steps = {None: (), "queued": (), "running": ("running",), "cancelled": ("cancelled",)}.get(status)
    for step in steps if steps is not None else ("running", status):  # by allowed moves (baton.store.transitions)
        record = server.call(lambda run_id=record.id, step=step: server.baton.store.update_run(run_id, status=step))
    return record


def test_every_error_code_has_an_http_status() -> None:
    assert set(HTTP_STATUS) >= CODES
    assert HTTP_STATUS["run_not_found"] == 404 and HTTP_STATUS["request_invalid"] == 422
    assert HTTP_STATUS["token_expired"] == 401 and HTTP_STATUS["scope_missing"] == 403
    assert HTTP_STATUS["rate_limited"] == 429 and HTTP_STATUS["body_too_large"] == 413


def test_health_needs_no_token(server: RunningServer) -> None:
    response = httpx.get(server.base_url + "/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": "0.1.0", "database": "ok"}


def test_the_local_token_is_private_and_required(server: RunningServer) -> None:
    token_file = server.state.settings.home / "api-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    missing = httpx.get(server.base_url + "/v1/runs")
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "token_missing"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.get(server.base_url + "/v1/runs", headers={"Authorization": "Bearer baton-local-not-it"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "token_invalid"
    basic = httpx.get(server.base_url + "/v1/runs", headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert basic.json()["error"]["code"] == "token_missing"


def test_without_keys_only_loopback_is_served(settings: Settings) -> None:
    with pytest.raises(UsageError) as refused:
        create_app(settings, ServerConfig(host="0.0.0.0"))
    assert refused.value.code == "invalid_argument"


def test_runs_are_listed_and_paginated(server: RunningServer, client: httpx.Client) -> None:
    mine = [stored_run(server) for _ in range(4)]
    mine.append(stored_run(server, owner="someone-else"))  # the local token is the machine's owner: admin
    finished = stored_run(server, status="finished")
    everything = client.get("/v1/runs", params={"limit": 1000}).json()
    assert everything["next_cursor"] is None
    every_id = [run["id"] for run in everything["runs"]]
    ours = [run.id for run in [*mine, finished]]
    assert [run_id for run_id in every_id if run_id in ours] == ours  # oldest first
    seen: list[str] = []
    cursor = None
    while True:
        page = client.get("/v1/runs", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        assert len(page["runs"]) <= 2
        seen += [run["id"] for run in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == every_id
    only_finished = client.get("/v1/runs", params={"status": "finished", "limit": 1000}).json()["runs"]
    assert {run["status"] for run in only_finished} == {"finished"}
    [ours_finished] = [run for run in only_finished if run["id"] == finished.id]
    assert ours_finished == finished.to_dict() | {"status": "finished", "status_reason": None}
    bad = client.get("/v1/runs", params={"status": "sleeping"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "request_invalid"
    assert bad.json()["error"]["message"].startswith("status:")


def test_get_run_returns_the_run_object(server: RunningServer, client: httpx.Client) -> None:
    record = stored_run(server)
    response = client.get(f"/v1/runs/{record.id}")
    assert response.status_code == 200
    assert response.json() == record.to_dict()
    assert set(response.json()) == {
        "id", "task_id", "agent", "model", "permission_mode", "run_mode", "status", "status_reason",
        "created_at", "finished_at", "total_cost_usd", "error_code", "error_message", "repo", "workspace",
    }  # fmt: skip
    assert response.json()["workspace"] == {"kind": "in-place", "path": record.repo, "base_commit": None,
                                            "branch": None, "head_commit": None, "pull_request_url": None}  # fmt: skip
    missing = client.get("/v1/runs/run_nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"


def test_bad_run_requests_name_the_field(client: httpx.Client, repo: Path) -> None:
    cases = [
        ({"repo": str(repo), "prompt": "go", "permission_mode": "yolo"}, "permission_mode"),
        ({"repo": str(repo), "prompt": "go", "promt": "typo"}, "promt"),
        ({"repo": str(repo), "prompt": "go", "budget": {"usd": -1}}, "budget.usd"),
        ({"repo": str(repo), "prompt": "go", "budget": {"turns": 0}}, "budget.turns"),
        ({"repo": str(repo), "prompt": "go", "budget": {"seconds": -1}}, "budget.seconds"),
        ({"repo": str(repo), "prompt": "go", "allow": "Bash"}, "allow"),
        ({"repo": str(repo)}, "prompt"),
        ({"prompt": "go"}, "repo"),
        ({"prompt": "go", "repo": "relative/dir"}, "repo"),
        ({"repo": str(repo), "prompt": "go", "sandbox": "nothing"}, "sandbox"),
        ({"repo": str(repo), "prompt": "go", "allow_net": "pypi.org"}, "allow_net"),
    ]
    for body, field in cases:
        response = client.post("/v1/runs", json=body)
        assert response.status_code == 422, (body, response.text)
        error = response.json()["error"]
        assert error["code"] == "request_invalid"
        assert error["message"].startswith(f"{field}:"), (body, error)
    not_json = client.post("/v1/runs", content=b"{not json", headers={"content-type": "application/json"})
    assert not_json.status_code == 422 and not_json.json()["error"]["code"] == "request_invalid"
    as_text = client.post("/v1/runs", content=b'{"prompt": "go"}', headers={"content-type": "text/plain"})
    assert as_text.status_code == 422
    assert as_text.json()["error"]["message"] == "body: must be a JSON object, sent as Content-Type: application/json"
    array = client.post("/v1/runs", json=[1, 2])
    assert array.status_code == 422 and array.json()["error"]["message"].startswith("body: must be a JSON object")


def test_a_missing_repository_and_missing_credentials_are_refused(
    client: httpx.Client, tmp_path: Path, repo: Path
) -> None:
    response = client.post("/v1/runs", json={"prompt": "go", "repo": str(tmp_path / "nowhere")})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_argument"
    response = client.post("/v1/runs", json={"prompt": "go", "repo": str(repo)})
    assert response.status_code == 503 and response.json()["error"]["code"] == "model_credentials_missing"


def test_a_body_over_the_limit_is_refused(server: RunningServer, client: httpx.Client, repo: Path) -> None:
    huge = {"prompt": "x" * 10_000, "repo": str(repo)}
    response = client.post("/v1/runs", json=huge)
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"prompt": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}'

    streamed = client.post("/v1/runs", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body_too_large"
    record = stored_run(server)
    rpc = client.post(f"/v1/runs/{record.id}/command", content=chunks())
    assert rpc.status_code == 413


def test_json_rpc_errors_come_back_with_http_200(server: RunningServer, client: httpx.Client) -> None:
    record = stored_run(server, status="running")
    url = f"/v1/runs/{record.id}/command"

    def call(body: bytes | dict[str, object]) -> dict[str, object]:
        response = client.post(url, content=body) if isinstance(body, bytes) else client.post(url, json=body)
        assert response.status_code == 200, response.text
        reply: dict[str, object] = response.json()
        assert reply["jsonrpc"] == "2.0"
        return reply

    assert call(b"{nope")["error"] == {"code": -32700, "message": "Parse error: the body is not JSON"}
    assert call(b"[]")["error"]["code"] == -32600  # type: ignore[index]
    assert call({"jsonrpc": "1.0", "id": 1, "method": "cancel"})["error"]["code"] == -32600  # type: ignore[index]
    unknown = call({"jsonrpc": "2.0", "id": 7, "method": "explode"})
    assert unknown["id"] == 7 and unknown["error"]["code"] == -32601  # type: ignore[index]
    bad = call({"jsonrpc": "2.0", "id": "a", "method": "user_message", "params": {"text": "hi"}})
    assert bad["id"] == "a" and bad["error"]["code"] == -32602  # type: ignore[index]
    bad_mode = call({"jsonrpc": "2.0", "id": 2, "method": "set_permission_mode", "params": {"permission_mode": "x"}})
    assert bad_mode["error"]["code"] == -32602  # type: ignore[index]
    not_object = call({"jsonrpc": "2.0", "id": 3, "method": "cancel", "params": [1]})
    assert not_object["error"]["code"] == -32602  # type: ignore[index]


def test_commands_go_through_the_inbox_and_its_refusals(server: RunningServer, client: httpx.Client) -> None:
    """Every command is ``post_command``: queued in the durable inbox, or refused with its code."""
    executor = this_executor_id()  # the run looks executed by a live process (this one)

    def run(status: str, run_mode: str = "interactive") -> RunRecord:
        async def make() -> RunRecord:
            store = server.baton.store
            record = await store.create_run(agent="claude", owner="local", repo="/tmp/x", run_mode=run_mode)
            if status not in ("queued", "running", "cancelled"):  # by allowed moves (baton.store.transitions)
                await store.update_run(record.id, status="running")
            return await store.update_run(record.id, status=status, executor_id=executor)

        return server.call(make)

    def command(record: RunRecord, method: str, params: dict[str, object] | None = None) -> dict[str, object]:
        body: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            body["params"] = params
        response = client.post(f"/v1/runs/{record.id}/command", json=body)
        assert response.status_code == 200, response.text
        reply: dict[str, object] = response.json()
        return reply

    def refusal(reply: dict[str, object]) -> str:
        error = reply["error"]
        assert isinstance(error, dict) and error["code"] == -32000, reply
        return str(error["data"]["code"])

    running = run("running")
    queued = command(running, "user_message", {"content": "hi"})
    assert queued["result"] == {"status": "queued", "inbox_id": queued["result"]["inbox_id"]}  # type: ignore[index]
    assert command(running, "set_permission_mode", {"permission_mode": "plan"})["result"]["status"] == "queued"  # type: ignore[index]
    assert command(running, "cancel", {"reason": "enough"})["result"]["status"] == "queued"  # type: ignore[index]
    pending = server.call(lambda: server.baton.store.inbox_pending(running.id))
    assert [(item["kind"], item["payload"]) for item in pending] == [
        ("user_message", {"content": "hi"}),
        ("set_permission_mode", {"permission_mode": "plan"}),
        ("cancel", {"reason": "enough"}),
    ]
    notification = client.post(f"/v1/runs/{running.id}/command", json={"jsonrpc": "2.0", "method": "close"})
    assert notification.status_code == 204 and notification.content == b""
    background = run("running", run_mode="background")
    assert refusal(command(background, "user_message", {"content": "hi"})) == "run_not_interactive"
    assert refusal(command(background, "close")) == "run_not_interactive"
    assert refusal(command(run("finished"), "cancel")) == "run_not_running"
    assert refusal(command(run("paused"), "user_message", {"content": "hi"})) == "run_paused"
    orphan = server.call(
        lambda: server.baton.store.create_run(agent="claude", owner="local", run_mode="interactive", repo="/tmp/x")
    )
    orphan = server.call(lambda: server.baton.store.update_run(orphan.id, status="running"))
    # Nobody executes it (no executor): nothing would read a message.
    assert refusal(command(orphan, "user_message", {"content": "hi"})) == "run_not_running"
    # The local token has every scope, admin included.
    bypass = command(running, "set_permission_mode", {"permission_mode": "bypassPermissions"})
    assert bypass["result"]["status"] == "queued"  # type: ignore[index]


def test_a_cancel_ends_a_parked_run_at_once(server: RunningServer, client: httpx.Client) -> None:
    """A parked run (paused on a pending gate, no process executes it) is cancelled by the
    command itself: nobody is left to take it from the inbox (baton.runs.cancelling)."""

    async def park() -> tuple[RunRecord, GateRecord]:
        store = server.baton.store
        record = await store.create_run(agent="claude", owner="local", repo="/tmp/x")
        gate, _ = await GateLedger(store).open(
            record.id, "tool", summary="Bash: rm -rf one", tool_name="Bash", bound_call_id="toolu_1",
            bound_input_hash="h-1", input={"command": "rm -rf one"},
        )  # fmt: skip
        await store.update_run(record.id, status="running", status_reason="started")
        return await store.update_run(record.id, status="paused", status_reason=gate.id, executor_id=None), gate

    record, gate = server.call(park)
    body = {"jsonrpc": "2.0", "id": 1, "method": "cancel", "params": {"reason": "not today"}}
    reply = client.post(f"/v1/runs/{record.id}/command", json=body).json()
    assert reply["result"]["status"] == "cancelled", reply
    assert client.get(f"/v1/runs/{record.id}").json()["status"] == "cancelled"
    denied = server.call(lambda: GateLedger(server.baton.store).get(gate.id))
    assert denied.status == "denied" and denied.decided_by == "cancel"
    again = client.post(f"/v1/runs/{record.id}/command", json=body).json()
    assert again["error"]["data"]["code"] == "run_not_running"


def test_openapi_publishes_the_models(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    for name in ("Run", "RunList", "CreateRunRequest", "Budget", "ErrorResponse", "Health"):
        assert name in schemas
    paths = document["paths"]
    assert {"/health", "/v1/runs", "/v1/runs/{run_id}", "/v1/runs/{run_id}/events", "/v1/runs/{run_id}/command"} <= set(
        paths
    )
    command_body = paths["/v1/runs/{run_id}/command"]["post"]["requestBody"]["content"]["application/json"]
    assert command_body["schema"]["properties"]["method"]["enum"] == ["user_message", "cancel", "close",
                                                                     "set_permission_mode"]  # fmt: skip


def test_unknown_paths_answer_in_the_error_shape(client: httpx.Client) -> None:
    response = client.get("/v2/nothing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "request_invalid"


def test_settings_come_from_the_environment(settings: Settings) -> None:
    roots = "/a" + os.pathsep + "/b"
    environ = {"BATON_SSE_QUEUE_SIZE": "7", "BATON_JWT_AUDIENCE": "aud-x", "BATON_WORKSPACE_ROOTS": roots}
    config = ServerConfig.load(settings, environ, port=9)
    assert config.sse_queue_size == 7 and config.jwt_audience == "aud-x" and config.port == 9
    assert config.workspace_roots == (Path("/a"), Path("/b"))
    with pytest.raises(UsageError):
        ServerConfig.load(settings, {"BATON_SSE_QUEUE_SIZE": "many"})


def test_public_names() -> None:
    import baton.server

    for name in baton.server.__all__:
        assert getattr(baton.server, name) is not None
    assert {"create_app", "BatonServer", "ServerConfig", "HTTP_STATUS"} <= set(baton.server.__all__)


def test_tasks_are_stored_read_back_and_name_the_defaults_of_a_run(
    server: RunningServer, client: httpx.Client, repo: Path
) -> None:
    created = client.post(
        "/v1/tasks", json={"prompt": "fix the tests", "repo": str(repo), "title": "t", "metadata": {"ticket": 7}}
    )
    assert created.status_code == 201, created.text
    task = created.json()
    assert task["id"].startswith("task_") and task["metadata"] == {"ticket": 7}
    assert task == {**task, "prompt": "fix the tests", "repo": str(repo.resolve()), "title": "t"}
    assert client.get(f"/v1/tasks/{task['id']}").json() == task
    missing = client.get("/v1/tasks/task_nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "task_not_found"
    # A run of the task takes its prompt and repository; with no model credentials here it is
    # refused only once everything else is checked.
    started = client.post("/v1/runs", json={"task_id": task["id"]})
    assert started.status_code == 503 and started.json()["error"]["code"] == "model_credentials_missing"
    unknown = client.post("/v1/runs", json={"task_id": "task_nope"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "task_not_found"
    for body, field in [
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "repo": "relative"}, "repo"),
        ({"prompt": "x", "owner": "mallory"}, "owner"),
        ({"prompt": "x", "metadata": [1]}, "metadata"),
    ]:
        refused = client.post("/v1/tasks", json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["error"]["message"].startswith(f"{field}:"), refused.text


def test_huge_headers_are_refused_with_431(server: RunningServer) -> None:
    headers = {**server.headers(), "X-Padding": "p" * (server.state.config.max_header_bytes + 10)}
    response = httpx.get(server.base_url + "/v1/runs", headers=headers)
    assert response.status_code == 431
    assert response.json()["error"]["code"] == "headers_too_large"
    many = {**server.headers(), **{f"X-H{index}": "v" * 200 for index in range(400)}}
    assert httpx.get(server.base_url + "/v1/runs", headers=many).status_code == 431
    assert httpx.get(server.base_url + "/v1/runs", headers=server.headers()).status_code == 200


def test_a_cassette_over_http_must_be_inside_baton_home_cassettes(
    client: httpx.Client, server: RunningServer, repo: Path
) -> None:
    for field in ("record", "replay"):
        for outside in ("../escape.jsonl", "/etc/passwd", ""):
            body = (
                {"prompt": "go", "repo": str(repo), field: outside}
                if outside
                else {"prompt": "go", "repo": str(repo), field: "."}
            )
            response = client.post("/v1/runs", json=body)
            assert response.status_code == 400, (field, outside, response.text)
            error = response.json()["error"]
            assert error["code"] == "invalid_argument" and "cassettes" in error["message"]
    missing = client.post("/v1/runs", json={"prompt": "go", "repo": str(repo), "replay": "none.jsonl"})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "cassette_invalid"
    assert str(server.state.settings.home / "cassettes" / "none.jsonl") in missing.json()["error"]["message"]
