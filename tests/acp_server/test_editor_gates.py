"""``BatonAcpAgent`` in process with the real Claude Code behind it: Claude's question and plan
review reach the editor as permission requests, and the editor's choices reach Claude."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from baton.acp_server import AcpServerOptions, BatonAcpAgent
from baton.config import Settings
from baton.events.project import project
from baton.runs import Baton
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.claude]

KEY = "sk-scripted-anthropic-key-0123456789abcdef"


@dataclass
class Editor:
    """Picks, for each request, the option named in ``picks`` under the request's title (or
    dismisses it when the title is not there; ``approve``: the first allow option, whatever the
    title), and records what it was asked."""

    picks: dict[str, str] = field(default_factory=dict)
    approve: bool = False
    asked: list[tuple[str, list[str]]] = field(default_factory=list)

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **_: Any) -> Any:
        title = str(tool_call.title or "")
        self.asked.append((title, [option.name for option in options]))
        wanted = self.picks.get(title)
        chosen = next(
            (o.option_id for o in options if o.name == wanted or (self.approve and o.kind == "allow_once")), None
        )
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None


async def _ask(settings: Settings, repo: Path, editor: Editor) -> list[dict[str, Any]]:
    with ScriptedModelServer("ask-question") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=KEY)
        async with Baton(configured) as baton:
            agent = BatonAcpAgent(baton, AcpServerOptions())
            agent.on_connect(editor)
            session = await agent.new_session(cwd=str(repo))
            answer = await agent.prompt(session.session_id, [text_block("go")])
            run_id = (answer.field_meta or {})["baton"]["run_id"]
            await agent.aclose()
            return await baton.log.read(run_id)


def _agent_texts(entries: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["text"] for e in project(entries) if e["type"] == "message" and e["data"]["role"] == "agent"]


async def test_the_editor_answers_claudes_questions(settings: Settings, repo: Path) -> None:
    editor = Editor({"Which database should I use?": "SQLite", "Which extras do you want?": "Metrics"})
    entries = await _ask(settings, repo, editor)
    assert editor.asked == [
        ("Which database should I use?", ["Postgres", "SQLite", "Don't answer"]),
        ("Which extras do you want?", ["Caching", "Metrics", "Don't answer"]),
    ]
    # Claude Code's own tool result, which the scripted model quotes back.
    [final] = [text for text in _agent_texts(entries) if text.startswith("Answered.")]
    assert '"Which database should I use?"="SQLite"' in final and '"Which extras do you want?"="Metrics"' in final
    [decision] = [
        e["payload"]["result"]["_meta"]["baton"]
        for e in entries
        if e["method"] == "session/request_permission" and e["direction"] == "to_agent"
    ]
    assert decision["decision"] == "allow" and decision["decided_by"] == "human"
    assert decision["updated_input"]["answers"] == {
        "Which database should I use?": "SQLite",
        "Which extras do you want?": "Metrics",
    }


async def test_a_question_the_editor_dismisses_is_denied(settings: Settings, repo: Path) -> None:
    editor = Editor({"Which database should I use?": "Postgres"})  # the second question is dismissed
    entries = await _ask(settings, repo, editor)
    assert [title for title, _ in editor.asked] == ["Which database should I use?", "Which extras do you want?"]
    [decision] = [
        e["payload"]["result"]["_meta"]["baton"]
        for e in entries
        if e["method"] == "session/request_permission" and e["direction"] == "to_agent"
    ]
    assert decision["decision"] == "deny" and "did not answer: Which extras do you want?" in decision["message"]
    [final] = [text for text in _agent_texts(entries) if text.startswith("Answered.")]
    assert "Postgres" not in final  # Claude got a denial, not a partial answer


async def test_the_editor_approves_claudes_plan(settings: Settings, repo: Path) -> None:
    editor = Editor(approve=True)
    with ScriptedModelServer("plan-review") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=KEY)
        async with Baton(configured) as baton:
            agent = BatonAcpAgent(baton, AcpServerOptions(permission_mode="plan", allow=("Bash(echo:*)",)))
            agent.on_connect(editor)
            session = await agent.new_session(cwd=str(repo))
            answer = await agent.prompt(session.session_id, [text_block("go")])
            run_id = (answer.field_meta or {})["baton"]["run_id"]
            await agent.aclose()
            entries = await baton.log.read(run_id)
    # Only the plan review: once it is approved the run leaves plan mode and echo is allowed.
    assert len(editor.asked) == 1, editor.asked
    texts = _agent_texts(entries)
    assert any(text.startswith("Plan review result:") and "approved your plan" in text for text in texts), texts
    assert any(text.startswith("Done.") and "after-plan" in text for text in texts), texts
