"""``GET /v1/gates`` and the decisions: ``POST /v1/gates/{id}/decide|answer|plan-review|continue``.

Listing needs ``runs:read``, deciding ``gates:decide``. A token sees the gates of its own runs
(every run's with ``admin``), and a token limited to one run (or task) only that run's: any other
gate is ``gate_not_found`` (404), exactly as a missing one. Each endpoint resolves one kind of
gate (``deny`` through ``/decide`` resolves any kind, and needs no binding): another kind is 409
``gate_kind_mismatch`` (``gate_not_resumable`` for ``/continue``); a binding that is not the
gate's is 409 ``approval_binding_mismatch``; a body that does not fit is 422 naming the field.
Decisions are recorded through :class:`~baton.gates.ledger.GateLedger` and wake the run wherever
it executes (its inbox), at once when it executes in this server.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from baton.errors import NotFoundError, UsageError
from baton.gates.ledger import GateKind, GateLedger, GateRecord, suggested_rule
from baton.runs.parking import wake_local
from baton.runs.queries import RunRecord
from baton.server.auth import Principal
from baton.server.models import (
    AnswerRequest,
    ContinueRequest,
    DecideRequest,
    ErrorResponse,
    Gate,
    GateList,
    GateStatus,
    PlanReviewRequest,
)
from baton.server.routes._access import AUTH_RESPONSES, visible_run, with_scope
from baton.server.routes.events import SSE_RESPONSES, StreamResponse
from baton.server.routing import DirectRoute
from baton.server.sse import EventStream, Frame, encode_frame
from baton.server.state import ServerState, server_state

__all__ = ["router"]

router = APIRouter(prefix="/v1/gates", tags=["gates"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_Reader = Annotated[Principal, Depends(with_scope("runs:read"))]
_Decider = Annotated[Principal, Depends(with_scope("gates:decide"))]
_DECISION_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "gate_not_found (also a gate of a run the token may not see)"},
    409: {
        "model": ErrorResponse,
        "description": "approval_binding_mismatch, gate_kind_mismatch, gate_not_resumable, gate_not_pending "
        "(details.decision: the recorded decision)",
    },
    422: {
        "model": ErrorResponse,
        "description": "request_invalid (names the field), answer_invalid, plan_edit_invalid, edit_not_supported "
        "(an edit the run's agent cannot apply)",
    },
    429: {"model": ErrorResponse, "description": "rate_limited"},
}


@router.get("", response_model=GateList, responses={404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def list_gates(
    request: Request,
    principal: _Reader,
    run_id: Annotated[str | None, Query(description="Only this run's gates.")] = None,
    status: Annotated[GateStatus | None, Query(description="Only gates with this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> Response:
    """The gates of the caller's runs (every run's for admin), oldest first."""
    if run_id is not None:
        await visible_run(request, principal, run_id)  # run_not_found for a run the token may not see
    visible = await _visible_gates(server_state(request), principal, run_id, status)
    start = 0
    if cursor is not None:
        start = next((i for i, gate in enumerate(visible) if gate.id > cursor), len(visible))
    page = visible[start : start + limit]
    more = start + limit < len(visible)
    return JSONResponse(
        {"gates": [gate_json(gate) for gate in page], "next_cursor": page[-1].id if more and page else None}
    )


@router.get("/events", responses=SSE_RESPONSES, response_class=Response)
async def gate_events(request: Request, principal: _Reader) -> Response:
    """Gate changes across the caller's runs, live (server-sent events; docs/web.md).

    First ``event: snapshot`` with ``{"gates": [...]}``, the pending gates the caller may see
    (oldest first); then ``event: gate`` with ``{"gate": {...}}`` for each gate that opens or is
    decided, expires or is superseded. No ids: a client that reconnects gets a new snapshot.
    """
    state = server_state(request)
    config = state.config

    def source() -> AsyncGenerator[Frame, None]:
        return _gate_frames(state, principal)

    stream = EventStream(
        source,
        queue_size=config.sse_queue_size,
        stall_seconds=config.sse_stall_seconds,
        heartbeat_seconds=config.sse_heartbeat_seconds,
        stats=state.streams,
        draining=state.draining,
    )
    return StreamResponse(stream, state.stream_slots.acquire("/v1/gates/events", principal.sub))


async def _gate_frames(state: ServerState, principal: Principal) -> AsyncGenerator[Frame, None]:
    count = 0
    async with aclosing(state.gate_watch.changes(state.runs)) as changes:
        async for change in changes:
            count += 1
            if change is None:  # the reader has its start: the caller's pending gates now
                gates = await _visible_gates(state, principal, None, "pending")
                yield Frame(count, encode_frame(None, "snapshot", {"gates": [gate_json(gate) for gate in gates]}))
            elif principal.may_see(change.gate.run_id, change.run_owner, change.run_task_id):
                yield Frame(count, encode_frame(None, "gate", {"gate": gate_json(change.gate)}))


def gate_json(gate: GateRecord) -> dict[str, Any]:
    """The gate object, with the rule ``remember: "session"`` would store (a tool gate's; else null)."""
    return {**gate.to_json(), "suggested_rule": suggested_rule(gate)}


async def _visible_gates(
    state: ServerState, principal: Principal, run_id: str | None, status: str | None
) -> list[GateRecord]:
    """The gates the caller may see (of ``run_id``, with ``status``), oldest first; a gate past its
    deadline is listed as expired."""
    queries = state.runs
    owner = None if principal.is_admin else principal.sub
    found = await queries.gates(run_id=run_id or principal.run_id, status=status, owner=owner)
    runs: dict[str, RunRecord] = {}
    for gate in found:
        if gate.run_id not in runs:
            runs[gate.run_id] = await queries.get_run(gate.run_id)
    return [g for g in found if principal.may_see(g.run_id, runs[g.run_id].owner, runs[g.run_id].task_id)]


@router.post("/{gate_id}/decide", response_model=Gate, responses=_DECISION_RESPONSES)
async def decide(gate_id: str, body: DecideRequest, request: Request, principal: _Decider) -> Response:
    """Approve or deny a tool gate (deny resolves a gate of any kind)."""
    fields = body.model_dump(exclude_none=True)
    for name in ("bound_call_id", "bound_input_hash"):  # sent as null is a value (a gate without one), left out is not
        if name in body.model_fields_set:
            fields[name] = getattr(body, name)
    return await _decide(request, principal, gate_id, fields, "tool")


@router.post("/{gate_id}/answer", response_model=Gate, responses=_DECISION_RESPONSES)
async def answer(gate_id: str, body: AnswerRequest, request: Request, principal: _Decider) -> Response:
    """Answer a question gate: every question, with offered options (free text where allowed)."""
    return await _decide(
        request, principal, gate_id, {"decision": "answer", **body.model_dump(exclude_none=True)}, "question"
    )


@router.post("/{gate_id}/plan-review", response_model=Gate, responses=_DECISION_RESPONSES)
async def plan_review(gate_id: str, body: PlanReviewRequest, request: Request, principal: _Decider) -> Response:
    """Approve, edit (with edited_plan) or reject a plan_review gate."""
    return await _decide(request, principal, gate_id, body.model_dump(exclude_none=True), "plan_review")


@router.post("/{gate_id}/continue", response_model=Gate, responses=_DECISION_RESPONSES)
async def continue_run(gate_id: str, body: ContinueRequest, request: Request, principal: _Decider) -> Response:
    """Let a run that reached its budget go on (a resource_limit gate), optionally with a new budget."""
    return await _decide(
        request, principal, gate_id, {"decision": "continue", **body.model_dump(exclude_none=True)}, "resource_limit"
    )


async def _decide(
    request: Request, principal: Principal, gate_id: str, body: dict[str, Any], kind: GateKind
) -> Response:
    state = server_state(request)
    state.decisions.take(principal.sub)
    ledger = GateLedger(state.baton.store)
    gate = await _visible_gate(request, principal, ledger, gate_id)
    try:
        decided = await ledger.decide(gate.id, body, decided_by=principal.sub, kind=kind)
    except UsageError as exc:
        if exc.code != "invalid_argument":
            raise
        raise UsageError("request_invalid", exc.message, details=exc.details) from None
    wake_local(gate.id)  # a run executing in this server takes it at once, not at its next inbox read
    state.gate_watch.poke()  # open inboxes learn of it at once
    return JSONResponse(gate_json(decided))


async def _visible_gate(request: Request, principal: Principal, ledger: GateLedger, gate_id: str) -> GateRecord:
    gate = await ledger.get(gate_id)
    run = await server_state(request).runs.get_run(gate.run_id)
    if not principal.may_see(run.id, run.owner, run.task_id):
        raise NotFoundError("gate_not_found", f"no gate {gate_id}")
    return gate
