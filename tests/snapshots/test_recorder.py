"""SnapshotRecorder: tool calls seen in the log ask for captures; a turn's captures are logged first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from baton.events.project import project
from baton.snapshots import LocalBlobStore, ShadowRepo, SnapshotRecorder
from baton.store import Redactor, SessionLog, Store

from .conftest import init_repo

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[tuple[Store, SessionLog]]:
    async with Store.open(f"sqlite:///{tmp_path / 'baton.db'}") as store, SessionLog(store, Redactor()) as opened:
        yield store, opened


def update(call_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "x", "update": {"toolCallId": call_id, **fields}},
    }


def recorder(tmp_path: Path, repo: Path, run_id: str, store: Store, log: SessionLog) -> SnapshotRecorder:
    return SnapshotRecorder(
        run_id=run_id,
        shadow=ShadowRepo(tmp_path / "home" / "shadow.git", repo),
        blobs=LocalBlobStore(tmp_path / "home" / "blobs"),
        log=log,
        scratch=tmp_path / "home" / "scratch",
        store=store,
    )


async def test_file_tools_and_commands_are_captured_before_the_turn_ends(
    tmp_path: Path, log: tuple[Store, SessionLog]
) -> None:
    store, session_log = log
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    run_id = (await store.create_run(agent="claude", repo=str(repo))).id
    session_log.open_run(run_id)
    async with recorder(tmp_path, repo, run_id, store, session_log) as snapshots:
        sink = snapshots.sink(session_log)
        sink.append(
            run_id,
            "baton",
            "_baton/run_started",
            {"jsonrpc": "2.0", "method": "_baton/run_started", "params": {"cwd": str(repo)}},
        )
        write = {
            "kind": "edit",
            "rawInput": {"file_path": str(repo / "b.txt")},
            "_meta": {"baton": {"tool_name": "Write"}},
        }
        sink.append(run_id, "from_agent", "session/update", update("w1", sessionUpdate="tool_call", **write))
        (repo / "b.txt").write_text("b\n")
        (repo / "unrelated.txt").write_text("not named by the Write\n")
        seq = sink.append(
            run_id, "from_agent", "session/update", update("w1", sessionUpdate="tool_call_update", status="completed")
        )
        await snapshots.settle(scan=False)
        assert [s.id for s in snapshots.snapshots] == ["s1"]
        assert snapshots.snapshots[0].changes.added == ("b.txt",)  # targeted: only the named path
        assert snapshots.snapshots[0].log_seq_to == seq

        sink.append(run_id, "from_agent", "session/update", update("c1", sessionUpdate="tool_call", kind="execute"))
        (repo / "a.txt").unlink()
        for number in range(5):  # requests while a capture runs are merged
            sink.append(
                run_id,
                "from_agent",
                "session/update",
                update(f"c{number}", sessionUpdate="tool_call_update", kind="execute", status="completed"),
            )
        await snapshots.settle()  # the end of a turn: scan, wait
        session_log.append(
            run_id,
            "baton",
            "_baton/turn_complete",
            {"jsonrpc": "2.0", "method": "_baton/turn_complete", "params": {"stop_reason": "end_turn"}},
        )
    ids = [s.id for s in snapshots.snapshots]
    assert ids == ["s1", "s2"]
    assert set(snapshots.snapshots[1].changes.added) == {"unrelated.txt"}
    assert snapshots.snapshots[1].changes.deleted == ("a.txt",)
    assert snapshots.snapshots[1].log_seq_from == snapshots.snapshots[0].log_seq_to + 1

    await session_log.flush()
    events = [e for e in project(await session_log.read(run_id)) if e["type"] in ("snapshot.captured", "turn.finished")]
    types = [e["type"] for e in events]
    assert types == ["snapshot.captured", "snapshot.captured", "turn.finished"]
    assert events[0]["data"]["snapshot_id"] == "s1" and events[0]["data"]["added"] == ["b.txt"]
    stored = await store.list_snapshots(run_id)
    assert [s["id"] for s in stored] == ["s1", "s2"]
    assert stored[1]["deleted"] == ["a.txt"] and stored[1]["archive_key"].startswith("sha256:")
    assert (tmp_path / "home" / "blobs").is_dir()


async def test_a_failing_shadow_never_stops_the_run(tmp_path: Path, log: tuple[Store, SessionLog]) -> None:
    store, session_log = log
    run_id = (await store.create_run(agent="claude")).id
    session_log.open_run(run_id)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the shadow's folder would go\n")
    shadow = ShadowRepo(blocked / "shadow.git", tmp_path)
    async with SnapshotRecorder(
        run_id=run_id, shadow=shadow, blobs=LocalBlobStore(tmp_path / "blobs"), log=session_log, scratch=tmp_path / "s"
    ) as snapshots:
        snapshots.request(None, 1)
        await snapshots.settle()
    await session_log.flush()
    entries = await session_log.read(run_id)
    assert [e["method"] for e in entries] == ["_baton/error"]
    assert entries[0]["payload"]["params"]["code"] == "snapshot_failed"
