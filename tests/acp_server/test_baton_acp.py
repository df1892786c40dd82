"""``baton acp`` end to end: an ACP client written against the ``acp`` package spawns the real
command and talks to it over its stdio, with Claude Code behind it on the scripted model.

One editor session across three ``baton acp`` processes sharing one ``BATON_HOME``. The first:
a prompt whose command the policy (``default``) says to ask about is forwarded to the client,
approved there, runs, and is logged as a human decision; a second prompt is the next turn of
the same interactive run; a third is cancelled while its command runs. The second process
``session/resume``s the session after the first exited (nothing replayed) and continues it in a
new run; the third ``session/load``s it: the editor sees its whole conversation again, each
update once, and the next prompt continues it. stdout carries nothing but ACP (a non-JSON line
would reach the client as ``_baton/malformed_line``).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.schema import AllowedOutcome, RequestPermissionResponse
from tests.cli._baton_cli import baton_command, cli_environment

from baton.acp.host import choose_option
from baton.agents.line_transport import LineTransport, stream_limit
from baton.agents.processes import kill_process_group
from baton.config import Settings
from baton.events.project import project
from baton.runs import Baton
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.claude]

KEY = "sk-scripted-anthropic-key-0123456789abcdef"


@dataclass
class EditorClient:
    """Approves every permission it is asked and records what it sees."""

    permissions: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    malformed: list[dict[str, Any]] = field(default_factory=list)
    command_running: asyncio.Event = field(default_factory=asyncio.Event)

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **_: Any) -> Any:
        self.permissions.append(tool_call.model_dump(by_alias=True, exclude_none=True))
        option_id = choose_option(options, True)
        assert option_id is not None
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option_id))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        data = update.model_dump(by_alias=True, exclude_none=True)
        self.updates.append({"sessionId": session_id, **data})
        raw = data.get("rawInput") or {}
        if data.get("sessionUpdate") == "tool_call" and "sleep" in str(raw.get("command")):
            self.command_running.set()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "_baton/malformed_line":
            self.malformed.append(params)


async def spawn_baton_acp(env: dict[str, str], *args: str) -> tuple[asyncio.subprocess.Process, LineTransport]:
    process = await asyncio.create_subprocess_exec(
        *baton_command(),
        "acp",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
        limit=stream_limit(),
    )
    assert process.stdin is not None and process.stdout is not None
    return process, LineTransport(process.stdout, process.stdin, process.stderr)


async def stop(process: asyncio.subprocess.Process, transport: LineTransport) -> None:
    assert process.stdin is not None
    process.stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 10)
    if process.returncode is None:
        kill_process_group(process.pid, 9)
        await process.wait()
    await transport.close()


async def test_a_registry_agent_behind_baton_acp_asks_the_editor(tmp_path: Path, repo: Path) -> None:
    client = EditorClient()
    with ScriptedModelServer("needs-approval") as server:
        env = cli_environment(tmp_path / "home") | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": KEY}
        process, transport = await spawn_baton_acp(env, "--agent", "claude-acp")
        try:
            conn = connect_to_agent(client, transport)  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await stop(process, transport)
    assert done.stop_reason == "end_turn"
    # claude-agent-acp's own options reach the editor; its choice is the decision.
    assert [p["rawInput"]["command"] for p in client.permissions] == ["touch approved.txt"]
    assert (repo / "approved.txt").exists()
    assert client.malformed == []


@pytest.mark.slow(seconds=30)  # three baton acp processes, five turns of the real Claude Code (~30 s)
async def test_an_editor_drives_baton_acp(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    client = EditorClient()
    with ScriptedModelServer("plain") as server:
        env = cli_environment(home) | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": KEY}
        process, transport = await spawn_baton_acp(env)
        try:
            conn = connect_to_agent(client, transport)  # type: ignore[arg-type]
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert init.agent_info is not None and init.agent_info.name == "baton"
            capabilities = init.agent_capabilities
            assert capabilities is not None and capabilities.load_session
            assert capabilities.session_capabilities is not None
            assert capabilities.session_capabilities.resume is not None
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])

            first = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("[scenario:needs-approval] go")]
            )
            assert first.stop_reason == "end_turn"
            assert [p["rawInput"]["command"] for p in client.permissions] == ["touch approved.txt"]
            assert (repo / "approved.txt").exists()
            kinds = [u["sessionUpdate"] for u in client.updates]
            assert "tool_call" in kinds and "agent_message_chunk" in kinds
            assert {u["sessionId"] for u in client.updates} == {session.session_id}

            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("[scenario:plain] again")])
            assert second.stop_reason == "end_turn"

            third = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("[scenario:long-command] wait")])
            )
            await asyncio.wait_for(client.command_running.wait(), 30)
            await conn.cancel(session_id=session.session_id)
            cancelled = await asyncio.wait_for(third, 30)
            assert cancelled.stop_reason == "cancelled"
            runs = [r.field_meta["baton"]["run_id"] for r in (first, second, cancelled) if r.field_meta]
            assert len(runs) == 3 and len(set(runs)) == 1  # one interactive run, three turns
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await stop(process, transport)
        live_first = [u for u in client.updates]

        # A second process resumes the session: nothing is replayed, the conversation goes on.
        resumed = EditorClient()
        process, transport = await spawn_baton_acp(env)
        try:
            conn = connect_to_agent(resumed, transport, use_unstable_protocol=True)  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            listed = await conn.list_sessions(cwd=str(repo))
            assert [info.session_id for info in listed.sessions] == [session.session_id]
            await conn.resume_session(session_id=session.session_id, cwd=str(repo), mcp_servers=[])
            assert resumed.updates == []
            fourth = await conn.prompt(session_id=session.session_id, prompt=[text_block("[scenario:plain] more")])
            assert fourth.stop_reason == "end_turn"
            assert fourth.field_meta is not None
            runs.append(fourth.field_meta["baton"]["run_id"])
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await stop(process, transport)
        assert runs[3] != runs[0]
        assert [u["sessionUpdate"] for u in resumed.updates if u["sessionUpdate"] == "agent_message_chunk"]

        # A third loads it: the whole conversation once, then one more turn.
        loaded = EditorClient()
        process, transport = await spawn_baton_acp(env)
        try:
            conn = connect_to_agent(loaded, transport)  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            with pytest.raises(RequestError) as unknown:
                await conn.load_session(session_id="task_unknown", cwd=str(repo), mcp_servers=[])
            assert unknown.value.code == -32002 and (unknown.value.data or {})["code"] == "session_not_found"
            with pytest.raises(RequestError) as unloaded:
                await conn.prompt(session_id=session.session_id, prompt=[text_block("hello?")])
            assert (unloaded.value.data or {})["code"] == "session_not_found"
            await conn.load_session(session_id=session.session_id, cwd=str(repo), mcp_servers=[])
            replayed = list(loaded.updates)
            fifth = await conn.prompt(session_id=session.session_id, prompt=[text_block("[scenario:plain] last")])
            assert fifth.stop_reason == "end_turn" and fifth.field_meta is not None
            runs.append(fifth.field_meta["baton"]["run_id"])
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await stop(process, transport)
    assert client.malformed == resumed.malformed == loaded.malformed == []
    # What the editor saw live, and the prompts it sent, each exactly once and in order.
    sent = [u for u in replayed if u.get("_meta", {}).get("baton", {}).get("prompt")]
    prompts = [u["content"]["text"] for u in sent]
    assert prompts == [
        "[scenario:needs-approval] go",
        "[scenario:plain] again",
        "[scenario:long-command] wait",
        "[scenario:plain] more",
    ]
    assert {u["sessionUpdate"] for u in sent} == {"user_message_chunk"}
    # The session's name (session_info_update): baton's, live at the first prompt and after a load's replay.
    named = [u["title"] for u in (*live_first, *replayed) if u["sessionUpdate"] == "session_info_update"]
    assert named == ["[scenario:needs-approval] go"] * 2 and replayed[-1]["sessionUpdate"] == "session_info_update"
    agent_side = [u for u in replayed if u not in sent and u["sessionUpdate"] != "session_info_update"]
    live = [u for u in live_first if u["sessionUpdate"] != "session_info_update"]
    assert agent_side == live + resumed.updates
    assert len({runs[0], runs[3], runs[4]}) == 3

    async with Baton(Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)})) as baton:
        entries = await baton.log.read(runs[0])
        answers = [
            e["payload"]["result"]
            for e in entries
            if e["method"] == "session/request_permission" and e["direction"] == "to_agent"
        ]
        # touch approved.txt: approved by the editor; sleep 20: asked, then the turn was cancelled.
        assert len(answers) == len(client.permissions) == 2
        assert answers[0]["_meta"]["baton"]["reason"] == "human"
        assert answers[0]["_meta"]["baton"]["decided_by"] == "human"
        records = [await baton.store.get_run(run_id) for run_id in (runs[0], runs[3], runs[4])]
        last_events = project(await baton.log.read(runs[4]))
    assert [r.status for r in records] == ["cancelled", "finished", "finished"]
    assert {r.task_id for r in records} == {session.session_id}
    assert [r.run_mode for r in records] == ["interactive"] * 3
    assert records[1].resumed_from == runs[0] and records[2].resumed_from == runs[3]
    # The loaded run projects only its own turn: one task.started, one turn, no earlier command.
    types = [e["type"] for e in last_events]
    assert types.count("task.started") == 1 and types.count("turn.finished") == 1
    assert not [e for e in last_events if e["type"].startswith("command.")]
