"""Every committed, redacted log entry of a run executed here, as an OpenTelemetry log record.

One record per entry: ``body`` is the entry as ``baton logs --json`` prints it (JSON text of
``{run_id, seq, ts, direction, method, payload}``), attributes ``seq``, ``direction`` and
``event_type`` (the method; absent for a response to an unknown request); the time is the
entry's ``ts``; the trace context is the run's current span. The resource is the process's
(``service.name``, the configured attributes) plus ``run_id``, ``task_id``, ``agent`` and
``owner``.

baton encodes the records itself (:mod:`baton.observability.otlp_logs`), on one thread of its
own (:class:`LogExport`): the event loop only hands the committed rows over (the session log's
columns, no dict per entry; a deque append); the thread encodes them a batch at a time (every
500 ms, or as soon as 8192 wait) and posts each batch through the SDK's OTLP/HTTP exporter (its
endpoint, headers, timeout, compression, TLS and retries: the standard ``OTEL_EXPORTER_OTLP_*``
configuration).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

from baton.observability.health import ExportHealth
from baton.observability.otlp_logs import (
    body_prefix,
    context_fields,
    encode_request,
    encode_resource_logs_head,
    record_bytes,
)
from baton.observability.traces import RunTrace
from baton.store.committed import Row

__all__ = ["LogExport", "OtlpLogPoster", "RunLogRecords"]

_log = logging.getLogger("baton.observability")

BATCH_SECONDS: Final = 0.5  # a batch this long after its first entry
BATCH_RECORDS: Final = 8192  # … or as soon as this many wait
REQUEST_RECORDS: Final = 4096  # records in one export request at most
_CHUNK: Final = 256  # records encoded between two yields of the interpreter lock
WAITING_LIMIT: Final = 100_000  # past this many waiting, a group is dropped (and counted)


class OtlpLogPoster(OTLPLogExporter):
    """The SDK's OTLP/HTTP log exporter, given the request's bytes rather than SDK records."""

    def __init__(self, health: ExportHealth, endpoint: str, **options: Any) -> None:
        super().__init__(endpoint=endpoint, **options)
        self._health, self._url = health, endpoint

    def post(self, body: bytes, items: int) -> bool:
        """POST one encoded ``ExportLogsServiceRequest`` (retried within the timeout); counted."""
        try:
            ok = self._client.export(body).success
        except Exception:  # a transport that raises: the batch is lost like any other failure
            _log.debug("the OTLP log export raised", exc_info=True)
            ok = False
        if ok:
            self._health.exported("logs", items)
        else:
            self._health.failed("logs", items, self._url)
        return ok


class RunLogRecords:
    """The log records of one run: its resource (encoded once) and the span its records name."""

    def __init__(
        self, run_id: str, attributes: Mapping[str, Any], schema_url: str, trace: RunTrace | None, export: LogExport
    ) -> None:
        self.head = encode_resource_logs_head(attributes, schema_url)
        self.prefix = body_prefix(run_id)
        self._export = export
        self._trace = trace
        self._span: tuple[int, int, int] = (0, 0, 0)
        self._context = b""

    def context(self) -> bytes:
        """The span context its records carry now (the run's current span: the turn, else the run)."""
        trace = self._trace
        if trace is not None and not trace.ended:
            span = trace.current_span_ids()
            if span != self._span:
                self._span, self._context = span, context_fields(*span)
        return self._context

    def emit(self, rows: list[Row]) -> None:
        """Hand the run's committed rows over, on the event loop: they are encoded on the export's thread."""
        self._export.put(self, rows)


# Committed entries of one run: their records' run, its rows, their span context, when handed over (ns).
_Group = tuple[RunLogRecords, list[Row], bytes, int]


class LogExport:
    """Encodes and exports the log records of every run, in batches, on a thread of its own.

    :meth:`put` is called on the event loop only, with a reference to the committed group: the
    entries are read (their committed columns, no dict) and encoded on the thread, a batch every
    ``BATCH_SECONDS``, so that its share of the interpreter lock comes in one burst rather than
    next to every commit. At most ``WAITING_LIMIT`` entries wait; past that a group is dropped,
    and counted as not exported (the summary says so)."""

    def __init__(self, poster: OtlpLogPoster, health: ExportHealth) -> None:
        self._poster = poster
        self._health = health
        self._groups: deque[_Group] = deque()
        self._put = 0  # entries handed over (the loop writes it)
        self._taken = 0  # entries taken by the thread (it writes it)
        self._first_at: float | None = None  # when the oldest waiting group came (monotonic)
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._done_upto = 0  # entries exported or given up
        self._flush_upto = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="baton-otel-logs", daemon=True)
        self._thread.start()

    def put(self, run: RunLogRecords, rows: list[Row]) -> None:
        """Hand a run's committed rows over (on the event loop): their records are encoded on the thread."""
        count = len(rows)
        self._health.emitted("logs", count)
        waiting = self._put - self._taken
        if waiting + count > WAITING_LIMIT:
            return  # counted as emitted, never exported
        if waiting == 0:
            self._first_at = time.monotonic()
        self._groups.append((run, rows, run.context(), time.time_ns()))
        self._put += count
        # The thread is woken for the first group (its batch's clock starts) and for a full batch.
        if (waiting == 0 or waiting + count >= BATCH_RECORDS) and not self._wake.is_set():
            self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Export everything handed over so far; wait (at most ``timeout``) until it is sent or given up."""
        target = self._put
        with self._done:
            self._flush_upto = max(self._flush_upto, target)
            self._wake.set()
            return self._done.wait_for(lambda: self._done_upto >= target or not self._thread.is_alive(), timeout)

    def shutdown(self, timeout: float) -> None:
        """Export what waits, within ``timeout`` seconds; then abort whatever is still retrying."""
        self._stopping = True
        self.flush(timeout)
        self._poster.shutdown()  # type: ignore[no-untyped-call]

    def _due(self) -> float | None:
        """Seconds until the waiting entries are due (0: now), or None when none wait."""
        if self._put - self._taken <= 0:
            return None
        if self._stopping or self._flush_upto > self._taken or self._put - self._taken >= BATCH_RECORDS:
            return 0.0
        first = self._first_at
        return 0.0 if first is None else max(first + BATCH_SECONDS - time.monotonic(), 0.0)

    def _work(self) -> None:
        while True:
            due = self._due()
            if due is None:
                if self._stopping:
                    return
                self._wake.wait()
                self._wake.clear()
                continue
            if due > 0:
                self._wake.wait(due)
                self._wake.clear()
                continue
            self._send_waiting()

    def _send_waiting(self) -> None:
        """Encode and post the groups waiting now, ``REQUEST_RECORDS`` records a request at most."""
        groups = self._groups
        waiting = len(groups)  # the loop appends meanwhile: what comes later waits for the next batch
        self._first_at = time.monotonic()
        request: dict[int, tuple[tuple[bytes, bytes], list[bytes]]] = {}
        items = 0
        for _ in range(waiting):
            run, rows, context, observed = groups.popleft()
            self._taken += len(rows)
            try:
                records: list[bytes] = []
                for start in range(0, len(rows), _CHUNK):
                    records += record_bytes(rows[start : start + _CHUNK], run.prefix, context, observed)
                    # Let the event loop and the log's writer have the interpreter: a thread that
                    # keeps it makes each of theirs wait a switch interval (5 ms) to get it back.
                    time.sleep(0)
            except Exception:  # never the run's problem; the entries are not exported (counted)
                _log.exception("encoding OpenTelemetry log records failed")
                self._done_with(len(rows))
                continue
            request.setdefault(id(run), (run.head, []))[1].extend(records)
            items += len(rows)
            if items >= REQUEST_RECORDS:
                self._post(request, items)
                request, items = {}, 0
        if items:
            self._post(request, items)

    def _post(self, request: dict[int, tuple[tuple[bytes, bytes], list[bytes]]], items: int) -> None:
        try:
            self._poster.post(encode_request(request.values()), items)
        except Exception:  # never the run's problem; the entries count as lost
            _log.exception("exporting OpenTelemetry log records failed")
        self._done_with(items)

    def _done_with(self, items: int) -> None:
        with self._done:
            self._done_upto += items
            self._done.notify_all()
