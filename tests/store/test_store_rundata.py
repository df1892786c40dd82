from __future__ import annotations

import asyncio

import pytest

from baton.errors import NotFoundError, UsageError
from baton.store import Store

pytestmark = pytest.mark.timeout(20)


async def test_tasks_round_trip(store: Store) -> None:
    task = await store.create_task("fix the bug", repo="/src/app", title="bug", metadata={"ticket": 12})
    assert task.id.startswith("task_")
    assert await store.get_task(task.id) == task
    assert task.to_dict()["metadata"] == {"ticket": 12}
    bare = await store.create_task("another")
    assert (await store.get_task(bare.id)).metadata == {}
    with pytest.raises(NotFoundError) as missing:
        await store.get_task("task_nope")
    assert missing.value.code == "task_not_found"
    with pytest.raises(UsageError):
        await store.create_task("again", task_id=task.id)


async def test_new_run_fields_and_every_transition_recorded(store: Store) -> None:
    run = await store.create_run(agent="claude", budget_turns=10, budget_seconds=60.0, owner="alice")
    assert (run.budget_turns, run.budget_seconds, run.owner) == (10, 60.0, "alice")
    await store.update_run(run.id, status="running", status_reason="started", executor_id="host-1:42")
    await store.update_run(run.id, heartbeat_at="2026-11-30T12:00:00.000Z")  # no status: no transition
    await store.update_run(run.id, status="running", status_reason="still")  # same status: none either
    await store.update_run(run.id, status="interrupted", status_reason="executor_died")
    await store.update_run(run.id, status="running", status_reason="resumed")
    done = await store.update_run(run.id, status="finished", status_reason="end_turn", resumed_from="s1")
    assert (done.executor_id, done.heartbeat_at, done.resumed_from) == (
        "host-1:42",
        "2026-11-30T12:00:00.000Z",
        "s1",
    )
    transitions = await store.list_transitions(run.id)
    assert [(t.from_status, t.to_status, t.reason) for t in transitions] == [
        (None, "queued", None),
        ("queued", "running", "started"),
        ("running", "interrupted", "executor_died"),
        ("interrupted", "running", "resumed"),
        ("running", "finished", "end_turn"),
    ]
    assert all(t.at.endswith("Z") for t in transitions)
    assert [t.at for t in transitions] == sorted(t.at for t in transitions)
    with pytest.raises(NotFoundError):
        await store.list_transitions("run_nope")


async def test_conversation_state_is_replaced(store: Store) -> None:
    run = await store.create_run(agent="claude")
    assert await store.load_conversation_state(run.id) is None
    await store.save_conversation_state(run.id, 10, {"turns": [{"role": "user", "text": "hi"}]})
    await store.save_conversation_state(run.id, 25, {"turns": [], "usage": {"input_tokens": 3}})
    assert await store.load_conversation_state(run.id) == (25, {"turns": [], "usage": {"input_tokens": 3}})
    with pytest.raises(NotFoundError):
        await store.save_conversation_state("run_nope", 1, {})


async def test_snapshots_list_in_numeric_order(store: Store) -> None:
    run = await store.create_run(agent="claude")
    for number in (2, 10, 1):
        await store.add_snapshot(
            run.id,
            {
                "id": f"s{number}",
                "tree_hash": f"tree{number}",
                "base_commit": "abc",
                "added": ["a.py"],
                "renamed": [{"from": "x", "to": "y"}],
                "log_seq_from": number,
                "log_seq_to": number + 1,
                "archive_key": f"runs/{run.id}/s{number}.tar",
            },
        )
    # A step re-run after a crash writes the same snapshot again: the stored one stays.
    await store.add_snapshot(run.id, {"id": "s1", "tree_hash": "other"})
    listed = await store.list_snapshots(run.id)
    assert [snapshot["id"] for snapshot in listed] == ["s1", "s2", "s10"]
    first = await store.get_snapshot(run.id, "s1")
    assert first == listed[0]
    assert (first["tree_hash"], first["added"], first["modified"], first["renamed"]) == (
        "tree1",
        ["a.py"],
        [],
        [{"from": "x", "to": "y"}],
    )
    assert first["created_at"].endswith("Z") and first["run_id"] == run.id
    with pytest.raises(NotFoundError) as missing:
        await store.get_snapshot(run.id, "s3")
    assert missing.value.code == "snapshot_not_found"
    with pytest.raises(UsageError):
        await store.add_snapshot(run.id, {"id": "snap", "tree_hash": "t"})
    with pytest.raises(UsageError):
        await store.add_snapshot(run.id, {"id": "s4", "tree_hash": "t", "colour": "red"})


async def test_runner_events_are_written_once_per_seq(store: Store) -> None:
    run = await store.create_run(agent="claude")
    events = [
        {"run_id": run.id, "seq": seq, "log_seq": seq * 2, "ts": "2026-11-30T12:00:00.000Z", "type": "message"}
        | {"data": {"role": "agent", "text": f"t{seq}"}, "raw": {"ignored": True}}
        for seq in (1, 2, 3)
    ]
    await store.save_runner_events(run.id, events[:2])
    await store.save_runner_events(run.id, events[1:])  # seq 2 again: kept as stored
    await store.save_runner_events(run.id, [])
    read = await store.read_runner_events(run.id)
    assert [event["seq"] for event in read] == [1, 2, 3]
    assert read[0] == {
        "run_id": run.id,
        "seq": 1,
        "log_seq": 2,
        "ts": "2026-11-30T12:00:00.000Z",
        "type": "message",
        "data": {"role": "agent", "text": "t1"},
    }
    assert [event["seq"] for event in await store.read_runner_events(run.id, after=1, limit=1)] == [2]


async def test_inbox_takes_each_command_once(store: Store) -> None:
    run = await store.create_run(agent="claude")
    other = await store.create_run(agent="claude")
    ids = [await store.inbox_put(run.id, "message", {"text": f"m{n}"}) for n in range(3)]
    await store.inbox_put(other.id, "cancel", {})
    assert ids == sorted(ids)
    assert [message["id"] for message in await store.inbox_pending(run.id)] == ids
    taken = await store.inbox_take(run.id, "executor-1")
    assert [(m["id"], m["kind"], m["payload"], m["taken_by"]) for m in taken] == [
        (ids[0], "message", {"text": "m0"}, "executor-1"),
        (ids[1], "message", {"text": "m1"}, "executor-1"),
        (ids[2], "message", {"text": "m2"}, "executor-1"),
    ]
    assert await store.inbox_take(run.id, "executor-1") == []
    assert await store.inbox_pending(run.id) == []
    assert [m["kind"] for m in await store.inbox_pending(other.id)] == ["cancel"]
    with pytest.raises(NotFoundError):
        await store.inbox_put("run_nope", "message", {})


async def test_concurrent_takers_never_share_a_command(store_url: str) -> None:
    stores = [Store.open(store_url) for _ in range(3)]
    try:
        run = await stores[0].create_run(agent="claude")

        async def put() -> None:
            for n in range(60):
                await stores[0].inbox_put(run.id, "message", {"n": n})

        async def take(store: Store, name: str) -> list[int]:
            got: list[int] = []
            for _ in range(40):
                got += [message["payload"]["n"] for message in await store.inbox_take(run.id, name)]
            return got

        results = await asyncio.gather(put(), take(stores[1], "a"), take(stores[2], "b"))
        rest = [message["payload"]["n"] for message in await stores[1].inbox_take(run.id, "c")]
        seen = results[1] + results[2] + rest
        assert sorted(seen) == list(range(60))
    finally:
        for opened in stores:
            opened.close()
