"""A trace per run execution: the run, its turns, tool calls, gate waits, snapshots, model requests.

The run span starts when the execution begins and a turn span when baton sends the turn's
``session/prompt`` (both live, so the request can carry them: :meth:`RunTrace.stamp` puts a W3C
``traceparent`` in ``_meta`` of every request baton sends, the ACP convention). Everything else
is read from the committed log entries, timed by their ``ts``:

- ``baton.tool``: a ``tool_call`` update (or the permission request that comes first) until its
  ``tool_call_update`` completes or fails, or until a denial; the decision as attributes;
- ``baton.gate``: ``_baton/gate_opened`` until ``_baton/gate_resolved``, a child of its tool call;
- ``baton.snapshot``: ``_baton/tree_snapshot``, for ``capture_ms`` before it was logged;
- ``baton.turn`` ends at ``_baton/turn_complete`` (tokens, cost); ``baton.run`` at the
  ``_baton/status`` that ends the execution (``paused`` included: a resume is a trace of its own).

``baton.model_request`` spans come from the model proxy (:class:`ModelRequestSpans`). Every
span carries ``run_id``, ``task_id`` and ``agent``, and the resource says them too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from baton.events.entry import LogEntry

__all__ = ["SPAN_NAMES", "RunTrace"]

SPAN_NAMES: Final = ("baton.run", "baton.turn", "baton.tool", "baton.gate", "baton.snapshot", "baton.model_request")
_PROPAGATOR: Final = TraceContextTextMapPropagator()
_ENDS_EXECUTION: Final = frozenset({"finished", "failed", "cancelled", "paused"})
_TOKEN_ATTRIBUTES: Final = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_input_tokens": "gen_ai.usage.cache_read_input_tokens",
    "cache_creation_input_tokens": "gen_ai.usage.cache_creation_input_tokens",
}


def ts_nanos(ts: str) -> int:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000) * 1_000_000


def now_nanos() -> int:
    """Now, to the millisecond the log's ``ts`` has: a span from a live start and a logged end
    then never ends before it starts."""
    return time.time_ns() // 1_000_000 * 1_000_000


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class RunTrace:
    """The spans of one execution of a run; every method is called on the event loop."""

    def __init__(
        self, resource: Resource, processor: SpanProcessor, identity: dict[str, str], on_end: Callable[[], None]
    ) -> None:
        self._provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("baton")
        self._identity = identity  # run_id, task_id, agent (and owner): on every span
        self._on_end = on_end
        self.run_span = self._tracer.start_span(
            "baton.run", kind=SpanKind.INTERNAL, attributes=identity, start_time=now_nanos()
        )
        self._run_context = trace.set_span_in_context(self.run_span)
        self.turn: Span | None = None
        self._turns = 0
        self._tools: dict[str, Span] = {}  # tool call id -> open span
        self._permissions: dict[Any, str] = {}  # permission request id -> tool call id
        self._gates: dict[str, Span] = {}
        self.ended = False

    @property
    def trace_id(self) -> str:
        return f"{self.run_span.get_span_context().trace_id:032x}"

    @property
    def span_id(self) -> str:
        return f"{self.run_span.get_span_context().span_id:016x}"

    def current_context(self) -> Context:
        return trace.set_span_in_context(self.turn) if self.turn is not None else self._run_context

    def current_span_ids(self) -> tuple[int, int, int]:
        """(trace id, span id, trace flags) of the current span: the turn, else the run."""
        span = self.turn if self.turn is not None else self.run_span
        context = span.get_span_context()
        return context.trace_id, context.span_id, int(context.trace_flags)

    def stamp(self, message: dict[str, Any]) -> None:
        """Put ``traceparent`` in ``params._meta`` of a request baton is about to send."""
        method = message.get("method")
        if not isinstance(method, str) or "id" not in message or self.ended:
            return
        if method == "session/prompt":
            self._end_turn(None)
            self._turns += 1
            self.turn = self._tracer.start_span(
                "baton.turn",
                context=self._run_context,
                attributes={**self._identity, "baton.turn": self._turns},
                start_time=now_nanos(),
            )
        params = message.get("params")
        if params is None:
            params = message["params"] = {}
        if not isinstance(params, dict):
            return
        meta = params.get("_meta")
        if meta is None:
            meta = params["_meta"] = {}
        if isinstance(meta, dict):
            _PROPAGATOR.inject(meta, context=self.current_context())

    def stamp_carrier(self, carrier: dict[str, str]) -> None:
        """``traceparent`` (and ``tracestate``) of the current span into ``carrier``."""
        _PROPAGATOR.inject(carrier, context=self.current_context())

    def observe(self, entry: LogEntry) -> None:
        method = entry["method"]
        if method is None or self.ended:
            return
        payload = entry["payload"]
        if method == "session/update" and entry["direction"] == "from_agent":
            self._update(entry, (payload.get("params") or {}).get("update") or {})
        elif method == "session/request_permission":
            self._permission(entry, payload)
        elif method.startswith("_baton/"):
            self._note(entry, method, payload.get("params") or {})

    def end(self, status: str = "interrupted", at: int | None = None) -> None:
        """End every open span (the execution is over)."""
        if self.ended:
            return
        self.ended = True
        end = at or now_nanos()
        for span in [*self._gates.values(), *self._tools.values()]:
            span.end(end_time=end)
        self._gates.clear()
        self._tools.clear()
        self._end_turn(end)
        self.run_span.set_attribute("baton.status", status)
        self.run_span.end(end_time=end)
        self._on_end()

    # -- the entries ----------------------------------------------------------------------------

    def _update(self, entry: LogEntry, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return
        if kind == "tool_call":
            self._open_tool(call_id, update, entry)
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            span = self._tools.pop(call_id, None)
            if span is not None:
                if update.get("status") == "failed":
                    span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
                exit_code = ((update.get("_meta") or {}).get("baton") or {}).get("exit_code")
                if isinstance(exit_code, int) and not isinstance(exit_code, bool):
                    span.set_attribute("baton.tool.exit_code", exit_code)
                span.end(end_time=ts_nanos(entry["ts"]))

    def _open_tool(self, call_id: str, call: dict[str, Any], entry: LogEntry) -> Span:
        span = self._tools.get(call_id)
        if span is not None:
            return span
        baton = (call.get("_meta") or {}).get("baton") or {}
        attributes: dict[str, Any] = {**self._identity, "baton.tool.call_id": call_id}
        name = baton.get("tool_name") or call.get("title")
        if name:
            attributes["baton.tool.name"] = str(name)
        if call.get("kind"):
            attributes["baton.tool.kind"] = str(call["kind"])
        if isinstance(baton.get("command"), str):
            attributes["baton.tool.command"] = baton["command"][:1024]
        span = self._tracer.start_span(
            "baton.tool", context=self.current_context(), attributes=attributes, start_time=ts_nanos(entry["ts"])
        )
        self._tools[call_id] = span
        return span

    def _permission(self, entry: LogEntry, payload: dict[str, Any]) -> None:
        if entry["direction"] == "from_agent":
            params = payload.get("params") or {}
            call = params.get("toolCall") or {}
            call_id = call.get("toolCallId")
            if isinstance(call_id, str):
                self._permissions[payload.get("id")] = call_id
                meta = dict(call.get("_meta") or {})
                meta.setdefault("baton", (params.get("_meta") or {}).get("baton") or {})
                self._open_tool(call_id, {**call, "_meta": meta}, entry)
            return
        call_id = self._permissions.pop(payload.get("id"), None)
        span = self._tools.get(call_id) if call_id is not None else None
        if span is None:
            return
        result = payload.get("result") or {}
        baton = (result.get("_meta") or {}).get("baton") or {}
        for key in ("decision", "reason", "decided_by", "gate_id"):
            if baton.get(key) is not None:
                span.set_attribute(f"baton.{key}", str(baton[key]))
        if baton.get("decision") in ("deny", "defer") or (result.get("outcome") or {}).get("outcome") == "cancelled":
            # The call will not run: its span ends with the answer.
            self._tools.pop(str(call_id), None)
            span.end(end_time=ts_nanos(entry["ts"]))

    def _note(self, entry: LogEntry, method: str, params: dict[str, Any]) -> None:
        at = ts_nanos(entry["ts"])
        if method == "_baton/run_started":
            for key in ("model", "permission_mode", "run_mode"):
                if params.get(key) is not None:
                    self.run_span.set_attribute(f"baton.{key}", str(params[key]))
        elif method == "_baton/gate_opened":
            self._open_gate(params, at)
        elif method == "_baton/gate_resolved":
            gate = self._gates.pop(str(params.get("gate_id")), None)
            if gate is not None:
                for key in ("decision", "reason", "decided_by"):
                    if params.get(key) is not None:
                        gate.set_attribute(f"baton.gate.{key}", str(params[key]))
                gate.end(end_time=at)
        elif method == "_baton/tree_snapshot":
            self._snapshot(params, at)
        elif method == "_baton/turn_complete":
            self._turn_complete(params, at)
        elif method == "_baton/status":
            status = str(params.get("status"))
            if status == "failed":
                self.run_span.set_status(Status(StatusCode.ERROR, str(params.get("code") or "failed")))
                self.run_span.set_attribute("baton.error_code", str(params.get("code") or ""))
            if status in _ENDS_EXECUTION:
                self.end(status, at)

    def _open_gate(self, params: dict[str, Any], at: int) -> None:
        call_id = params.get("tool_call_id")
        parent_span = self._tools.get(call_id) if isinstance(call_id, str) else None
        context = trace.set_span_in_context(parent_span) if parent_span is not None else self.current_context()
        attributes = {
            **self._identity,
            "baton.gate.id": str(params.get("gate_id")),
            "baton.gate.kind": str(params.get("kind")),
        }
        if params.get("tool_name"):
            attributes["baton.tool.name"] = str(params["tool_name"])
        self._gates[str(params.get("gate_id"))] = self._tracer.start_span(
            "baton.gate", context=context, attributes=attributes, start_time=at
        )

    def _snapshot(self, params: dict[str, Any], at: int) -> None:
        took = params.get("capture_ms")
        start = at - int(took * 1_000_000) if isinstance(took, int | float) else at
        attributes: dict[str, Any] = {**self._identity, "baton.snapshot.id": str(params.get("snapshot_id"))}
        for key in ("added", "modified", "deleted"):
            if isinstance(params.get(key), list):
                attributes[f"baton.snapshot.{key}"] = len(params[key])
        if params.get("tree_hash"):
            attributes["baton.snapshot.tree_hash"] = str(params["tree_hash"])
        span = self._tracer.start_span(
            "baton.snapshot", context=self.current_context(), attributes=attributes, start_time=start
        )
        span.end(end_time=at)

    def _turn_complete(self, params: dict[str, Any], at: int) -> None:
        turn = self.turn
        if turn is None:
            return
        if params.get("stop_reason") is not None:
            turn.set_attribute("baton.stop_reason", str(params["stop_reason"]))
        usage = params.get("usage")
        if isinstance(usage, dict):
            for key, name in _TOKEN_ATTRIBUTES.items():
                if isinstance(usage.get(key), int):
                    turn.set_attribute(name, usage[key])
        for key in ("total_cost_usd", "duration_ms", "gate_wait_ms"):
            if _number(params.get(key)):
                turn.set_attribute(f"baton.{key}", params[key])
        self._end_turn(at)

    def _end_turn(self, at: int | None) -> None:
        if self.turn is not None:
            self.turn.end(end_time=at or now_nanos())
            self.turn = None

    # -- model requests -------------------------------------------------------------------------

    def model_request(self, name: str, start: int, end: int, attributes: dict[str, Any], error: str | None) -> None:
        if self.ended:
            return
        span = self._tracer.start_span(
            name,
            context=self.current_context(),
            kind=SpanKind.CLIENT,
            attributes={**self._identity, **attributes},
            start_time=start,
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=end)
