"""The ACP SDK's transport, behind baton's own name: the one module that imports ``acp._transport``
(and sets the SDK's tracer, :func:`sdk_spans_where_seen`).

``agent-client-protocol`` 0.12 (pinned ``>=0.12.1,<0.13`` in pyproject.toml) exports no
public name for its ``Transport`` protocol or for the in-memory pair the in-process Claude
adapter is linked through, so baton reaches into its private ``acp._transport`` here, and every
other module imports these names from ``baton.acp.transport``. A new SDK version that moves
them breaks this module only.
"""

from __future__ import annotations

import acp.telemetry
from acp._transport import Transport, memory_transport_pair

__all__ = ["Transport", "memory_transport_pair", "sdk_spans_where_seen"]

_SDK_TRACER = acp.telemetry.TRACER


def sdk_spans_where_seen() -> None:
    """Let the SDK make its span per ACP message only when a tracer provider would keep it.

    The SDK opens an OpenTelemetry span for every message on the *global* tracer, which baton
    never configures (its own export has a provider of its own, baton.observability): with no
    global provider each span is a no-op that still costs ~10 % of a message's CPU on a
    streaming connection. Called before each connection is made; a global provider set by the
    embedding program (``opentelemetry-instrument``, ``set_tracer_provider``) gets them all.
    """
    from opentelemetry import trace

    seen = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    acp.telemetry.TRACER = _SDK_TRACER if seen else None  # type: ignore[assignment]
