"""``baton.model_request`` spans from the real model proxy forwarding to the scripted model."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from tests.observability._receiver import attributes_of, otlp_receiver

from baton.observability import Telemetry, TelemetryConfig
from baton.sandbox import ModelExchange, ModelProxy, ModelUpstream
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.timeout(30)


async def test_a_model_request_through_the_proxy_is_a_span_of_the_turn() -> None:
    with otlp_receiver() as receiver, ScriptedModelServer("plain") as model:
        config = TelemetryConfig.load({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint + "/v1/traces"})
        telemetry = Telemetry.start(config)
        assert telemetry is not None
        run = telemetry.begin_run("r-model", task_id="t-1", agent="claude", owner=None)
        run.stamp({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s"}})
        spans_of_run = run.model_observer()
        assert spans_of_run is not None
        observed = asyncio.Event()

        class Observer:  # the proxy tells its observer once the exchange is over: wait for that
            def exchange(self, exchange: ModelExchange) -> None:
                assert spans_of_run is not None
                spans_of_run.exchange(exchange)
                observed.set()

        observer = Observer()
        async with ModelProxy(
            ModelUpstream(model.base_url, "sk-upstream-0123456789"), tcp=("127.0.0.1", 0), observer=observer
        ) as proxy:
            host, port = proxy.tcp_address
            body = {
                "model": "claude-scripted",
                "max_tokens": 64,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            }
            async with httpx.AsyncClient(timeout=10) as client:
                answer = await client.post(
                    f"http://{host}:{port}/v1/messages", json=body, headers={"x-api-key": proxy.placeholder}
                )
            assert answer.status_code == 200, answer.text
            await asyncio.wait_for(observed.wait(), 10)
        assert run.trace is not None
        run.trace.end("finished")
        telemetry.shutdown(timeout=5)
        spans = [span for _resource, span in receiver.received.spans()]
    [request] = [span for span in spans if span.name == "baton.model_request"]
    [turn] = [span for span in spans if span.name == "baton.turn"]
    assert request.parent_span_id == turn.span_id and request.trace_id == turn.trace_id
    assert turn.start_time_unix_nano <= request.start_time_unix_nano < request.end_time_unix_nano
    attributes = attributes_of(request.attributes)
    assert attributes["http.response.status_code"] == 200 and attributes["url.path"] == "/v1/messages"
    assert attributes["gen_ai.request.model"] == "claude-scripted"
    assert attributes["gen_ai.usage.input_tokens"] > 0 and attributes["gen_ai.usage.output_tokens"] > 0
    assert attributes["run_id"] == "r-model" and attributes["task_id"] == "t-1"
