"""``baton.model_request`` spans: one per request through the model proxy (docs/sandbox-network.md).

:class:`ModelRequestSpans` is a :class:`~baton.sandbox.proxy_hooks.ModelObserver`: the proxy
calls it once per exchange, when it is over, and the span is made then with the exchange's own
times, as a child of the run's current turn. Tokens are read from the response as it streamed:
Anthropic's ``message_start`` / ``message_delta`` usage, OpenAI's ``response.completed`` usage.
"""

from __future__ import annotations

import json
from typing import Any

from baton.observability.traces import RunTrace
from baton.sandbox.proxy_hooks import ModelExchange

__all__ = ["ModelRequestSpans", "exchange_usage"]


class ModelRequestSpans:
    """The model proxy's observer for one run."""

    def __init__(self, trace: RunTrace) -> None:
        self._trace = trace

    def exchange(self, exchange: ModelExchange) -> None:
        start = int(exchange.started * 1e9)
        end = start + int(exchange.duration * 1e9)
        attributes: dict[str, Any] = {
            "http.request.method": exchange.method,
            "url.path": exchange.path.partition("?")[0],
            "baton.model.outcome": exchange.outcome,
        }
        if exchange.status is not None:
            attributes["http.response.status_code"] = exchange.status
        model = _request_model(exchange.body)
        if model:
            attributes["gen_ai.request.model"] = model
        for key, value in exchange_usage(exchange.response_body).items():
            attributes[f"gen_ai.usage.{key}"] = value
        error = None
        if exchange.outcome != "completed" or (exchange.status or 0) >= 400:
            error = exchange.error_code or f"status {exchange.status}"
            attributes["baton.error_code"] = error
        self._trace.model_request("baton.model_request", start, end, attributes, error)


def _request_model(body: bytes) -> str | None:
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def exchange_usage(body: bytes) -> dict[str, int]:
    """Input and output tokens a model response reports (SSE stream or one JSON body)."""
    usage: dict[str, int] = {}
    text = body.decode("utf-8", "replace")
    documents = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or [text]
    for document in documents:
        try:
            event = json.loads(document)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        found = [
            event.get("usage"),
            (event.get("message") or {}).get("usage") if isinstance(event.get("message"), dict) else None,
            (event.get("response") or {}).get("usage") if isinstance(event.get("response"), dict) else None,
        ]
        for item in found:
            if isinstance(item, dict):
                for key in ("input_tokens", "output_tokens"):
                    value = item.get(key)
                    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                        usage[key] = value  # the latest report wins: message_delta carries the total
    return usage
