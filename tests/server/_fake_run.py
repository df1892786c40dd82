"""A run in a real server's store whose log the test writes: no agent, entries as fast or idle as needed."""

from __future__ import annotations

import json
from typing import Any

from tests.server._server import RunningServer


class FakeRun:
    """A run in the server's store whose log the test writes, in the server's event loop."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        baton = server.baton
        self.id = server.call(lambda: baton.store.create_run(agent="claude", owner="local", repo="/work/repo")).id

        async def open_run() -> None:
            baton.log.open_run(self.id)

        server.call(open_run)
        self.append(
            "baton",
            "_baton/run_started",
            {"run_id": self.id, "agent": "claude", "model": None, "cwd": "/work/repo", "permission_mode": "default"},
        )
        self.append("baton", "_baton/agent_session", {"agent_session_id": "sess-1", "adapter": "claude"})

    def append(self, direction: str, method: str, params: dict[str, Any], count: int = 1) -> None:
        async def write() -> None:
            for _ in range(count):
                message = {"jsonrpc": "2.0", "method": method, "params": params}
                self.server.baton.log.append(self.id, direction, method, message)  # type: ignore[arg-type]
            await self.server.baton.log.flush()

        self.server.call(write)

    def say(self, text: str, count: int = 1) -> None:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        self.append("from_agent", "session/update", {"sessionId": "sess-1", "update": update}, count)

    def finish(self) -> None:
        self.append("baton", "_baton/status", {"status": "finished", "reason": "end_turn", "stop_reason": "end_turn"})
        baton = self.server.baton

        async def close() -> None:
            if (await baton.store.get_run(self.id)).status == "queued":  # by allowed moves only
                await baton.store.update_run(self.id, status="running")
            await baton.store.update_run(self.id, status="finished")
            baton.log.close_run(self.id)

        self.server.call(close)

    def entries(self) -> list[Any]:
        return json.loads(json.dumps(self.server.call(lambda: self.server.baton.log.read(self.id))))


def events_url(server: RunningServer, run_id: str, query: str = "") -> str:
    return f"{server.base_url}/v1/runs/{run_id}/events{query}"
