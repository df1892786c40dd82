"""The webhook notifier: reads the store for events and delivers them (docs/web.md "Webhooks").

``baton serve`` and ``baton worker`` each run one :class:`Notifier` while ``[notify]`` lists
webhooks. Every ``poll_seconds`` it

1. reads the events since its position (gates opened and decided, runs ended: rows of the
   store, whichever process wrote them — a run executed by ``baton run``, ``baton approve`` in
   another shell, another server) and enqueues one delivery per event and webhook that wants it
   (``webhook_deliveries``; an event already enqueued by any process is kept as it is). The
   position is kept in ``webhook_cursor``, one row per webhook URL (so a process whose
   webhooks nobody delivered for a while catches up on their events, up to
   ``CATCH_UP_SECONDS`` old, and a webhook added later starts then); each read goes back
   ``OVERLAP_SECONDS`` before it, for rows committed late (or stamped by a clock a little behind);
2. claims the deliveries that are due (a lease: compare-and-set in the store, so two processes
   never send one attempt twice) and POSTs each, signed (:mod:`baton.notify.signing`), in a task
   of its own — one at a time per URL, oldest first (so a receiver gets one process's events
   in order, except around a retry), none waited for by a run.

A failed attempt is tried again after ``retry_seconds``, doubling up to ``max_retry_seconds``,
until ``give_up_seconds`` after the event was enqueued; then the delivery is ``failed``. The
attempts are rows, so they survive a restart (of any process: the next one to claim sends).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from baton.config import VERSION, Settings, Webhook
from baton.errors import BatonError
from baton.events.entry import utc_timestamp
from baton.notify.events import body_of, gate_data, run_data, run_event
from baton.notify.sending import post
from baton.notify.signing import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from baton.store.deliveries import Deliveries, DeliveryRecord
from baton.store.store import Store

__all__ = ["CATCH_UP_SECONDS", "OVERLAP_SECONDS", "Notifier"]

_log = logging.getLogger("baton.notify")

OVERLAP_SECONDS: Final = 10.0  # each read starts this long before the position
CATCH_UP_SECONDS: Final = 86400.0  # events older than this when first read are not sent
_CURSOR_EVERY_SECONDS: Final = 5.0  # the position is written at most this often (and at the end)


class Notifier:
    """Delivers the store's events to ``settings.notify_webhooks``; :meth:`run` until ``stop`` is set."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        poll_seconds: float | None = None,
        timeout_seconds: float = 10.0,
        lease_seconds: float = 60.0,
    ) -> None:
        self._store = store
        self._deliveries = Deliveries(store)
        self._webhooks: dict[str, Webhook] = {webhook.url: webhook for webhook in settings.notify_webhooks}
        self._retry = settings.notify_retry_seconds
        self._max_retry = settings.notify_max_retry_seconds
        self._give_up = settings.notify_give_up_seconds
        self._poll = settings.notify_poll_seconds if poll_seconds is None else poll_seconds
        self._timeout = timeout_seconds
        self._lease = max(lease_seconds, timeout_seconds + 5.0)
        self.owner = f"notify-{uuid.uuid4().hex[:12]}"  # this process's leases
        self._position: datetime | None = None
        self._written_at = 0.0
        self._seen: dict[str, datetime] = {}  # event keys enqueued lately → when they happened
        self._busy: set[str] = set()  # URLs with a POST under way here
        self._wake = asyncio.Event()

    @property
    def webhooks(self) -> list[Webhook]:
        return list(self._webhooks.values())

    async def run(self, stop: asyncio.Event) -> None:
        """Read and deliver until ``stop`` is set; then wait for the POSTs under way (each ends
        within ``timeout_seconds``) and record the position."""
        if not self._webhooks:
            return
        _log.info("notify: %d webhook(s), owner %s", len(self._webhooks), self.owner)
        async with asyncio.TaskGroup() as sending:
            while not stop.is_set():
                try:
                    await self.read_events()
                    for delivery in await self._claim():
                        self._busy.add(delivery.url)
                        task = sending.create_task(self._send(delivery), name=f"baton-webhook-{delivery.id}")
                        task.add_done_callback(functools.partial(self._sent, delivery.url))
                except BatonError as exc:  # the store is busy or away: the next tick tries again
                    _log.warning("notify: %s", exc)
                waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
                try:
                    await asyncio.wait(waits, timeout=self._poll, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
                self._wake.clear()
        with contextlib.suppress(BatonError):  # the last events, enqueued for whoever delivers next
            await self.read_events()
            await self._write_position(force=True)

    def _sent(self, url: str, _task: asyncio.Task[None]) -> None:
        self._busy.discard(url)
        self._wake.set()  # the URL's next delivery may go

    # Reading.

    async def read_events(self) -> int:
        """Enqueue the deliveries of the events since the position; how many were new."""
        now = datetime.now(UTC)
        if self._position is None:  # each webhook's own position: one added later starts then
            stored = [await self._deliveries.cursor(url, utc_timestamp(now)) for url in self._webhooks]
            self._position = max(min(_parse(at) for at in stored), now - timedelta(seconds=CATCH_UP_SECONDS))
        since = utc_timestamp(self._position - timedelta(seconds=OVERLAP_SECONDS))
        rows: list[dict[str, Any]] = []
        give_up = utc_timestamp(now + timedelta(seconds=self._give_up))
        enqueued_at = utc_timestamp(now)
        seen: dict[str, datetime] = {}

        def add(event: str, key: str, run_id: str, at: str | None, data: dict[str, Any]) -> None:
            seen[key] = _parse(at) if at else now
            for webhook in self._webhooks.values():
                if event in webhook.events:
                    rows.append(
                        {"url": webhook.url, "event_key": key, "event": event, "run_id": run_id, "data": data,
                         "created_at": enqueued_at, "next_attempt_at": enqueued_at, "give_up_at": give_up}
                    )  # fmt: skip

        runs: dict[str, Any] = {}
        for gate in await self._deliveries.gates_opened(since):
            key = f"gate.opened:{gate.id}"
            if key not in self._seen:
                run = runs.get(gate.run_id) or await self._store.get_run(gate.run_id)
                runs[gate.run_id] = run
                as_opened = replace(gate, status="pending", decision=None, decided_by=None, decided_at=None)
                add("gate.opened", key, gate.run_id, gate.created_at, gate_data(as_opened, run))
        for gate in await self._deliveries.gates_decided(since):
            key = f"gate.resolved:{gate.id}"
            if key not in self._seen:
                run = runs.get(gate.run_id) or await self._store.get_run(gate.run_id)
                runs[gate.run_id] = run
                add("gate.resolved", key, gate.run_id, gate.decided_at, gate_data(gate, run))
        for run in await self._deliveries.runs_ended(since):
            event = run_event(run)
            key = f"{event}:{run.id}"
            if key not in self._seen:
                add(event, key, run.id, run.finished_at, {"run": run_data(run)})
        added = await self._deliveries.enqueue(rows)
        self._seen.update(seen)  # only once enqueued: a failed enqueue is read again next time
        self._position = max(self._position, now)
        forget = self._position - timedelta(seconds=OVERLAP_SECONDS * 3)
        self._seen = {key: at for key, at in self._seen.items() if at >= forget}
        await self._write_position(force=added > 0)
        return added

    async def _write_position(self, *, force: bool) -> None:
        if self._position is None:
            return
        if force or time.monotonic() - self._written_at >= _CURSOR_EVERY_SECONDS:
            for url in self._webhooks:
                await self._deliveries.advance(url, utc_timestamp(self._position))
            self._written_at = time.monotonic()

    # Sending.

    async def _claim(self) -> list[DeliveryRecord]:
        """The next due delivery of each webhook with none under way (one at a time per URL: a
        receiver gets its events in order, as long as none waits for a retry)."""
        now = datetime.now(UTC)
        lease_until = utc_timestamp(now + timedelta(seconds=self._lease))
        claimed = []
        for url in self._webhooks:
            if url not in self._busy:
                claimed += await self._deliveries.claim([url], self.owner, utc_timestamp(now), lease_until, 1)
        return claimed

    async def _send(self, delivery: DeliveryRecord) -> None:
        webhook = self._webhooks[delivery.url]
        timestamp = int(time.time())
        body = body_of(
            delivery.event_key, delivery.event, delivery.created_at, delivery.data,
            timestamp=timestamp, attempt=delivery.attempts,
        )  # fmt: skip
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"baton/{VERSION}",
            SIGNATURE_HEADER: sign(webhook.secret, body),
            TIMESTAMP_HEADER: str(timestamp),
            EVENT_HEADER: delivery.event,
            DELIVERY_HEADER: delivery.event_key,
        }
        error = await post(delivery.url, body, headers, self._timeout)
        now = datetime.now(UTC)
        try:
            if error is None:
                await self._deliveries.record(delivery.id, self.owner, "delivered", at=utc_timestamp(now))
                _log.info("notify: %s delivered to %s", delivery.event_key, delivery.url)
                return
            delay = min(self._retry * 2 ** max(delivery.attempts - 1, 0), self._max_retry)
            retry_at = now + timedelta(seconds=delay)
            if retry_at > _parse(delivery.give_up_at):
                await self._deliveries.record(delivery.id, self.owner, "failed", at=utc_timestamp(now), error=error)
                _log.warning("notify: %s to %s failed for good: %s", delivery.event_key, delivery.url, error)
                return
            await self._deliveries.record(
                delivery.id, self.owner, "retry", at=utc_timestamp(now), next_attempt_at=utc_timestamp(retry_at),
                error=error,
            )  # fmt: skip
            _log.info("notify: %s to %s failed (%s); again in %.0f s", delivery.event_key, delivery.url, error, delay)
        except BatonError as exc:  # the outcome is lost: the lease ends and another attempt follows
            _log.warning("notify: cannot record %s: %s", delivery.event_key, exc)


def _parse(timestamp: str) -> datetime:
    parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
