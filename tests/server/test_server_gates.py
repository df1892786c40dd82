"""Gates over HTTP on a real server with JWT keys: listing, deciding, every refusal's status and
code, and who may see and decide what (gates are opened through the ledger; real runs open
them in tests/runs)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server._server import KeyPair, RunningServer, make_key_pair, running_server, sign

from baton.config import Settings
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.parking import watch_gate
from baton.server import ServerConfig

QUESTION = {"question": "Which?", "header": "DB", "options": [{"label": "SQLite"}, {"label": "Postgres"}]}


@pytest.fixture(scope="module")
def key() -> KeyPair:
    return make_key_pair()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, key: KeyPair) -> Iterator[RunningServer]:
    tmp_path = tmp_path_factory.mktemp("gates-server")
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "baton-home"), "PATH": os.environ.get("PATH", "")}
    )
    with running_server(settings, ServerConfig(jwt_public_keys=(key.write_public(tmp_path / "k.pem"),))) as running:
        yield running


class Caller:
    """One token's view of the server."""

    def __init__(self, server: RunningServer, key: KeyPair, sub: str, scope: str, **claims: Any) -> None:
        self.server = server
        self.headers = {"Authorization": "Bearer " + sign(key, sub=sub, scope=scope, **claims)}

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.server.base_url + path, headers=self.headers, timeout=10)

    def post(self, path: str, body: Any) -> httpx.Response:
        return httpx.post(self.server.base_url + path, headers=self.headers, json=body, timeout=10)


def run_of(server: RunningServer, owner: str, agent: str = "claude") -> str:
    return server.call(lambda: server.baton.store.create_run(agent=agent, owner=owner, repo="/tmp/x")).id


def open_gate(server: RunningServer, run_id: str, kind: str = "tool", **fields: Any) -> GateRecord:
    if kind == "tool":
        command = fields.pop("command", "npm test")
        fields = {"tool_name": "Bash", "bound_call_id": "toolu_1", "bound_input_hash": "h-" + command,
                  "input": {"command": command}, "summary": f"Bash: {command}", **fields}  # fmt: skip
    fields.setdefault("summary", kind)

    async def opened() -> GateRecord:
        gate, _ = await GateLedger(server.baton.store).open(run_id, kind, **fields)  # type: ignore[arg-type]
        return gate

    return server.call(opened)


def binding(gate: GateRecord) -> dict[str, Any]:
    return {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, response.text
    return error


def test_a_token_lists_only_the_gates_it_may_see(server: RunningServer, key: KeyPair) -> None:
    alice = Caller(server, key, "alice-list", "runs:read")
    admin = Caller(server, key, "root", "runs:read admin")
    mine, also_mine, theirs = run_of(server, "alice-list"), run_of(server, "alice-list"), run_of(server, "bob-list")
    first, second, other = open_gate(server, mine), open_gate(server, also_mine), open_gate(server, theirs)
    one_run = Caller(server, key, "alice-list", "runs:read", run_id=also_mine)

    listed = alice.get("/v1/gates")
    assert listed.status_code == 200, listed.text
    assert [g["id"] for g in listed.json()["gates"]] == [first.id, second.id]
    # The CLI's gate object, and the rule "Always for this run" would store (docs/web.md).
    assert listed.json()["gates"][0] == {**first.to_json(), "suggested_rule": "Bash(npm test:*)"}
    assert {g["id"] for g in admin.get("/v1/gates").json()["gates"]} >= {first.id, second.id, other.id}
    assert [g["id"] for g in one_run.get("/v1/gates").json()["gates"]] == [second.id]
    error_of(one_run.get(f"/v1/gates?run_id={mine}"), 404, "run_not_found")
    error_of(alice.get(f"/v1/gates?run_id={theirs}"), 404, "run_not_found")
    assert [g["id"] for g in alice.get(f"/v1/gates?run_id={mine}&status=pending").json()["gates"]] == [first.id]
    assert alice.get(f"/v1/gates?run_id={mine}&status=approved").json() == {"gates": [], "next_cursor": None}
    page = alice.get("/v1/gates?limit=1").json()
    assert [g["id"] for g in page["gates"]] == [first.id] and page["next_cursor"] == first.id
    rest = alice.get(f"/v1/gates?limit=1&cursor={page['next_cursor']}").json()
    assert [g["id"] for g in rest["gates"]] == [second.id] and rest["next_cursor"] is None
    assert "status" in error_of(alice.get("/v1/gates?status=waiting"), 422, "request_invalid")["message"]
    error_of(Caller(server, key, "alice-list", "runs:write").get("/v1/gates"), 403, "scope_missing")
    overdue = open_gate(server, theirs, "plan_review", plan="p", expires_in_seconds=0.001)
    bob = Caller(server, key, "bob-list", "runs:read")
    listed_expired = bob.get(f"/v1/gates?run_id={theirs}&status=expired").json()["gates"]
    assert [(g["id"], g["decided_by"], g["decision"]["reason"]) for g in listed_expired] == [
        (overdue.id, "timeout", "timeout")
    ]


def test_an_edit_the_runs_agent_cannot_apply_is_422_and_changes_nothing(server: RunningServer, key: KeyPair) -> None:
    alice = Caller(server, key, "alice-edit", "runs:read gates:decide")
    run_id = run_of(server, "alice-edit", agent="opencode")
    gate = open_gate(server, run_id, command="rm -rf one")
    url = f"/v1/gates/{gate.id}/decide"
    edited = {"decision": "approve", **binding(gate), "updated_input": {"command": "echo hi"}}
    error = error_of(alice.post(url, edited), 422, "edit_not_supported")
    assert error["details"] == {"gate_id": gate.id, "agent": "opencode", "field": "updated_input"}
    with watch_gate(gate.id) as woken:  # nothing was recorded, so a run here is not woken either
        error_of(alice.post(url, edited), 422, "edit_not_supported")
        assert not woken.is_set()
    assert server.call(lambda: GateLedger(server.baton.store).get(gate.id)) == gate
    plan = open_gate(server, run_id, "plan_review", plan="1. x")
    edit_plan = alice.post(f"/v1/gates/{plan.id}/plan-review", {"decision": "edit", "edited_plan": "1. y"})
    assert error_of(edit_plan, 422, "edit_not_supported")["details"]["field"] == "edited_plan"
    denied = alice.post(url, {"decision": "deny", "reason": "not that"})
    assert denied.status_code == 200 and denied.json()["status"] == "denied", denied.text


def test_decisions_and_their_refusals(server: RunningServer, key: KeyPair) -> None:
    alice = Caller(server, key, "alice", "runs:read gates:decide")
    reader = Caller(server, key, "alice", "runs:read")
    mallory = Caller(server, key, "mallory", "runs:read gates:decide")
    run_id = run_of(server, "alice")
    gate = open_gate(server, run_id, command="npm test -- --ci")
    url = f"/v1/gates/{gate.id}/decide"
    approve = {"decision": "approve", **binding(gate), "remember": "session"}

    error_of(reader.post(url, approve), 403, "scope_missing")
    error_of(mallory.post(url, approve), 404, "gate_not_found")  # another owner's gate does not exist for them
    error_of(alice.post("/v1/gates/gate_nope/decide", approve), 404, "gate_not_found")
    forged = error_of(alice.post(url, {**approve, "bound_input_hash": "0" * 64}), 409, "approval_binding_mismatch")
    assert forged["details"]["field"] == "bound_input_hash"
    for body, field in (
        ({"decision": "approve", "bound_call_id": "toolu_1"}, "bound_input_hash"),
        ({**approve, "decision": "maybe"}, "decision"),
        ({**approve, "colour": "red"}, "colour"),
        ({**approve, "updated_input": "ls"}, "updated_input"),
        ({**approve, "remember": "forever"}, "remember"),
    ):
        assert error_of(alice.post(url, body), 422, "request_invalid")["message"].startswith(field)
    assert server.call(lambda: GateLedger(server.baton.store).get(gate.id)) == gate
    not_json = httpx.post(server.base_url + url, headers=alice.headers, content=b"{nope", timeout=10)
    error_of(not_json, 422, "request_invalid")

    decided = alice.post(url, approve)
    assert decided.status_code == 200, decided.text
    body = decided.json()
    assert body["status"] == "approved" and body["decided_by"] == "alice"
    assert body["decision"]["remember_rule"] == "Bash(npm test:*)"
    inbox = server.call(lambda: server.baton.store.inbox_pending(run_id))
    assert [(m["kind"], m["payload"]) for m in inbox] == [("gate_decision", {"gate_id": gate.id})]
    assert alice.post(url, approve).json() == body  # a retry
    stale = error_of(alice.post(url, {"decision": "deny", **binding(gate)}), 409, "gate_not_pending")
    assert stale["details"]["decision"] == body["decision"]

    compound = open_gate(server, run_of(server, "alice"), command="npm test && rm -rf /")
    refused = alice.post(
        f"/v1/gates/{compound.id}/decide", {"decision": "approve", **binding(compound), "remember": "session"}
    )
    assert error_of(refused, 422, "request_invalid")["details"] == {"field": "remember"}
    denied = alice.post(f"/v1/gates/{compound.id}/decide", {"decision": "deny", **binding(compound), "interrupt": True})
    assert denied.json()["decision"] == {"decision": "deny", **binding(compound), "reason": "human", "interrupt": True}


def test_a_denial_needs_no_binding_and_an_approval_does(server: RunningServer, key: KeyPair) -> None:
    alice = Caller(server, key, "alice-deny", "runs:read gates:decide")
    left_out, as_null, forged, unbound = (open_gate(server, run_of(server, "alice-deny")) for _ in range(4))
    denied = alice.post(f"/v1/gates/{left_out.id}/decide", {"decision": "deny", "reason": "no"})
    assert denied.status_code == 200, denied.text
    assert denied.json()["decision"] == {"decision": "deny", "reason": "no", "interrupt": False}
    nulls = {"decision": "deny", "bound_call_id": None, "bound_input_hash": None}
    assert alice.post(f"/v1/gates/{as_null.id}/decide", nulls).json()["status"] == "denied"
    # A binding a denial does send must be the gate's; an approval must send it.
    wrong = {"decision": "deny", "bound_call_id": "toolu_other"}
    error_of(alice.post(f"/v1/gates/{forged.id}/decide", wrong), 409, "approval_binding_mismatch")
    bare = error_of(alice.post(f"/v1/gates/{unbound.id}/decide", {"decision": "approve"}), 422, "request_invalid")
    assert bare["details"] == {"field": "bound_call_id"}
    assert all(server.call(lambda g=g: GateLedger(server.baton.store).get(g.id)).is_pending for g in (forged, unbound))


def test_each_endpoint_resolves_its_own_kind(server: RunningServer, key: KeyPair) -> None:
    alice = Caller(server, key, "alice-kinds", "runs:read gates:decide")
    runs = [run_of(server, "alice-kinds") for _ in range(4)]
    tool = open_gate(server, runs[0])
    question = open_gate(
        server, runs[1], "question", bound_call_id="toolu_q", bound_input_hash="hq", questions=[QUESTION]
    )
    plan = open_gate(server, runs[2], "plan_review", plan="1. x")
    limit = open_gate(server, runs[3], "resource_limit", summary="budget reached")

    error_of(alice.post(f"/v1/gates/{tool.id}/plan-review", {"decision": "approve"}), 409, "gate_kind_mismatch")
    error_of(alice.post(f"/v1/gates/{tool.id}/continue", {}), 409, "gate_not_resumable")
    error_of(
        alice.post(f"/v1/gates/{plan.id}/decide", {"decision": "approve", **binding(tool)}), 409, "gate_kind_mismatch"
    )
    answer = {"answers": [{"header": "DB", "selected": ["MySQL"]}], **binding(question)}
    assert "MySQL" in error_of(alice.post(f"/v1/gates/{question.id}/answer", answer), 422, "answer_invalid")["message"]
    answer["answers"] = [{"header": "DB", "selected": []}]
    assert (
        "answers.0.selected"
        in error_of(alice.post(f"/v1/gates/{question.id}/answer", answer), 422, "request_invalid")["message"]
    )
    error_of(alice.post(f"/v1/gates/{plan.id}/plan-review", {"decision": "edit"}), 422, "plan_edit_invalid")
    negative = alice.post(f"/v1/gates/{limit.id}/continue", {"budget": {"usd": -1}})
    assert error_of(negative, 422, "request_invalid")["message"].startswith("budget.usd")

    answer["answers"] = [{"header": "DB", "selected": ["Postgres"], "note": "shared"}]
    answered = alice.post(f"/v1/gates/{question.id}/answer", answer)
    assert answered.status_code == 200 and answered.json()["status"] == "answered", answered.text
    edited = alice.post(f"/v1/gates/{plan.id}/plan-review", {"decision": "edit", "edited_plan": "1. x\n2. y"})
    assert edited.json()["decision"] == {"decision": "edit", "reason": "human", "edited_plan": "1. x\n2. y"}
    resumed = alice.post(f"/v1/gates/{limit.id}/continue", {"budget": {"usd": 3, "turns": 10}})
    assert resumed.json()["status"] == "approved" and resumed.json()["decision"]["budget"] == {"usd": 3, "turns": 10}
    # deny through /decide resolves any kind (it is what a cancel does).
    other_plan = open_gate(server, runs[2], "plan_review", plan="2. z")
    denied = alice.post(
        f"/v1/gates/{other_plan.id}/decide", {"decision": "deny", "bound_call_id": "", "bound_input_hash": ""}
    )
    error_of(denied, 409, "approval_binding_mismatch")  # but the binding it sends must still be the gate's
    denied = alice.post(
        f"/v1/gates/{other_plan.id}/decide", {"decision": "deny", "bound_call_id": None, "bound_input_hash": None}
    )
    assert denied.status_code == 200 and denied.json()["status"] == "denied", denied.text


def test_a_decision_wakes_a_run_waiting_in_this_server(server: RunningServer, key: KeyPair) -> None:
    alice = Caller(server, key, "alice-wake", "runs:read gates:decide")
    gate = open_gate(server, run_of(server, "alice-wake"))
    watching = contextlib.ExitStack()

    async def watch() -> asyncio.Event:
        return watching.enter_context(watch_gate(gate.id))

    woken = server.call(watch)  # as the run's waiter does, on the server's loop
    try:
        assert not woken.is_set()
        response = alice.post(f"/v1/gates/{gate.id}/decide", {"decision": "deny", **binding(gate)})
        assert response.status_code == 200, response.text
        assert woken.is_set()  # at once: not at the run's next inbox read
    finally:

        async def unwatch() -> None:
            watching.close()

        server.call(unwatch)


def test_openapi_publishes_the_gate_models(server: RunningServer) -> None:
    document = httpx.get(server.base_url + "/openapi.json", timeout=10).json()
    schemas = document["components"]["schemas"]
    for name in ("Gate", "GateList", "DecideRequest", "AnswerRequest", "PlanReviewRequest", "ContinueRequest"):
        assert name in schemas, name
    paths = document["paths"]
    for suffix in ("decide", "answer", "plan-review", "continue"):
        assert "post" in paths[f"/v1/gates/{{gate_id}}/{suffix}"]
    assert "get" in paths["/v1/gates"]
    assert json.dumps(schemas["Gate"]).count("bound_input_hash") >= 1


def test_public_gate_names(tmp_path: Path) -> None:
    import baton.server.models as models

    for name in models.__all__:
        assert getattr(models, name) is not None
