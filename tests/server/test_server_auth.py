"""JWT RS256 against configured keys: every refusal has its code; runs belong to the token's sub."""

from __future__ import annotations

import base64
import hmac
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from fastapi.routing import APIRoute
from tests.server._server import KeyPair, RunningServer, make_key_pair, running_server, sign

from baton.config import Settings
from baton.errors import AuthError, UsageError
from baton.server import ServerConfig
from baton.server.app import http_telemetry
from baton.server.auth import JwtAuthenticator, load_public_keys
from baton.server.routing import direct_plan
from baton.store import RunRecord


@pytest.fixture(scope="module")
def keys() -> tuple[KeyPair, KeyPair, KeyPair]:
    return make_key_pair(), make_key_pair(), make_key_pair()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, keys: tuple[KeyPair, KeyPair, KeyPair]) -> Iterator[RunningServer]:
    """One server for the module; each test uses owners of its own."""
    tmp_path = tmp_path_factory.mktemp("jwt-server")
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "baton-home"), "PATH": os.environ.get("PATH", "")}
    )
    first, second, _stranger = keys
    jwks = {"keys": [jwt.algorithms.RSAAlgorithm.to_jwk(second.private.public_key(), as_dict=True) | {"kid": "k2"}]}
    (tmp_path / "rotation.json").write_text(json.dumps(jwks))
    config = ServerConfig(
        jwt_public_keys=(first.write_public(tmp_path / "k1.pem"), tmp_path / "rotation.json"),
        jwt_issuer="https://issuer.example",
    )
    with running_server(settings, config) as running:
        yield running


def token(key: KeyPair, **claims: object) -> str:
    claims.setdefault("kid", "k1")
    claims.setdefault("iss", "https://issuer.example")
    return sign(key, **claims)  # type: ignore[arg-type]


def get(server: RunningServer, path: str, bearer: str | None) -> httpx.Response:
    if bearer == "Basic":
        return httpx.get(server.base_url + path, headers={"Authorization": "Basic YTpi"}, timeout=10)
    headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else {}
    return httpx.get(server.base_url + path, headers=headers, timeout=10)


def stored_run(server: RunningServer, owner: str) -> RunRecord:
    return server.call(lambda: server.baton.store.create_run(agent="claude", owner=owner, repo="/tmp/x"))


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_every_bad_token_is_refused_with_its_code(server: RunningServer, keys: tuple[KeyPair, ...]) -> None:
    first, second, stranger = keys
    now = int(time.time())
    claims = {"sub": "alice", "aud": "baton", "exp": now + 600, "scope": "runs:read"}
    public_pem = first.public_pem.decode()
    cases: list[tuple[str | None, str]] = [
        (None, "token_missing"),
        ("Basic", "token_missing"),
        ("not-a-jwt", "token_invalid"),
        (_b64({"alg": "none", "typ": "JWT"}) + "." + _b64(claims) + ".", "token_algorithm"),
        # HS256 "signed" with the server's public key: the classic key-confusion attack.
        (
            _b64({"alg": "HS256", "typ": "JWT", "kid": "k1"})
            + "."
            + _b64(claims)
            + "."
            + base64.urlsafe_b64encode(hmac.new(public_pem.encode(), b"x", "sha256").digest()).rstrip(b"=").decode(),
            "token_algorithm",
        ),
        (token(first, ttl=-120), "token_expired"),
        (token(first, nbf=now + 3600), "token_not_yet_valid"),
        (token(first, aud="someone-else"), "token_audience"),
        (token(first, aud=None), "token_audience"),
        (token(first, kid="k9"), "token_kid"),
        (token(first, kid=None), "token_kid"),  # two keys configured: kid is required
        (token(stranger), "token_invalid"),  # signed by a key baton does not know
        (token(second, kid="k1"), "token_invalid"),  # the wrong key for that kid
        (token(first, iss="https://evil.example"), "token_invalid"),
        (token(first, sub=None), "token_invalid"),
        (token(first, sub=""), "token_invalid"),
    ]
    for bearer, code in cases:
        response = get(server, "/v1/runs", bearer)
        assert response.status_code == 401, (code, response.text)
        assert response.json()["error"]["code"] == code, (bearer, response.text)
    assert get(server, "/v1/runs", token(first)).status_code == 200
    assert get(server, "/v1/runs", token(second, kid="k2")).status_code == 200  # the JWKS key


def test_scopes_are_checked(server: RunningServer, keys: tuple[KeyPair, ...], repo: Path) -> None:
    first = keys[0]
    reader = token(first, scope="runs:read")
    response = httpx.post(
        server.base_url + "/v1/runs",
        json={"prompt": "go", "repo": str(repo)},
        headers={"Authorization": f"Bearer {reader}"},
    )
    assert response.status_code == 403 and response.json()["error"]["code"] == "scope_missing"
    writer = token(first, sub="alice-scopes", scope="runs:write")
    assert get(server, "/v1/runs", writer).json()["error"]["code"] == "scope_missing"
    bypass = httpx.post(
        server.base_url + "/v1/runs",
        json={"prompt": "go", "repo": str(repo), "permission_mode": "bypassPermissions"},
        headers={"Authorization": f"Bearer {writer}"},
    )
    assert bypass.status_code == 403 and bypass.json()["error"]["code"] == "scope_missing"
    mine = stored_run(server, owner="alice-scopes")
    server.call(lambda: server.baton.store.update_run(mine.id, status="running"))
    switch = httpx.post(
        f"{server.base_url}/v1/runs/{mine.id}/command",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "set_permission_mode",
            "params": {"permission_mode": "bypassPermissions"},
        },
        headers={"Authorization": f"Bearer {writer}"},
    )
    assert switch.status_code == 200 and switch.json()["error"]["data"]["code"] == "scope_missing"


def test_fields_that_act_on_the_server_need_the_admin_scope(
    server: RunningServer, keys: tuple[KeyPair, ...], repo: Path
) -> None:
    """A mount, a host to reach, no sandbox, a repository outside the roots: any token giving
    them would be an escape (require_acting_field); with ``admin`` they pass that check."""
    first = keys[0]
    writer = token(first, sub="bob-fields", scope="runs:write")
    admin = token(first, sub="root-fields", scope="runs:write admin")
    cases = [
        ({"mount_rw": ["/"]}, "mount_rw"),
        ({"mount_ro": ["/root"]}, "mount_ro"),
        ({"allow_net": ["pypi.org"]}, "allow_net"),
        ({"sandbox": "none"}, "sandbox"),
    ]
    for extra, field in cases:
        body = {"prompt": "go", "repo": str(repo), **extra}
        refused = httpx.post(server.base_url + "/v1/runs", json=body, headers={"Authorization": f"Bearer {writer}"})
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "scope_missing" and error["message"].startswith(f"{field}:"), error
        passed = httpx.post(server.base_url + "/v1/runs", json=body, headers={"Authorization": f"Bearer {admin}"})
        assert passed.json()["error"]["code"] != "scope_missing", passed.text  # past the rule (no model key here)
    asking_bwrap = {"prompt": "go", "repo": str(repo), "sandbox": "bwrap"}  # the strict mode: anyone may ask
    response = httpx.post(
        server.base_url + "/v1/runs", json=asking_bwrap, headers={"Authorization": f"Bearer {writer}"}
    )
    assert response.json()["error"]["code"] != "scope_missing", response.text
    bad_host = {"prompt": "go", "repo": str(repo), "allow_net": ["no host!"]}
    response = httpx.post(server.base_url + "/v1/runs", json=bad_host, headers={"Authorization": f"Bearer {admin}"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_argument", response.text


def test_a_token_sees_only_its_owners_runs(server: RunningServer, keys: tuple[KeyPair, ...]) -> None:
    first = keys[0]
    alices = stored_run(server, owner="alice")
    bobs = stored_run(server, owner="bob")
    alice = token(first, sub="alice")
    assert get(server, f"/v1/runs/{alices.id}", alice).status_code == 200
    hidden = get(server, f"/v1/runs/{bobs.id}", alice)
    missing = get(server, "/v1/runs/run_00000000000000000000000000", alice)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"]["code"] == missing.json()["error"]["code"] == "run_not_found"
    assert get(server, f"/v1/runs/{bobs.id}/events", alice).status_code == 404
    for path in ("snapshots", "diff", "snapshots/s1/archive"):
        hidden_part = get(server, f"/v1/runs/{bobs.id}/{path}", alice)
        assert hidden_part.status_code == 404 and hidden_part.json()["error"]["code"] == "run_not_found", path
    assert get(server, f"/v1/runs/{alices.id}/snapshots", alice).json() == {"snapshots": []}
    command = httpx.post(
        f"{server.base_url}/v1/runs/{bobs.id}/command",
        json={"jsonrpc": "2.0", "id": 1, "method": "cancel"},
        headers={"Authorization": f"Bearer {token(first, sub='alice', scope='runs:write')}"},
    )
    assert command.status_code == 404
    assert [run["id"] for run in get(server, "/v1/runs", alice).json()["runs"]] == [alices.id]
    admin = token(first, sub="root", scope="runs:read admin")
    assert get(server, f"/v1/runs/{bobs.id}", admin).status_code == 200
    every_id = [run["id"] for run in get(server, "/v1/runs", admin).json()["runs"]]
    assert alices.id in every_id and bobs.id in every_id
    # A token limited to one run sees nothing else, even its owner's other runs.
    other = stored_run(server, owner="alice")
    limited = token(first, sub="alice", run_id=alices.id)
    assert get(server, f"/v1/runs/{alices.id}", limited).status_code == 200
    assert get(server, f"/v1/runs/{other.id}", limited).status_code == 404
    assert [run["id"] for run in get(server, "/v1/runs", limited).json()["runs"]] == [alices.id]


def test_a_token_for_one_run_or_one_task_sees_nothing_else(
    server: RunningServer, keys: tuple[KeyPair, ...], repo: Path
) -> None:
    first = keys[0]
    alice = token(first, sub="alice-tasks", scope="runs:read runs:write")
    created = httpx.post(
        server.base_url + "/v1/tasks", json={"prompt": "p"}, headers={"Authorization": f"Bearer {alice}"}
    )
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    other = httpx.post(
        server.base_url + "/v1/tasks", json={"prompt": "q"}, headers={"Authorization": f"Bearer {alice}"}
    ).json()["id"]
    bob = token(first, sub="bob-tasks")
    assert get(server, f"/v1/tasks/{task_id}", alice).status_code == 200
    hidden = get(server, f"/v1/tasks/{task_id}", bob)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "task_not_found"
    # The owner is the token's sub (tasks.owner), never the metadata: the old key is plain metadata now.
    spoof = httpx.post(
        server.base_url + "/v1/tasks",
        json={"prompt": "s", "metadata": {"_baton_owner": "alice-tasks"}},
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert spoof.status_code == 201 and spoof.json()["metadata"] == {"_baton_owner": "alice-tasks"}
    assert get(server, f"/v1/tasks/{spoof.json()['id']}", alice).status_code == 404
    assert get(server, f"/v1/tasks/{spoof.json()['id']}", bob).json()["metadata"] == {"_baton_owner": "alice-tasks"}
    started = httpx.post(
        server.base_url + "/v1/runs",
        json={"task_id": task_id, "repo": str(repo)},
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert started.status_code == 404 and started.json()["error"]["code"] == "task_not_found"
    admin = token(first, sub="root", scope="runs:read admin")
    assert get(server, f"/v1/tasks/{task_id}", admin).status_code == 200
    # A token for one task: that task, the runs of that task, nothing else.
    of_task = token(first, sub="alice-tasks", task_id=task_id)
    assert get(server, f"/v1/tasks/{task_id}", of_task).status_code == 200
    assert get(server, f"/v1/tasks/{other}", of_task).status_code == 404

    def run_of(task: str | None) -> str:
        async def make() -> str:
            record = await server.baton.store.create_run(agent="claude", owner="alice-tasks", task_id=task)
            return record.id

        return server.call(make)

    in_task, elsewhere = run_of(task_id), run_of(None)
    assert get(server, f"/v1/runs/{in_task}", of_task).status_code == 200
    assert get(server, f"/v1/runs/{elsewhere}", of_task).status_code == 404
    listed = {run["id"] for run in get(server, "/v1/runs?limit=1000", of_task).json()["runs"]}
    assert in_task in listed and elsewhere not in listed
    wrong_task = httpx.post(
        server.base_url + "/v1/runs", json={"task_id": other}, headers={"Authorization": f"Bearer {of_task}"}
    )
    assert wrong_task.status_code == 403 and wrong_task.json()["error"]["code"] == "scope_missing"
    # A token for one run: only that run, and it starts or reads no other thing.
    of_run = token(first, sub="alice-tasks", run_id=in_task)
    assert get(server, f"/v1/runs/{in_task}", of_run).status_code == 200
    assert get(server, f"/v1/runs/{elsewhere}", of_run).status_code == 404
    assert get(server, f"/v1/tasks/{task_id}", of_run).status_code == 404
    assert [run["id"] for run in get(server, "/v1/runs?limit=1000", of_run).json()["runs"]] == [in_task]
    bad_claim = token(first, sub="alice-tasks", task_id=7)
    assert get(server, "/v1/runs", bad_claim).json()["error"]["code"] == "token_invalid"


def test_key_files_are_checked_at_start(tmp_path: Path, keys: tuple[KeyPair, ...]) -> None:
    (tmp_path / "junk.pem").write_text("not a key")
    with pytest.raises(UsageError) as bad:
        load_public_keys([tmp_path / "junk.pem"])
    assert bad.value.code == "config_invalid"
    with pytest.raises(UsageError):
        load_public_keys([tmp_path / "absent.pem"])
    single = load_public_keys([keys[0].write_public(tmp_path / "only.pem")])
    assert list(single) == ["only"]


def test_a_remembered_token_still_expires(tmp_path: Path, keys: tuple[KeyPair, ...]) -> None:
    first = keys[0]
    authenticator = JwtAuthenticator(
        load_public_keys([first.write_public(tmp_path / "k1.pem")]), audience="baton", leeway=0
    )
    bearer = "Bearer " + sign(first, kid="k1", ttl=1)
    assert authenticator.authenticate(bearer).sub == "alice"
    assert authenticator.authenticate(bearer).sub == "alice"  # from the cache
    time.sleep(1.1)
    with pytest.raises(AuthError) as expired:
        authenticator.authenticate(bearer)
    assert expired.value.code == "token_expired"


def test_the_token_is_checked_before_the_request_and_named_in_the_document(
    server: RunningServer, keys: tuple[KeyPair, ...]
) -> None:
    # The scope check is one flat dependency that is itself the HTTPBearer scheme: it runs
    # before the body and the query are validated, and the OpenAPI document still names it.
    invalid = {"prompt": 7, "unknown": True}
    refused = httpx.post(server.base_url + "/v1/runs", json=invalid, timeout=10)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "token_missing"
    assert refused.headers["www-authenticate"] == 'Bearer realm="baton"'
    reader = {"Authorization": f"Bearer {token(keys[0], scope='runs:read')}"}
    refused = httpx.post(server.base_url + "/v1/runs", json=invalid, headers=reader, timeout=10)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "scope_missing"
    too_many = httpx.get(server.base_url + "/v1/runs?limit=5000", headers=reader, timeout=10)
    assert too_many.status_code == 422 and too_many.json()["error"]["code"] == "request_invalid"
    document = httpx.get(server.base_url + "/openapi.json", timeout=10).json()
    assert document["components"]["securitySchemes"] == {
        "HTTPBearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An RS256 JWT, or the local token (`baton token`)",
        }
    }
    operations = [(method, path, op) for path, item in document["paths"].items() for method, op in item.items()]
    assert len(operations) > 15
    for method, path, operation in operations:
        # Signing in (the web app's) takes its token in the body.
        expected = None if path == "/health" or (method, path) == ("post", "/v1/session") else [{"HTTPBearer": []}]
        assert operation.get("security") == expected, (method, path)


def _never_used() -> None:
    """A dependency override for nothing: while one is set, every route answers through FastAPI's solver."""


def test_routes_called_directly_answer_exactly_as_fastapis_solver(
    server: RunningServer, keys: tuple[KeyPair, ...]
) -> None:
    first = keys[0]
    routes = {route.path: route for route in server.app.routes if isinstance(route, APIRoute)}
    direct = {path for path, route in routes.items() if direct_plan(route.dependant) is not None}
    # The hot read goes direct; an operation with a body or query parameters never does.
    assert "/v1/runs/{run_id}" in direct and "/v1/runs/{run_id}/command" in direct
    assert "/v1/runs" not in direct and "/v1/gates/{gate_id}/decide" not in direct
    alices, bobs = stored_run(server, owner="alice"), stored_run(server, owner="bob")
    reader, writer = token(first, sub="alice", scope="runs:read"), token(first, sub="alice")
    requests: list[tuple[str, str, str | None, bytes | None]] = [
        ("GET", f"/v1/runs/{alices.id}", reader, None),
        ("GET", f"/v1/runs/{bobs.id}", reader, None),
        ("GET", "/v1/runs/run_00000000000000000000000000", reader, None),
        ("GET", f"/v1/runs/{alices.id}", None, None),
        ("GET", f"/v1/runs/{alices.id}", "Basic", None),
        ("GET", f"/v1/runs/{alices.id}", "not.a.jwt", None),
        ("GET", f"/v1/runs/{alices.id}", token(first, sub="alice", scope="gates:decide"), None),
        ("GET", f"/v1/runs/{alices.id}/snapshots/s1/archive", reader, None),
        ("POST", f"/v1/runs/{alices.id}/command", writer, b'{"jsonrpc": "2.0", "id": 1, "method": "nope"}'),
        ("POST", f"/v1/runs/{alices.id}/command", writer, b"{not json"),
        ("POST", f"/v1/runs/{alices.id}/command", reader, b'{"jsonrpc": "2.0", "id": 1, "method": "cancel"}'),
        ("POST", f"/v1/runs/{bobs.id}/command", writer, b'{"jsonrpc": "2.0", "id": 1, "method": "cancel"}'),
    ]

    def answers() -> list[tuple[int, bytes, list[tuple[str, str]]]]:
        seen = []
        for method, path, bearer, body in requests:
            if bearer == "Basic":
                headers = {"Authorization": "Basic YTpi"}
            else:
                headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else {}
            response = httpx.request(method, server.base_url + path, headers=headers, content=body, timeout=10)
            kept = sorted((name, value) for name, value in response.headers.items() if name != "date")
            seen.append((response.status_code, response.content, kept))
        return seen

    directly = answers()
    server.app.dependency_overrides[_never_used] = _never_used
    try:
        solved = answers()
    finally:
        server.app.dependency_overrides.clear()
    assert [status for status, _, _ in directly] == [200, 404, 404, 401, 401, 401, 403, 404, 200, 200, 403, 404]
    assert directly == solved


def test_fastapis_request_telemetry_is_on_only_when_an_otlp_exporter_is_configured() -> None:
    off = {"tracing": False, "metrics": False, "logs": False}
    assert http_telemetry({"PATH": "/bin", "OTEL_SERVICE_NAME": "baton"}) == off
    on = {"tracing": True, "metrics": True, "logs": True}
    assert http_telemetry({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == on
    assert http_telemetry({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}) == on
    assert http_telemetry({"FASTAPI_OTEL_AUTO_CONFIGURE": "true"}) == on
