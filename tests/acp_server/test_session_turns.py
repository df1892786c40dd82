"""``BatonAcpAgent`` in process, with ``acp_script_agent.py echo`` behind it through the registry:
an editor session's prompts are the turns of one interactive run, and a prompt that finds the
run ended (its idle timeout closed it) continues the session in a new run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from tests.agents.conftest import script_entry

from baton.acp_server import AcpServerOptions, BatonAcpAgent
from baton.agents.registry import AGENTS
from baton.config import Settings
from baton.runs import Baton

pytestmark = pytest.mark.timeout(60)


class Editor:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))


async def _ended(baton: Baton, run_id: str) -> None:
    async for _entry in baton.entries(run_id):  # ends when the run's log closes
        pass


async def test_prompts_are_turns_of_one_run_until_it_ends(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = script_entry("echo", "2")
    monkeypatch.setitem(AGENTS, entry.name, entry)
    editor = Editor()
    configured = replace(settings, interactive_idle_seconds=1.0, openai_api_key="sk-unused-by-the-script-agent")
    async with Baton(configured) as baton:
        agent = BatonAcpAgent(baton, AcpServerOptions(agent=entry.name))
        agent.on_connect(editor)
        session = await agent.new_session(cwd=str(repo))
        answers = [await agent.prompt(session.session_id, [text_block(text)]) for text in ("one", "two")]
        runs = [(answer.field_meta or {})["baton"]["run_id"] for answer in answers]
        assert runs[0] == runs[1]  # two turns of one interactive run
        await _ended(baton, runs[0])  # closed by its idle timeout
        third = await agent.prompt(session.session_id, [text_block("three")])
        runs.append((third.field_meta or {})["baton"]["run_id"])
        await agent.aclose()  # the editor left: the session's run is closed
        records = [await baton.store.get_run(run_id) for run_id in (runs[0], runs[2])]
        entries = await baton.log.read(runs[0])
    assert [a.stop_reason for a in (*answers, third)] == ["end_turn"] * 3
    assert records[1].resumed_from == runs[0] and records[1].task_id == session.session_id
    assert [r.status for r in records] == ["finished", "finished"]
    closed = [e["payload"]["params"]["reason"] for e in entries if e["method"] == "_baton/closed"]
    assert closed == ["idle_timeout"]
    # Each turn's two chunks reached the editor once.
    chunks = [u["content"]["text"] for u in editor.updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert chunks == ["chunk 0", "chunk 1"] * 3
