"""An editor session read back from the store and the log (``baton.acp_server._history``), and
``baton acp``'s refusals, in process against a real SQLite store (no agent is started).

The history an editor sees on ``session/load``: the prompts as ``user_message_chunk`` (a
rebuilt-path resume's first prompt as what the user asked, not the transcript), the agent's
updates once (an agent's own replay, tagged ``_meta.baton.replay``, skipped), run after run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from baton.acp_server import AcpServerOptions, BatonAcpAgent
from baton.acp_server._history import SESSION_SOURCE, history_updates, last_seq, session_runs, session_task
from baton.config import Settings
from baton.errors import NotFoundError
from baton.events.entry import Direction
from baton.runs import Baton
from baton.runs.executors import this_executor_id
from baton.store import SessionLog

pytestmark = pytest.mark.timeout(30)


def _request(method: str, params: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _update(update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}


def _chunk(text: str, **meta: Any) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    if meta:
        update["_meta"] = meta
    return update


def _prompt(text: str) -> dict[str, Any]:
    return _request("session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": text}]})


async def _write(log: SessionLog, run_id: str, entries: list[tuple[Direction, dict[str, Any]]]) -> None:
    log.open_run(run_id)
    for direction, payload in entries:
        log.append(run_id, direction, payload.get("method"), payload)
    await log.flush()


async def test_the_history_shows_each_prompt_and_update_once(settings: Settings, repo: Path) -> None:
    async with Baton(settings) as baton:
        task = await baton.store.create_task("", repo=str(repo), metadata={"source": SESSION_SOURCE})
        first = await baton.store.create_run(agent="claude", task_id=task.id, cwd=str(repo))
        second = await baton.store.create_run(agent="claude", task_id=task.id, cwd=str(repo), resumed_from=first.id)
        other = await baton.store.create_run(agent="claude", cwd=str(repo))  # not the session's
        resume = {"path": "rebuilt", "interrupted_calls": [], "prompt": "and the docs"}
        await _write(
            baton.log,
            first.id,
            [
                ("to_agent", _prompt("write it")),
                ("from_agent", _update(_chunk("done"))),
                ("from_agent", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
            ],
        )
        await _write(
            baton.log,
            second.id,
            [
                ("baton", {"jsonrpc": "2.0", "method": "_baton/resume", "params": resume}),
                ("from_agent", _update(_chunk("done", baton={"replay": True}))),  # the agent's own replay
                ("to_agent", _prompt("<baton-transcript>write it … done</baton-transcript> and the docs")),
                ("from_agent", _update(_chunk("docs too"))),
                ("to_agent", _prompt("thanks")),
            ],
        )
        runs = await session_runs(baton.store, task.id)
        shown = [update async for update in history_updates(baton.log, [run.id for run in runs])]
        assert await last_seq(baton.log, second.id) == 5 and await last_seq(baton.log, other.id) == 0
    assert [run.id for run in runs] == [first.id, second.id]
    texts = [(update["sessionUpdate"], update["content"]["text"]) for update in shown]
    assert texts == [
        ("user_message_chunk", "write it"),
        ("agent_message_chunk", "done"),
        ("user_message_chunk", "and the docs"),
        ("agent_message_chunk", "docs too"),
        ("user_message_chunk", "thanks"),
    ]
    assert all(u["_meta"] == {"baton": {"prompt": True}} for u in shown if u["sessionUpdate"] == "user_message_chunk")


async def test_only_a_task_baton_acp_made_is_a_session(settings: Settings, repo: Path) -> None:
    async with Baton(settings) as baton:
        made = await baton.store.create_task("", metadata={"source": SESSION_SOURCE})
        api_task = await baton.store.create_task("fix the bug", repo=str(repo))
        assert (await session_task(baton.store, made.id)).id == made.id
        for unknown in (api_task.id, "task_nothing"):
            with pytest.raises(NotFoundError) as refused:
                await session_task(baton.store, unknown)
            assert refused.value.code == "session_not_found"


async def test_a_session_another_process_executes_is_refused(settings: Settings, repo: Path) -> None:
    async with Baton(settings) as baton:
        agent = BatonAcpAgent(baton, AcpServerOptions())
        task = await baton.store.create_task("", metadata={"source": SESSION_SOURCE})
        run = await baton.store.create_run(agent="claude", task_id=task.id, cwd=str(repo), run_mode="interactive")
        # A live executor (this test process stands in for another baton acp) holds the run.
        await baton.store.update_run(run.id, status="running", executor_id=this_executor_id())
        for call in (agent.load_session, agent.resume_session):
            with pytest.raises(RequestError) as refused:
                await call(cwd=str(repo), session_id=task.id)
            assert (refused.value.data or {})["code"] == "run_active"
        with pytest.raises(RequestError) as unknown:
            await agent.resume_session(cwd=str(repo), session_id="task_nothing")
        assert unknown.value.code == -32002 and (unknown.value.data or {})["code"] == "session_not_found"
        with pytest.raises(RequestError) as bad_cwd:
            await agent.load_session(cwd="relative/dir", session_id=task.id)
        assert (bad_cwd.value.data or {})["code"] == "invalid_argument"
        # Once nobody executes it, the session is resumed here; the next prompt would continue it.
        await baton.store.update_run(run.id, status="interrupted", executor_id=None)
        await agent.resume_session(cwd=str(repo), session_id=task.id)
        listed = await agent.list_sessions(cwd=str(repo))
        assert [info.session_id for info in listed.sessions] == [task.id]
        assert (await agent.list_sessions(cwd=str(repo.parent))).sessions == []
