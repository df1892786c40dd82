"""The ACP SDK's per-message spans: made only where a global tracer provider keeps them."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

PROBE = r"""
import acp.telemetry
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from baton.acp.transport import sdk_spans_where_seen

sdk_spans_where_seen()  # no global provider: the SDK makes no spans
assert acp.telemetry.TRACER is None
with acp.telemetry.span_context("acp.notification", attributes={"method": "session/update"}):
    pass
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
sdk_spans_where_seen()  # the embedding program configured one: the SDK's spans reach it
with acp.telemetry.span_context("acp.notification", attributes={"method": "session/update"}):
    pass
print([span.name for span in exporter.get_finished_spans()])
"""


def test_no_spans_without_a_global_provider_and_every_span_with_one() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['acp.notification']"]
