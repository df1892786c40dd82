"""Optional export of session logs as OpenTelemetry log records (OTLP/HTTP, JSON encoding).

The exporter follows a run through :meth:`SessionLog.subscribe`, so it sees an entry only
once it is committed, already redacted. Each entry becomes one log record: ``body`` is the
payload as JSON text, ``attributes`` carry ``seq``, ``direction`` and ``method``, the time is
the entry's ``ts``; the resource carries ``service.name=baton``, ``run_id`` and ``task_id``.
Records are posted in batches (``max_batch`` entries, or whatever arrived within
``flush_interval``) to ``<endpoint>/v1/logs`` with the standard library's HTTP client in a
thread; a collector that is down or refuses a batch costs that batch (logged once per run on
``baton.store.otel``), never the run.

``endpoint`` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` holds (``http://host:4318``);
:func:`endpoint_from_environment` reads it (or ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``, the full
URL of the logs path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import orjson

from baton.events.entry import LogEntry
from baton.store.log import SessionLog

__all__ = ["OtlpLogExporter", "endpoint_from_environment"]

_LOG = logging.getLogger(__name__)
_SCOPE: Final = {"name": "baton.session_log"}
_TIMEOUT: Final = 5.0


def endpoint_from_environment(environ: Mapping[str, str]) -> str | None:
    """The logs URL the standard OTLP variables name, or None when export is off."""
    logs = environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    if logs:
        return logs
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return base.rstrip("/") + "/v1/logs" if base else None


def _attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _time_unix_nano(ts: str) -> str:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return str(int(moment.timestamp() * 1000) * 1_000_000)


def otlp_logs_request(entries: Sequence[LogEntry], resource: Mapping[str, Any]) -> dict[str, Any]:
    """The OTLP ``ExportLogsServiceRequest`` (JSON mapping) for entries of one run."""
    records = []
    for entry in entries:
        attributes = [_attribute("seq", entry["seq"]), _attribute("direction", entry["direction"])]
        if entry["method"] is not None:
            attributes.append(_attribute("method", entry["method"]))
        time = _time_unix_nano(entry["ts"])
        records.append(
            {
                "timeUnixNano": time,
                "observedTimeUnixNano": time,
                "severityNumber": 9,  # INFO
                "severityText": "INFO",
                "body": {"stringValue": orjson.dumps(entry["payload"]).decode()},
                "attributes": attributes,
            }
        )
    resource_attributes = [_attribute(key, value) for key, value in resource.items() if value is not None]
    return {
        "resourceLogs": [
            {"resource": {"attributes": resource_attributes}, "scopeLogs": [{"scope": _SCOPE, "logRecords": records}]}
        ]
    }


class OtlpLogExporter:
    """Posts the committed entries of runs to an OTLP/HTTP logs endpoint."""

    def __init__(self, endpoint: str, *, max_batch: int = 512, flush_interval: float = 1.0) -> None:
        self.endpoint = endpoint
        self._max_batch = max_batch
        self._flush_interval = flush_interval

    async def export_run(self, log: SessionLog, run_id: str, *, task_id: str | None = None, after: int = 0) -> int:
        """Follow ``run_id`` from ``after`` until its log closes; returns the entries exported.

        Run it as a task beside the run; cancelling it ends the export (what was batched is
        posted first).
        """
        resource = {"service.name": "baton", "run_id": run_id, "task_id": task_id}
        batch: list[LogEntry] = []
        exported = 0
        warned = False
        # Bounded: while the collector is slow the pump waits, and the log's subscriber falls
        # back to reading the store.
        queue: asyncio.Queue[LogEntry | None] = asyncio.Queue(maxsize=4 * self._max_batch)

        failures: list[Exception] = []

        async def pump() -> None:
            try:
                async with contextlib.aclosing(log.subscribe(run_id, after)) as entries:
                    async for entry in entries:
                        await queue.put(entry)
            except Exception as exc:  # the log failed: handed to the caller below
                failures.append(exc)
            await queue.put(None)

        async def post() -> None:
            nonlocal exported, warned
            if not batch:
                return
            body = orjson.dumps(otlp_logs_request(batch, resource))
            try:
                await asyncio.to_thread(self._post, body)
                exported += len(batch)
            except OSError as exc:  # urllib's errors, refused connections, timeouts
                if not warned:
                    _LOG.warning("OTLP export of %s to %s failed: %s", run_id, self.endpoint, exc)
                    warned = True
            batch.clear()

        pumping = asyncio.create_task(pump())
        try:
            while True:
                try:
                    entry = await asyncio.wait_for(queue.get(), self._flush_interval if batch else None)
                except TimeoutError:
                    await post()
                    continue
                if entry is None:
                    break
                batch.append(entry)
                if len(batch) >= self._max_batch:
                    await post()
            if failures:
                raise failures[0]
        finally:
            if not pumping.done():
                pumping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pumping
            await post()
        return exported

    def _post(self, body: bytes) -> None:
        request = urllib.request.Request(
            self.endpoint, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
            response.read()
