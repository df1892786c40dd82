"""``baton acp`` over a real ACP connection (the ``acp`` package's client, in-memory transport),
with ``acp_script_agent.py features`` behind it through the registry.

The newer protocol as an editor sees it: ``session/close`` and ``session/list`` page by page
(``nextCursor``) and by ``cwd``, with titles; ``session_info_update`` naming a session; the
turn's token counts on the prompt's answer; the agent's ``config_option_update`` not forwarded
(the editor cannot set those options through baton) while its ``available_commands_update`` and
after-turn updates are; ``$/cancel_request`` from the editor for a prompt (answered
``cancelled``), and a permission forwarded to the editor that the agent withdrew, withdrawn from
the editor with ``$/cancel_request``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, run_agent, text_block
from tests.agents.conftest import script_entry

import baton.acp_server._agent as server_agent
from baton.acp.cancel import CANCEL_REQUEST, CancellableTransport
from baton.acp.transport import Transport, memory_transport_pair
from baton.acp_server import AcpServerOptions, BatonAcpAgent
from baton.agents.registry import AGENTS
from baton.config import Settings
from baton.runs import Baton

pytestmark = pytest.mark.timeout(60)


class EditorEnd:
    """The editor's end of the connection: records what it sends and the cancels it receives."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self.sent: list[dict[str, Any]] = []
        self.cancels: list[Any] = []
        self.sent_one = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.sent_one.set()
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._inner.receive()
            if message is None or message.get("method") != CANCEL_REQUEST:
                return message
            self.cancels.append(message["params"]["requestId"])  # the SDK's client routes no $/ method

    async def close(self) -> None:
        await self._inner.close()


@dataclass
class Editor:
    updates: list[dict[str, Any]] = field(default_factory=list)
    asked: list[Any] = field(default_factory=list)
    hanging: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        data = update.model_dump(by_alias=True, exclude_none=True)
        self.updates.append({"sessionId": session_id, **data})
        if data.get("content", {}).get("text") == "hanging":
            self.hanging.set()

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **_: Any) -> Any:
        self.asked.append(tool_call.tool_call_id)
        await asyncio.Event().wait()  # the user never answers; the request is withdrawn


async def test_the_newer_protocol_as_an_editor_sees_it(
    settings: Settings, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = script_entry("features")
    monkeypatch.setitem(AGENTS, entry.name, entry)
    monkeypatch.setattr(server_agent, "_LIST_PAGE", 2)  # three sessions make two pages
    configured = replace(settings, openai_api_key="sk-unused-by-the-script-agent")
    server_end, client_end = memory_transport_pair()
    editor, wire = Editor(), EditorEnd(client_end)
    async with Baton(configured) as baton:
        agent = BatonAcpAgent(baton, AcpServerOptions(agent=entry.name))
        agent.editor_transport = CancellableTransport(server_end)
        serving = asyncio.ensure_future(run_agent(agent, agent.editor_transport, use_unstable_protocol=True))
        conn = connect_to_agent(editor, wire, use_unstable_protocol=True)
        try:
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            offered = init.agent_capabilities.session_capabilities
            assert offered.list is not None and offered.close is not None and offered.resume is not None

            sessions = []
            for text in ("add a test", "fix the docs\nand more", "withdraw"):
                session = (await conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
                answer = await conn.prompt(session_id=session, prompt=[text_block(text)])
                sessions.append((session, answer))
                if text != "withdraw":
                    await conn.close_session(session_id=session)  # the next session may use the workspace
            first, first_answer = sessions[0]
            assert first_answer.usage is not None and first_answer.usage.input_tokens == 100
            assert first_answer.usage.total_tokens == 110
            with pytest.raises(RequestError) as closed:
                await conn.prompt(session_id=first, prompt=[text_block("more")])
            assert (closed.value.data or {})["code"] == "session_not_found"

            # The withdrawn permission: asked of the editor, then withdrawn from it.
            withdrawn, answer = sessions[2]
            assert answer.stop_reason == "end_turn" and editor.asked == ["withdrawn-1"]
            asked = [m["id"] for m in wire.sent if m.get("id") is not None and "method" not in m]
            assert wire.cancels and not set(wire.cancels) & set(asked)  # never answered by the editor
            assert not (repo / "withdrawn.txt").exists()

            # The editor cancels a prompt with $/cancel_request.
            wire.sent_one.clear()
            hang = asyncio.ensure_future(conn.prompt(session_id=withdrawn, prompt=[text_block("hang")]))
            await asyncio.wait_for(editor.hanging.wait(), 20)
            prompt_id = next(m["id"] for m in reversed(wire.sent) if m.get("method") == "session/prompt")
            await client_end.send({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": prompt_id}})
            assert (await asyncio.wait_for(hang, 20)).stop_reason == "cancelled"

            pages = [await conn.list_sessions(cwd=str(repo))]
            assert pages[0].next_cursor is not None
            pages.append(await conn.list_sessions(cwd=str(repo), cursor=pages[0].next_cursor))
            assert pages[1].next_cursor is None
            listed = [info for page in pages for info in page.sessions]
            assert sorted(info.session_id for info in listed) == sorted(s for s, _ in sessions)
            titles = {info.session_id: info.title for info in listed}
            assert [titles[s] for s, _ in sessions] == ["add a test", "fix the docs", "withdraw"]
            assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []
            with pytest.raises(RequestError):
                await conn.list_sessions(cursor="not-a-cursor")
        finally:
            await conn.close()
            await agent.aclose()
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await serving

    kinds = [(u["sessionId"], u["sessionUpdate"]) for u in editor.updates]
    assert "config_option_update" not in {kind for _, kind in kinds}
    named = [(u["sessionId"], u["title"]) for u in editor.updates if u["sessionUpdate"] == "session_info_update"]
    assert named == [
        (s, title) for (s, _), title in zip(sessions, ("add a test", "fix the docs", "withdraw"), strict=True)
    ]
    assert (first, "available_commands_update") in kinds
    texts = [u["content"]["text"] for u in editor.updates if u["sessionId"] == first and "content" in u]
    assert texts == ["turn 1: add a test", "late 1"]  # the after-turn text reached the editor too
