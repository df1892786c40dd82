"""Webhooks delivered from the store: real SQLite and Postgres, a real receiver on loopback, real
signatures (checked here as a receiver would), retries, a restart between attempts, two
notifiers on one store, and the catch-up of events written while nobody delivered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.notify._receiver import Receiver, receiver

from baton.config import Settings, Webhook
from baton.gates.ledger import GateLedger
from baton.notify import Notifier, sign
from baton.store import Store
from baton.store.deliveries import Deliveries

pytestmark = pytest.mark.timeout(60)

SECRET = "whsec-0123456789abcdef"


@pytest.fixture(autouse=True)
def no_leftover_agent_processes() -> Iterator[None]:
    """These tests start no agents (and must not fail on other suites' agents running alongside)."""
    yield


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with await asyncio.to_thread(Store.open, store_url) as opened:
        yield opened


def settings_for(tmp_path: Path, *hooks: Receiver, **fields: Any) -> Settings:
    webhooks = tuple(
        Webhook(url=hook.url, secret=SECRET, events=fields.pop("events", Webhook.events)) for hook in hooks
    )
    values: dict[str, Any] = {"notify_retry_seconds": 0.1, "notify_poll_seconds": 0.05, **fields}
    return replace(Settings.load({"BATON_HOME": str(tmp_path / "home")}), notify_webhooks=webhooks, **values)


@asynccontextmanager
async def notifying(store: Store, settings: Settings) -> AsyncIterator[Notifier]:
    stop = asyncio.Event()
    notifier = Notifier(store, settings)
    task = asyncio.create_task(notifier.run(stop))
    try:
        await asyncio.sleep(0.1)  # its first read records the position: what happens next is delivered
        yield notifier
    finally:
        stop.set()
        await task


async def open_gate(store: Store, run_id: str, command: str = "touch x") -> str:
    gate, _ = await GateLedger(store).open(
        run_id, "tool", tool_name="Bash", bound_call_id="c1", bound_input_hash="h" + command,
        input={"command": command}, summary=f"Bash: {command}",
    )  # fmt: skip
    return gate.id


async def finish(store: Store, run_id: str, status: str = "finished") -> None:
    await store.update_run(run_id, status="running")
    await store.update_run(run_id, status=status)


def events(received: list[Any]) -> list[str]:
    return [json.loads(got.body)["event"] for got in received]


async def wait_for(hook: Receiver, predicate: Any) -> list[Any]:
    return await asyncio.to_thread(hook.wait_for, predicate)


async def test_signed_gate_and_run_events_reach_a_receiver(store: Store, tmp_path: Path) -> None:
    with receiver() as hook:
        async with notifying(store, settings_for(tmp_path, hook)):
            run = await store.create_run(agent="claude", repo="/tmp/repo", owner="alice")
            gate_id = await open_gate(store, run.id)
            await GateLedger(store).decide(
                gate_id, {"decision": "approve", "bound_call_id": "c1", "bound_input_hash": "htouch x"},
                decided_by="alice",
            )  # fmt: skip
            await finish(store, run.id)
            got = await wait_for(hook, lambda r: len(r) >= 3)
    assert events(got) == ["gate.opened", "gate.resolved", "run.finished"]
    for request in got:
        assert request.verified(SECRET)  # what a receiver checks: HMAC-SHA256 over the body, a fresh timestamp
        assert request.headers["X-Baton-Signature"] == sign(SECRET, request.body)
        assert request.headers["Content-Type"] == "application/json"
    opened, resolved, finished = (json.loads(request.body) for request in got)
    assert opened["id"] == f"gate.opened:{gate_id}" == got[0].headers["X-Baton-Delivery"]
    assert opened["gate"]["id"] == gate_id and opened["gate"]["status"] == "pending"
    assert opened["gate"]["input"] == {"command": "touch x"} and opened["run"]["id"] == run.id
    assert resolved["gate"]["status"] == "approved" and resolved["gate"]["decided_by"] == "alice"
    assert finished["run"]["status"] == "finished" and finished["run"]["owner"] == "alice"
    assert finished["attempt"] == 1 and str(finished["timestamp"]) == got[2].headers["X-Baton-Timestamp"]
    delivered = await Deliveries(store).list(run.id)
    assert [(d.event, d.status, d.attempts) for d in delivered] == [
        ("gate.opened", "delivered", 1), ("gate.resolved", "delivered", 1), ("run.finished", "delivered", 1),
    ]  # fmt: skip


async def test_a_wrong_secret_or_a_changed_body_fails_the_check(store: Store, tmp_path: Path) -> None:
    with receiver() as hook:
        async with notifying(store, settings_for(tmp_path, hook)):
            run = await store.create_run(agent="claude")
            await finish(store, run.id, "failed")
            (got,) = await wait_for(hook, lambda r: len(r) >= 1)
    assert events([got]) == ["run.failed"] and got.verified(SECRET)
    assert not got.verified("another-secret-0123456789")
    tampered = replace(got, body=got.body.replace(b'"failed"', b'"finished"'))
    assert not tampered.verified(SECRET)


async def test_a_receiver_that_fails_twice_gets_it_on_the_third_try(store: Store, tmp_path: Path) -> None:
    with receiver(fail_first=2) as hook:
        async with notifying(store, settings_for(tmp_path, hook)):
            run = await store.create_run(agent="claude")
            await finish(store, run.id)
            got = await wait_for(hook, lambda r: any(request.status == 204 for request in r))
    assert [request.status for request in got] == [500, 500, 204]
    assert [json.loads(request.body)["attempt"] for request in got] == [1, 2, 3]
    assert len({request.delivery for request in got}) == 1  # one delivery id on every attempt
    assert all(request.verified(SECRET) for request in got)  # each attempt signed anew (its own timestamp)
    (delivery,) = await Deliveries(store).list(run.id)
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 3, None)


async def test_a_restart_between_attempts_still_delivers(store: Store, tmp_path: Path) -> None:
    with receiver(fail_first=1) as hook:
        settings = settings_for(tmp_path, hook, notify_retry_seconds=0.5)
        async with notifying(store, settings):
            run = await store.create_run(agent="claude")
            await finish(store, run.id)
            await wait_for(hook, lambda r: len(r) == 1)
            # the first attempt failed; its retry is recorded in the store before this notifier stops
            for _ in range(100):
                (pending,) = await Deliveries(store).list(run.id)
                if pending.last_error is not None:
                    break
                await asyncio.sleep(0.02)
        assert (pending.status, pending.attempts, pending.last_error) == ("pending", 1, "HTTP 500")
        # A new process (a new notifier: its own lease owner, nothing in memory) sends the retry.
        async with notifying(store, settings) as second:
            got = await wait_for(hook, lambda r: len(r) == 2)
            assert second.owner not in {None, ""}
    assert [request.status for request in got] == [500, 204]
    (delivery,) = await Deliveries(store).list(run.id)
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


async def test_two_notifiers_on_one_store_send_each_event_once(store: Store, tmp_path: Path) -> None:
    with receiver(delay=0.05) as hook:
        settings = settings_for(tmp_path, hook)
        async with notifying(store, settings), notifying(store, settings):
            runs = [await store.create_run(agent="claude") for _ in range(6)]
            for run in runs:
                await finish(store, run.id)
            await wait_for(hook, lambda r: len(r) >= len(runs))
            await asyncio.sleep(0.5)  # time for a second send of any of them, which must not come
    deliveries = [request.delivery for request in hook.delivered()]
    assert sorted(deliveries) == sorted(f"run.finished:{run.id}" for run in runs)


async def test_a_claim_is_won_by_one_process(store: Store) -> None:
    deliveries = Deliveries(store)
    run = await store.create_run(agent="claude")
    rows = [
        {"url": "http://127.0.0.1:9/hook", "event_key": f"run.finished:{run.id}:{i}", "event": "run.finished",
         "run_id": run.id, "data": {}, "created_at": "2026-12-02T00:00:00.000Z",
         "next_attempt_at": "2026-12-02T00:00:00.000Z", "give_up_at": "2026-12-02T01:00:00.000Z"}
        for i in range(8)
    ]  # fmt: skip
    assert await deliveries.enqueue(rows) == 8
    assert await deliveries.enqueue(rows[:2]) == 0  # enqueued once, whoever enqueues it again
    now, lease = "2026-12-02T00:00:01.000Z", "2026-12-02T00:01:01.000Z"
    claims = await asyncio.gather(
        *(deliveries.claim(["http://127.0.0.1:9/hook"], f"p{i}", now, lease, 8) for i in range(4))
    )
    won = [delivery.id for claim in claims for delivery in claim]
    assert sorted(won) == sorted({delivery.id for delivery in await deliveries.list()})  # each once
    # Held: nobody else claims it until the lease ends; then another may.
    assert await deliveries.claim(["http://127.0.0.1:9/hook"], "late", now, lease, 8) == []
    after = await deliveries.claim(["http://127.0.0.1:9/hook"], "late", "2026-12-02T00:01:02.000Z", lease, 1)
    assert len(after) == 1 and after[0].attempts == 2
    # Only the lease's owner records an outcome: the first claimer's lease went to "late".
    (taken,) = after
    first_owner = next(f"p{i}" for i, claim in enumerate(claims) if taken.id in {d.id for d in claim})
    assert not await deliveries.record(taken.id, first_owner, "delivered", at=now)
    assert await deliveries.record(taken.id, "late", "delivered", at=now)


async def test_a_receiver_that_never_answers_gives_up(store: Store, tmp_path: Path) -> None:
    with receiver(fail_first=1000) as hook:
        async with notifying(store, settings_for(tmp_path, hook, notify_give_up_seconds=0.6)):
            run = await store.create_run(agent="claude")
            await finish(store, run.id)
            for _ in range(200):
                found = await Deliveries(store).list(run.id)
                if found and found[0].status != "pending":
                    break
                await asyncio.sleep(0.02)
    (delivery,) = found
    assert delivery.status == "failed" and delivery.last_error == "HTTP 500"
    assert 2 <= delivery.attempts == len(hook.received)


async def test_a_webhook_gets_only_the_events_it_names(store: Store, tmp_path: Path) -> None:
    with receiver() as failures, receiver() as everything:
        settings = settings_for(tmp_path, everything)
        only = Webhook(url=failures.url, secret=SECRET, events=("run.failed",))
        settings = replace(settings, notify_webhooks=(*settings.notify_webhooks, only))
        async with notifying(store, settings):
            ok, bad = await store.create_run(agent="claude"), await store.create_run(agent="claude")
            await finish(store, ok.id)
            await finish(store, bad.id, "failed")
            await wait_for(everything, lambda r: len(r) >= 2)
            got = await wait_for(failures, lambda r: len(r) >= 1)
            await asyncio.sleep(0.3)
    assert (
        [request.delivery for request in got]
        == [f"run.failed:{bad.id}"]
        == [request.delivery for request in failures.received]
    )


async def test_events_written_while_nobody_delivers_are_sent_by_the_next_notifier(store: Store, tmp_path: Path) -> None:
    """`baton run` with no server up: its events wait in the store; the next `baton serve` or
    `baton worker` on it reads them from the recorded position and delivers them."""
    with receiver() as hook:
        settings = settings_for(tmp_path, hook)
        async with notifying(store, settings):
            pass  # a server ran once: the position is recorded
        run = await store.create_run(agent="claude")
        gate_id = await open_gate(store, run.id)
        await finish(store, run.id)
        assert hook.received == []
        async with notifying(store, settings):
            got = await wait_for(hook, lambda r: len(r) >= 2)
    assert sorted(request.delivery for request in got) == sorted([f"gate.opened:{gate_id}", f"run.finished:{run.id}"])


async def test_each_webhook_keeps_its_own_position(store: Store, tmp_path: Path) -> None:
    """A process delivering another webhook meanwhile does not move this one's position on."""
    with receiver() as first, receiver() as second:
        only_first, only_second = settings_for(tmp_path, first), settings_for(tmp_path, second)
        async with notifying(store, only_first):
            pass  # the first webhook's position is recorded
        async with notifying(store, only_second):
            run = await store.create_run(agent="claude")
            await finish(store, run.id)
            await wait_for(second, lambda r: len(r) >= 1)
        assert first.received == []
        async with notifying(store, only_first):
            (got,) = await wait_for(first, lambda r: len(r) >= 1)
    assert got.delivery == f"run.finished:{run.id}" and got.verified(SECRET)
