"""baton serve end to end: the real Claude Code (scripted model) started over HTTP and watched over SSE."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server._server import RunningServer, SseMessage, read_stream, running_server, sse_messages, wait_until

from baton.config import Settings
from baton.events.project import project
from baton.snapshots.archive import verify_archive
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-model-key-0123456789abcdef"


@contextmanager
def serving(settings: Settings, scenario: str) -> Iterator[RunningServer]:
    with ScriptedModelServer(scenario) as model:
        configured = replace(settings, anthropic_base_url=model.base_url, anthropic_api_key=MODEL_KEY)
        with running_server(configured) as server:
            yield server


def stored(server: RunningServer, run_id: str) -> tuple[list[Any], list[Any]]:
    """The run's log entries and their projection, as JSON (what a client receives)."""
    entries = server.call(lambda: server.baton.log.read(run_id))
    return json.loads(json.dumps(entries)), json.loads(json.dumps(project(entries)))


async def ended(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The run object once the store has the end too (the log's last entry commits first)."""
    for _ in range(200):
        run: dict[str, Any] = (await client.get(f"/v1/runs/{run_id}")).json()
        if run["finished_at"] is not None:
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end in the store")


async def test_a_run_started_over_http_streams_exactly_its_log(settings: Settings, repo: Path, tmp_path: Path) -> None:
    with serving(settings, "write-and-run") as server:
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
            body = {"prompt": "go", "repo": str(repo), "permission_mode": "acceptEdits", "allow": ["Bash(echo:*)"]}
            created = await client.post("/v1/runs", json=body)
            assert created.status_code == 201, created.text
            run = created.json()
            assert run["status"] in ("queued", "running") and run["repo"] == str(repo.resolve())
            url = f"/v1/runs/{run['id']}/events"
            # Two viewers from the start, one of the log itself, and one that leaves after three
            # events and comes back with Last-Event-ID.
            events_viewer = asyncio.create_task(read_stream(client, url, {}))
            second_viewer = asyncio.create_task(read_stream(client, url, {}))
            acp_viewer = asyncio.create_task(read_stream(client, url + "?view=acp", {}))
            first_part = await read_stream(client, url, {}, stop_after=3)
            rest = await read_stream(client, url, {"Last-Event-ID": str(first_part[-1].id)})
            received, again, acp = await asyncio.wait_for(asyncio.gather(events_viewer, second_viewer, acp_viewer), 60)
            final = await ended(client, run["id"])
            snapshots = (await client.get(f"/v1/runs/{run['id']}/snapshots")).json()["snapshots"]
            patch = await client.get(f"/v1/runs/{run['id']}/diff")
            last = snapshots[-1]["id"]
            archive = await client.get(f"/v1/runs/{run['id']}/snapshots/{last}/archive")
            missing = await client.get(f"/v1/runs/{run['id']}/snapshots/s999/archive")
            bad_from = await client.get(f"/v1/runs/{run['id']}/diff", params={"from": "s999"})
            sandbox = (await client.get(f"/v1/runs/{run['id']}/sandbox")).json()
            no_run = await client.get("/v1/runs/run_nope/sandbox")
        entries, events = stored(server, run["id"])
        stored_snapshots = server.call(lambda: server.baton.store.list_snapshots(run["id"]))
    assert final["status"] == "finished" and final["id"] == run["id"]
    assert (repo / "hello.txt").exists()
    types = [event["type"] for event in events]
    assert types[0] == "task.started" and types[-1] == "task.finished" and "command.finished" in types

    def as_sent(messages: list[SseMessage]) -> list[tuple[int | None, str, Any]]:
        return [(m.id, m.event, m.data) for m in messages]

    assert as_sent(received) == [(e["seq"], e["type"], e) for e in events]
    assert as_sent(again) == as_sent(received)
    assert as_sent(first_part + rest) == as_sent(received)  # no gap, no duplicate across the reconnect
    assert as_sent(acp) == [(e["seq"], "entry", e) for e in entries]
    assert MODEL_KEY not in json.dumps(entries)
    # The run's snapshots over HTTP, as `baton snapshots / diff / snapshot-export` give them.
    assert [snapshot["id"] for snapshot in snapshots] == [snapshot["id"] for snapshot in stored_snapshots]
    assert any("hello.txt" in snapshot["added"] for snapshot in snapshots)
    assert patch.status_code == 200 and patch.headers["content-type"].startswith("text/x-diff")
    assert "+++ b/hello.txt" in patch.text and "+hello from baton" in patch.text
    assert archive.status_code == 200 and archive.headers["content-type"] == "application/gzip"
    (tmp_path / "archive.tar.gz").write_bytes(archive.content)
    verify_archive(tmp_path / "archive.tar.gz")
    assert missing.status_code == bad_from.status_code == 404
    assert missing.json()["error"]["code"] == bad_from.json()["error"]["code"] == "snapshot_not_found"
    # Where it ran, as its log says (GET /v1/runs/{id}/sandbox).
    logged = [e["payload"]["params"] for e in entries if e["method"] == "_baton/sandbox"]
    assert sandbox == {"run_id": run["id"], "sandbox": logged[-1]}
    assert sandbox["sandbox"]["mode"] == "bwrap" and sandbox["sandbox"]["network"]["mode"] == "isolated"
    assert no_run.status_code == 404


async def test_cancel_over_json_rpc_while_a_viewer_leaves(settings: Settings, repo: Path) -> None:
    with serving(settings, "long-command") as server:
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
            body = {"prompt": "go", "repo": str(repo), "allow": ["Bash(sleep:*)", "Bash(echo:*)"]}
            run_id = (await client.post("/v1/runs", json=body)).json()["id"]
            url = f"/v1/runs/{run_id}/events"
            staying = asyncio.create_task(read_stream(client, url, {}))
            async with client.stream("GET", url) as leaving:
                async for message in sse_messages(leaving):
                    if message.event == "command.started":
                        break
            # The viewer that left no longer holds a stream; the run and the other viewer go on.
            await asyncio.to_thread(wait_until, lambda: server.streams.open == 1, 10, "the stream to end")
            assert server.streams.client_left == 1
            await asyncio.sleep(0.5)  # let `sleep` start
            command = {"jsonrpc": "2.0", "id": 1, "method": "cancel"}
            answer = await client.post(f"/v1/runs/{run_id}/command", json=command)
            # Through the run's inbox, like any command from any process.
            assert answer.status_code == 200 and answer.json() == {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"status": "queued", "inbox_id": answer.json()["result"]["inbox_id"]},
            }
            received = await asyncio.wait_for(staying, 30)
            final = await ended(client, run_id)
            again = await client.post(f"/v1/runs/{run_id}/command", json=command)
    assert received[-1].event == "task.finished" and received[-1].data["data"]["stop_reason"] == "cancelled"
    assert final["status"] == "cancelled"
    assert again.json()["error"]["data"]["code"] == "run_not_running"
    assert server.streams.open == 0


async def test_clients_in_other_processes_reconnecting_at_random_points_get_the_log_exactly(
    settings: Settings, repo: Path
) -> None:
    """Three client processes leave and come back (Last-Event-ID) at random points of a live run."""
    with serving(settings, "three-steps") as server:
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
            allow = ["Bash(sleep:*)", "Bash(echo:*)"]  # every call allowed: no gate opens
            body = {"prompt": "go", "repo": str(repo), "permission_mode": "acceptEdits", "allow": allow}
            created = await client.post("/v1/runs", json=body)
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
            url = f"{server.base_url}/v1/runs/{run_id}/events"
            clients = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.server._reconnecting_client",
                    url,
                    server.token or "",
                    str(seed),
                    stdout=asyncio.subprocess.PIPE,
                    cwd=Path(__file__).resolve().parents[2],
                )
                for seed in (1, 2, 3)
            ]
            outputs = await asyncio.wait_for(asyncio.gather(*(c.communicate() for c in clients)), 90)
            final = await ended(client, run_id)
        _, events = stored(server, run_id)
    assert final["status"] == "finished"
    expected = [[e["seq"], e["type"], e] for e in events]
    assert [c.returncode for c in clients] == [0, 0, 0]
    for stdout, _ in outputs:
        result = json.loads(stdout)
        assert result["messages"] == expected  # the union of its connections: in order, no gap, no duplicate
        assert result["connections"] > 2
