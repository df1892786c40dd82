"""``session/load`` replays a conversation: with :class:`ReplayTagger` between the agent and the
tap, the replayed updates are logged tagged and yield no runner events (no duplicates).

Against the real claude-agent-acp (``loadSession: true``): one process runs ``write-and-run``, a
second one, with the same home, loads that session and answers one more prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from tests.agents.native import Recording, RecordingClient
from tests.conftest import make_git_repo

from baton.acp.replay import ReplayTagger
from baton.acp.tap import TappingTransport
from baton.agents.claude_acp import claude_acp_command
from baton.agents.registry import CLAUDE_ACP
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.events.entry import LogEntry, utc_timestamp
from baton.events.project import project
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.claude]

setting_meta = CLAUDE_ACP.settings[0].config.session_meta()
KEY = "sk-scripted-anthropic-key-0123456789abcdef"


class ListSink:
    def __init__(self) -> None:
        self.entries: list[LogEntry] = []

    def append(self, run_id: str, direction: Any, method: str | None, payload: dict[str, Any]) -> int:
        seq = len(self.entries) + 1
        self.entries.append(
            {
                "run_id": run_id,
                "seq": seq,
                "ts": utc_timestamp(),
                "direction": direction,
                "method": method,
                "payload": payload,
            }
        )
        return seq

    async def drain(self) -> None:
        return None


def _context(workspace: Path, home: Path, base_url: str) -> LaunchContext:
    setting = CLAUDE_ACP.settings[0].config
    return LaunchContext(
        "replay-" + os.urandom(4).hex(), workspace, home, None, base_url, KEY, (), dict(os.environ), setting, 1
    )


async def test_a_loaded_session_replays_tagged_and_projects_no_duplicates(tmp_path: Path) -> None:
    workspace = make_git_repo(tmp_path / "work", {"README.md": "# r\n"})
    home = tmp_path / "home"
    executable = CLAUDE_ACP.executable()
    assert executable is not None
    with ScriptedModelServer("write-and-run") as server:
        first = SubprocessAgent(
            "claude-acp", claude_acp_command(_context(workspace, home, server.base_url), executable)
        )
        try:
            conn = connect_to_agent(RecordingClient(Recording()), await first.start())  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[], **setting_meta)
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), 60)
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await first.aclose()

        sink = ListSink()
        second = SubprocessAgent(
            "claude-acp", claude_acp_command(_context(workspace, home, server.base_url), executable)
        )
        try:
            tap = TappingTransport(ReplayTagger(await second.start()), sink, "run-replay")
            conn = connect_to_agent(RecordingClient(Recording()), tap)  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            await conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[], **setting_meta)
            await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("[scenario:plain] again")]), 60
            )
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await second.aclose()
    updates = [e for e in sink.entries if e["method"] == "session/update"]
    replayed = [e for e in updates if e["payload"]["params"]["update"].get("_meta", {}).get("baton", {}).get("replay")]
    assert replayed, "claude-agent-acp replayed nothing on session/load"
    kinds = {e["payload"]["params"]["update"]["sessionUpdate"] for e in replayed}
    assert {"tool_call", "agent_message_chunk"} <= kinds
    live = [e for e in updates if e not in replayed]
    assert live and all(e["seq"] > max(r["seq"] for r in replayed) for e in live)
    events = project(sink.entries)
    # Nothing of the first process's turn comes back as an event: no command, no file change.
    assert [e["type"] for e in events if e["type"].startswith(("command", "file"))] == []
    assert [e["data"]["text"] for e in events if e["type"] == "message" and e["data"]["role"] == "agent"]
    # Untagged, the same log would repeat the first turn's command.
    untagged = copy.deepcopy(sink.entries)
    for entry in untagged:
        update = (entry["payload"].get("params") or {}).get("update")
        if isinstance(update, dict):
            update.get("_meta", {}).get("baton", {}).pop("replay", None)
    assert [e["data"]["command"] for e in project(untagged) if e["type"] == "command.finished"] == ["echo hi"]
