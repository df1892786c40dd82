"""The host against an ACP peer of the newer protocol (``acp_script_agent.py features``), over
its stdio, with the tap logging into a real SQLite session log.

``session/list`` across pages and by ``cwd``; ``session/close``; ``session/resume`` (nothing
replayed) against ``session/load`` (the replay tagged); ``session_info_update``,
``available_commands_update``, ``config_option_update`` and a boolean config option in the
host's :class:`~baton.acp.session_state.AgentSession`; ``usage_update`` → the turn's usage; the
updates the agent sends after its turn ended (logged, tagged ``after_turn``, not the next turn's
usage); and ``$/cancel_request`` for a permission waiting on a human (answered -32800, the
human's question withdrawn).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, PermissionOption
from tests.agents.conftest import SCRIPT

from baton.acp.cancel import REQUEST_CANCELLED
from baton.acp.host import BatonHost
from baton.acp.replay import ReplayTagger, restore_session
from baton.acp.sessions import close_agent_session, list_agent_sessions, set_config_option
from baton.acp.tap import TappingTransport
from baton.agents.line_transport import LineTransport, stream_limit
from baton.agents.processes import kill_process_group
from baton.config import Settings
from baton.errors import UsageError
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.gates import Decision, Gatekeeper, Policy
from baton.runs import Baton
from baton.store import SessionLog

pytestmark = pytest.mark.timeout(30)


class RecordingHost(BatonHost):
    """The host, noting when the agent's after-turn usage arrived (tests wait on it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._late = asyncio.Condition()
        self.late_usages = 0

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        await super().session_update(session_id, update, **meta)
        if update.session_update == "usage_update" and self.session.late_updates:
            async with self._late:
                self.late_usages += 1
                self._late.notify_all()

    async def late_usage(self, count: int = 1) -> None:
        """Until the agent's ``count``-th after-turn usage_update arrived."""
        async with self._late:
            await asyncio.wait_for(self._late.wait_for(lambda: self.late_usages >= count), 10)


@dataclass
class Peer:
    conn: Any
    host: RecordingHost
    log: SessionLog
    capabilities: Any
    run_id: str

    async def entries(self) -> list[LogEntry]:
        await self.log.flush()
        return await self.log.read(self.run_id)


class Human:
    """Asked about every call; never answers, and records that the question was withdrawn."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.withdrawn = asyncio.Event()

    async def __call__(self, options: list[PermissionOption], tool_call: Any, decision: Decision) -> str | None:
        self.asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.withdrawn.set()
            raise
        return None


@pytest.fixture
async def peer(settings: Settings, repo: Path) -> AsyncIterator[tuple[Peer, Human]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        "features",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=stream_limit(),
    )
    assert process.stdin is not None and process.stdout is not None
    human = Human()
    async with Baton(settings) as baton:
        run_id = (await baton.store.create_run(agent="script-features", cwd=str(repo))).id
        baton.log.open_run(run_id)
        lines = LineTransport(process.stdout, process.stdin, process.stderr)
        tap = TappingTransport(ReplayTagger(lines), baton.log, run_id)

        async def wait_logged() -> None:
            await baton.log.wait_committed(run_id, tap.last_seq)

        host = RecordingHost(Gatekeeper(Policy.build("default"), repo), wait_logged, ask_human=human)
        conn = connect_to_agent(host, tap)
        try:
            capabilities = ClientCapabilities(fs=FileSystemCapabilities(), terminal=False)
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
            yield Peer(conn, host, baton.log, init.agent_capabilities, run_id), human
        finally:
            await conn.close()
            kill_process_group(process.pid)
            await process.wait()


async def test_sessions_are_listed_page_by_page_and_by_cwd_and_closed(
    peer: tuple[Peer, Human], repo: Path, tmp_path: Path
) -> None:
    agent, _ = peer
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    made = [(await agent.conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id for cwd in (repo, elsewhere, repo)]
    listed = await list_agent_sessions(agent.conn, agent.capabilities)
    assert [info.session_id for info in listed] == made[::-1]  # newest first, over two pages
    pages = [e for e in await agent.entries() if e["method"] == "session/list" and e["direction"] == "to_agent"]
    assert [(e["payload"]["params"] or {}).get("cursor") for e in pages] == [None, "2"]
    here = await list_agent_sessions(agent.conn, agent.capabilities, cwd=str(repo))
    assert [info.session_id for info in here] == [made[2], made[0]]
    assert await close_agent_session(agent.conn, agent.capabilities, made[1])
    assert [info.session_id for info in await list_agent_sessions(agent.conn, agent.capabilities)] == [made[2], made[0]]
    offered_nothing = agent.capabilities.model_copy(update={"session_capabilities": None})
    assert await list_agent_sessions(agent.conn, offered_nothing) == []
    assert not await close_agent_session(agent.conn, offered_nothing, made[0])


async def test_config_options_select_and_boolean(peer: tuple[Peer, Human], repo: Path) -> None:
    agent, _ = peer
    new = await agent.conn.new_session(cwd=str(repo), mcp_servers=[])
    session = agent.host.session
    session.take_response(new)
    assert [(o["id"], o["type"], o["currentValue"]) for o in session.config_options] == [
        ("model", "select", "small"),
        ("brave", "boolean", False),
    ]
    for option_id, wrong in (("brave", "yes"), ("model", True), ("model", "huge"), ("colour", "red")):
        with pytest.raises(UsageError) as refused:
            await set_config_option(agent.conn, session, new.session_id, option_id, wrong)
        assert refused.value.code == "invalid_argument"
    await set_config_option(agent.conn, session, new.session_id, "brave", True)
    assert session.option("brave") == {"id": "brave", "name": "Brave", "type": "boolean", "currentValue": True}
    sent = [e for e in await agent.entries() if e["method"] == "session/set_config_option"]
    assert sent[0]["payload"]["params"] == {
        "sessionId": new.session_id,
        "configId": "brave",
        "type": "boolean",
        "value": True,
    }
    assert len(sent) == 2  # the request and its answer: nothing was sent for the refused values


async def test_session_updates_usage_and_what_comes_after_the_turn(peer: tuple[Peer, Human], repo: Path) -> None:
    agent, _ = peer
    host = agent.host
    session_id = (await agent.conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
    host.turn_started()
    first = await agent.conn.prompt(session_id=session_id, prompt=[text_block("add a test")])
    assert host.turn_usage(first) == {
        "usage": {
            "inputTokens": 100,
            "outputTokens": 10,
            "totalTokens": 110,
            "context_used": 100,
            "context_size": 1000,
        },
        "total_cost_usd": 0.01,
    }
    await host.late_usage()  # "late 1" and its usage came after the answer
    assert host.session.cost_usd == 0.015 and host.session.usage == {
        "used": 150,
        "size": 1000,
        "cost": {"amount": 0.015, "currency": "USD"},
    }
    host.turn_started()
    assert host.last_usage_update is None  # the late usage is not the next turn's
    second = await agent.conn.prompt(session_id=session_id, prompt=[text_block("and run it")])
    assert host.turn_usage(second)["total_cost_usd"] == 0.02
    await host.late_usage(2)
    assert host.session.title == "add a test" and host.session.updated_at == "2026-12-02T10:02:00Z"
    assert host.session.commands == [{"name": "turns", "description": "how many turns so far"}]

    entries = await agent.entries()
    answered = [e["seq"] for e in entries if e["method"] == "session/prompt" and e["direction"] == "from_agent"]
    late = [e for e in entries if (e["payload"].get("params") or {}).get("update", {}).get("_meta")]
    assert [(e["payload"]["params"]["update"]["sessionUpdate"], e["seq"] > answered[0]) for e in late][:2] == [
        ("agent_message_chunk", True),
        ("usage_update", True),
    ]
    assert all(e["payload"]["params"]["update"]["_meta"] == {"baton": {"after_turn": True}} for e in late)
    # Logged and projected (not lost), each after the turn it belongs to.
    texts = [e["data"]["text"] for e in project(entries) if e["type"] == "message" and e["data"]["role"] == "agent"]
    assert texts == ["turn 1: add a test", "late 1", "turn 2: and run it", "late 2"]


async def test_resume_replays_nothing_and_load_replays_tagged(peer: tuple[Peer, Human], repo: Path) -> None:
    agent, _ = peer
    session_id = (await agent.conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
    await agent.conn.prompt(session_id=session_id, prompt=[text_block("first")])
    await agent.host.late_usage()
    before = len(await agent.entries())
    resumed = await restore_session(agent.conn, agent.capabilities, session_id, str(repo), {})
    assert resumed is not None and resumed.session_id == session_id
    during_resume = [e["method"] for e in (await agent.entries())[before:]]
    assert during_resume == ["session/resume", "session/resume"]  # the request and its answer only
    load_only = agent.capabilities.model_copy(update={"session_capabilities": None})
    before = len(await agent.entries())
    assert await restore_session(agent.conn, load_only, session_id, str(repo), {}) is not None
    replayed = [e for e in (await agent.entries())[before:] if e["method"] == "session/update"]
    assert len(replayed) == 7  # the turn's five updates and the two it sent after its answer
    assert all(e["payload"]["params"]["update"]["_meta"]["baton"]["replay"] is True for e in replayed)


async def test_a_withdrawn_permission_request_is_answered_cancelled(peer: tuple[Peer, Human], repo: Path) -> None:
    agent, human = peer
    session_id = (await agent.conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
    agent.host.turn_started()
    answer = await agent.conn.prompt(session_id=session_id, prompt=[text_block("withdraw")])
    assert answer.stop_reason == "end_turn"
    assert human.asked.is_set() and human.withdrawn.is_set()  # the human's question was withdrawn
    entries = await agent.entries()
    methods = [(e["direction"], e["method"]) for e in entries]
    asked = methods.index(("from_agent", "session/request_permission"))
    assert methods[asked + 1] == ("from_agent", "$/cancel_request")
    reply = next(e for e in entries[asked + 2 :] if e["method"] == "session/request_permission")
    assert reply["direction"] == "to_agent" and reply["payload"]["error"]["code"] == REQUEST_CANCELLED
    said = [e for e in project(entries) if e["type"] == "message" and e["data"]["role"] == "agent"]
    assert str(REQUEST_CANCELLED) in said[-1]["data"]["text"]
    assert not (repo / "withdrawn.txt").exists()
