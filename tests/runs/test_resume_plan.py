"""Resume without an agent: prompts, executor liveness, taking a run over, the stored conversation.

These use the real store and session log (SQLite under a fresh ``BATON_HOME``); the agent side
is tested in test_resume_claude.py and test_resume_crash.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.golden.build import EntryLog, build_sample

from baton.config import Settings
from baton.errors import RefusedError
from baton.events.entry import LogEntry
from baton.runs import resume
from baton.runs.conversation import Conversation, ToolCall, rebuild_conversation
from baton.runs.executors import effective_status, executor_alive, process_start_ticks, this_executor_id
from baton.runs.resume import (
    RESUME_MARKER,
    claude_session_file,
    continuation_prompt,
    load_conversation,
    plan_resume,
    rebuilt_prompt,
)
from baton.store import REDACTED, Redactor, SessionLog, Store
from baton.store.tables import log_entries, runs

SESSION = "sess-1"


def tool_call(call_id: str, tool: str, raw_input: dict[str, Any]) -> ToolCall:
    return ToolCall(
        id=call_id, tool=tool, title=None, kind=None, input=raw_input, status="pending", output=None, text=None
    )


# -- prompts ------------------------------------------------------------------------------------


def test_the_continuation_prompt_names_each_interrupted_call_with_a_stable_marker() -> None:
    text = continuation_prompt(
        [tool_call("toolu_1", "Bash", {"command": "npm   test\n--watch"}), tool_call("toolu_2", "Write", {})]
    )
    lines = text.splitlines()
    assert lines[0].startswith(RESUME_MARKER)
    assert "[baton:interrupted Bash] npm test --watch (call toolu_1)" in lines
    assert "[baton:interrupted Write] {} (call toolu_2)" in lines
    assert "run it again if it did not" in text
    nothing = continuation_prompt([])
    assert nothing.startswith(RESUME_MARKER) and "No tool call was in flight" in nothing
    assert "[baton:interrupted" not in nothing


def long_conversation(turns: int, result_size: int) -> Conversation:
    log = EntryLog("run-long")
    log.run_started("/work/repo")
    log.request("to_agent", "session/prompt", 1, {"sessionId": SESSION, "prompt": [{"type": "text", "text": "TASK"}]})
    for turn in range(turns):
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"step {turn}"}}
        log.notify("session/update", {"sessionId": SESSION, "update": update})
        call = {
            "sessionUpdate": "tool_call",
            "toolCallId": f"t{turn}",
            "title": "cat",
            "status": "pending",
            "rawInput": {"command": f"cat file{turn}"},
            "_meta": {"baton": {"tool_name": "Bash"}},
        }
        log.notify("session/update", {"sessionId": SESSION, "update": call})
        output = f"<{turn}>" + "x" * result_size + f"</{turn}>"
        done = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": f"t{turn}",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": output}}],
        }
        log.notify("session/update", {"sessionId": SESSION, "update": done})
    return rebuild_conversation(log.entries)


def test_the_rebuilt_prompt_keeps_everything_that_fits_verbatim() -> None:
    conversation = long_conversation(turns=3, result_size=10)
    text = rebuilt_prompt(conversation, "CONTINUE")
    assert text.startswith(RESUME_MARKER) and text.endswith("</baton-transcript>\n\nCONTINUE")
    assert "[user]\nTASK" in text and "[assistant]\nstep 2" in text
    assert '[tool call Bash t1 — completed]\ninput: {"command": "cat file1"}\nresult:\n<1>xxxxxxxxxx</1>' in text
    assert "dropped" not in text and "truncated" not in text


def test_the_rebuilt_prompt_drops_the_oldest_items_first_and_truncates_long_results() -> None:
    conversation = long_conversation(turns=40, result_size=3000)
    text = rebuilt_prompt(conversation, "CONTINUE", budget_tokens=8000, result_chars=1000)
    assert len(text) // 4 <= 8000
    assert "[user]\nTASK" in text  # the task is always kept
    assert "[assistant]\nstep 39" in text and "[assistant]\nstep 0\n" not in text  # newest kept, oldest dropped
    header = text.split("\n", 1)[0]
    assert "earlier items were dropped (oldest first)" in header
    assert "long tool inputs or results were truncated" in header
    assert "earlier items of the conversation omitted" in text
    assert "<39>" in text and "</39>" in text and "characters omitted" in text  # head and tail of a result


def test_a_rebuilt_prompt_does_not_nest_an_earlier_transcript() -> None:
    log = EntryLog("run-twice")
    log.run_started("/work/repo")
    log.request("to_agent", "session/prompt", 1, {"sessionId": SESSION, "prompt": [{"type": "text", "text": "TASK"}]})
    first = rebuilt_prompt(rebuild_conversation(log.entries), continuation_prompt([]))
    log.baton("resume", {"path": "rebuilt", "interrupted_calls": [], "prompt": continuation_prompt([])})
    log.request("to_agent", "session/prompt", 2, {"sessionId": SESSION, "prompt": [{"type": "text", "text": first}]})
    second = rebuilt_prompt(rebuild_conversation(log.entries), continuation_prompt([]))
    assert second.count("<baton-transcript>") == 1


def test_a_task_killed_before_it_reached_the_agent_leads_every_later_rebuilt_prompt() -> None:
    """Killed before the task's prompt, resumed on the rebuilt path, killed again before that
    resume's prompt was answered: the next rebuilt prompt still starts with the task (the
    conversation's only user turn is the first resume's continuation prompt)."""
    log = EntryLog("run-killed-twice")
    log.baton("run_started", {"run_id": log.run_id, "agent": "claude", "cwd": "/work/repo", "prompt": "TASK"})
    continuation = continuation_prompt([])
    first = rebuilt_prompt(rebuild_conversation(log.entries), continuation)
    assert "<baton-transcript>\n[user]\nTASK\n</baton-transcript>" in first
    log.baton("resume", {"path": "rebuilt", "interrupted_calls": [], "prompt": continuation})
    log.request("to_agent", "session/prompt", 1, {"sessionId": SESSION, "prompt": [{"type": "text", "text": first}]})
    second = rebuilt_prompt(rebuild_conversation(log.entries), continuation)
    assert second.count("<baton-transcript>") == 1
    assert "<baton-transcript>\n[user]\nTASK\n\n[user]\n" + continuation + "\n</baton-transcript>" in second
    # Once the task was a turn of its own, it is not repeated.
    log.request("to_agent", "session/prompt", 2, {"sessionId": SESSION, "prompt": [{"type": "text", "text": "TASK"}]})
    assert rebuilt_prompt(rebuild_conversation(log.entries), continuation).count("[user]\nTASK\n") == 1


def test_the_claude_session_file_is_found_under_the_agent_home(tmp_path: Path) -> None:
    home = tmp_path / "agent-home"
    assert claude_session_file(home, "abc") is None
    project = home / ".claude" / "projects" / "-work-repo"
    project.mkdir(parents=True)
    (project / "abc.jsonl").write_text("")
    assert claude_session_file(home, "abc") is None  # an empty transcript restores nothing
    (project / "abc.jsonl").write_text('{"type": "user"}\n')
    assert claude_session_file(home, "abc") == project / "abc.jsonl"


# -- executors ----------------------------------------------------------------------------------


def test_this_process_is_alive_and_a_reused_or_gone_pid_is_dead() -> None:
    me = this_executor_id()
    assert me.startswith(f"local:{socket.gethostname()}:") and me.endswith(
        f":{os.getpid()}:{process_start_ticks(os.getpid())}"
    )
    assert executor_alive(me)
    *head, pid, ticks = me.split(":")
    assert not executor_alive(":".join([*head, pid, str(int(ticks) + 1)]))  # same pid, another process
    assert not executor_alive(":".join([*head, "999999999", ticks]))
    assert not executor_alive(None) and not executor_alive("")
    assert effective_status("running", me) == "running"
    assert effective_status("running", None) == "interrupted"
    assert effective_status("paused", None) == "paused" and effective_status("finished", None) == "finished"


def test_a_remote_executor_lives_by_its_heartbeat() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    remote = "local:another-host:0123456789abcdef:42:4242"
    assert executor_alive(remote, "2026-11-30T11:59:30.000Z", now=now)
    assert not executor_alive(remote, (now - timedelta(minutes=10)).isoformat(), now=now)
    assert not executor_alive(remote, None, now=now)
    assert not executor_alive("dbos:worker-7", "not a time", now=now)


# -- taking a run over ----------------------------------------------------------------------------


async def open_log(settings: Settings) -> tuple[Store, SessionLog]:
    settings.home.mkdir(parents=True, exist_ok=True)
    store = Store.open(settings.resolved_database_url)
    log = SessionLog(store, Redactor())
    await log.__aenter__()
    return store, log


def append_interrupted_run(log: SessionLog, run_id: str, cwd: Path) -> None:
    """The log a run leaves when it dies in a Bash call: started, prompted, one call open."""

    def note(name: str, params: dict[str, Any]) -> None:
        log.append(run_id, "baton", f"_baton/{name}", {"jsonrpc": "2.0", "method": f"_baton/{name}", "params": params})

    log.open_run(run_id)
    note(
        "run_started",
        {
            "run_id": run_id,
            "agent": "claude",
            "cwd": str(cwd),
            "permission_mode": "acceptEdits",
            "run_mode": "background",
            "allow": ["Bash(npm test:*)"],
            "deny": ["Write(secrets/**)"],
        },
    )
    note("agent_session", {"agent_session_id": SESSION, "adapter": "claude"})
    prompt = {"sessionId": SESSION, "prompt": [{"type": "text", "text": "run the tests"}]}
    log.append(
        run_id, "to_agent", "session/prompt", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}
    )
    call = {
        "sessionUpdate": "tool_call",
        "toolCallId": "toolu_9",
        "status": "pending",
        "rawInput": {"command": "npm test"},
        "_meta": {"baton": {"tool_name": "Bash"}},
    }
    log.append(
        run_id,
        "from_agent",
        "session/update",
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": call}},
    )


async def test_a_dead_runs_resume_is_planned_in_place_and_a_second_taker_is_refused(
    settings: Settings, repo: Path
) -> None:
    store, log = await open_log(settings)
    try:
        record = await store.create_run(agent="claude", permission_mode="acceptEdits", repo=str(repo), cwd=str(repo))
        append_interrupted_run(log, record.id, repo)
        await log.flush()
        dead = this_executor_id().rsplit(":", 1)[0] + ":1"  # this pid with another start time
        await store.update_run(record.id, status="running", status_reason="started", executor_id=dead)

        plan = await plan_resume(store, log, settings, record.id, None)

        assert plan.run_id == record.id and plan.resumed_from is None
        assert plan.params["path"] == "rebuilt"  # no agent home: nothing to restore natively
        assert plan.params["interrupted_calls"] == ["toolu_9"]
        assert "[baton:interrupted Bash] npm test (call toolu_9)" in plan.params["prompt"]
        assert plan.spec.prompt.endswith(plan.params["prompt"]) and "[user]\nrun the tests" in plan.spec.prompt
        assert plan.spec.allow == ("Bash(npm test:*)",) and plan.spec.deny == ("Write(secrets/**)",)
        assert plan.spec.permission_mode == "acceptEdits" and plan.resume_session_id is None
        taken = await store.get_run(record.id)
        assert taken.executor_id == this_executor_id() and taken.status == "interrupted"
        assert [(t.to_status, t.reason) for t in await store.list_transitions(record.id)][-1] == (
            "interrupted",
            "executor_dead",
        )
        await store.update_run(record.id, status="running", status_reason="resumed")
        with pytest.raises(RefusedError) as refused:  # this process executes it now
            await plan_resume(store, log, settings, record.id, None)
        assert refused.value.code == "run_active"
    finally:
        await log.aclose()
        await store.aclose()


async def test_two_resumes_at_once_take_a_dead_run_exactly_once(settings: Settings, repo: Path) -> None:
    store, log = await open_log(settings)
    try:
        record = await store.create_run(agent="claude", repo=str(repo), cwd=str(repo))
        append_interrupted_run(log, record.id, repo)
        await log.flush()
        await store.update_run(record.id, status="running", executor_id="local:gone:0:1:1")
        results = await asyncio.gather(
            *(plan_resume(store, log, settings, record.id, None) for _ in range(3)), return_exceptions=True
        )
        refusals = [result for result in results if isinstance(result, RefusedError)]
        assert len(refusals) == 2 and {refusal.code for refusal in refusals} == {"run_active"}
    finally:
        await log.aclose()
        await store.aclose()


async def test_an_ended_run_needs_a_prompt_and_continues_in_a_new_run(settings: Settings, repo: Path) -> None:
    store, log = await open_log(settings)
    try:
        record = await store.create_run(agent="claude", repo=str(repo), cwd=str(repo))
        append_interrupted_run(log, record.id, repo)
        await log.flush()
        await store.update_run(record.id, status="running", status_reason="started")
        await store.update_run(record.id, status="finished", status_reason="end_turn")
        with pytest.raises(RefusedError) as refused:
            await plan_resume(store, log, settings, record.id, None)
        assert refused.value.code == "run_ended"
        plan = await plan_resume(store, log, settings, record.id, "and now the docs")
        child = await store.get_run(plan.run_id)
        assert plan.run_id != record.id and plan.resumed_from == record.id and child.resumed_from == record.id
        assert plan.params == {"path": "rebuilt", "interrupted_calls": [], "prompt": "and now the docs"}
        assert "[user]\nrun the tests" in plan.spec.prompt  # the parent's conversation carries over
        assert (await store.get_run(record.id)).status == "finished"
    finally:
        await log.aclose()
        await store.aclose()


async def test_the_conversation_is_stored_and_brought_up_to_date_incrementally(settings: Settings, repo: Path) -> None:
    store, log = await open_log(settings)
    try:
        record = await store.create_run(agent="claude", repo=str(repo), cwd=str(repo))
        append_interrupted_run(log, record.id, repo)
        await log.flush()
        first = await load_conversation(store, log, record.id)
        stored = await store.load_conversation_state(record.id)
        assert stored is not None and stored[0] == first.upto_seq == 4
        # Mark the stored state: if the next load folds only the new entries, the mark survives.
        marked = first.to_dict()
        marked["items"].insert(0, {"type": "summary", "text": "from the stored state"})
        await store.save_conversation_state(record.id, first.upto_seq, marked)
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "more"}}
        log.append(
            record.id,
            "from_agent",
            "session/update",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}},
        )
        await log.flush()
        second = await load_conversation(store, log, record.id)
        assert second.upto_seq == 5
        assert second.view()[0] == {"type": "summary", "text": "from the stored state"}
        assert second.view()[-1] == {"type": "agent", "text": "more"}
        assert (await store.load_conversation_state(record.id)) == (5, second.to_dict())
    finally:
        await log.aclose()
        await store.aclose()


async def test_a_conversation_folded_page_by_page_from_the_store_equals_the_fold_of_the_whole_log(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of 4 end inside streamed agent text and between calls and their results.
    monkeypatch.setattr(resume, "_PAGE", 4)
    _updates, entries = build_sample("claude-multiturn-stdin")
    async with Store.open(store_url) as store, SessionLog(store, Redactor()) as log:
        record = await store.create_run(agent="claude")
        log.open_run(record.id)
        for entry in entries:
            log.append(record.id, entry["direction"], entry["method"], entry["payload"])
        await log.flush()
        conversation = await load_conversation(store, log, record.id)
        whole = rebuild_conversation(await log.read(record.id))
        whole.trim(resume.STATE_CHARS)  # as a loaded conversation is stored
        assert conversation.upto_seq == len(entries) > 4 * 3
        assert conversation.to_dict() == whole.to_dict()
        assert {call["tool"] for call in conversation.calls.values()} == {"Write", "Bash"}
        assert (await store.load_conversation_state(record.id)) == (len(entries), whole.to_dict())
        log.close_run(record.id)


async def test_a_conversation_rebuilt_from_the_store_equals_the_one_rebuilt_from_the_entries_in_memory(
    store_url: str,
) -> None:
    # What the store gives back must fold to what was appended: integers beyond 64 bits in a
    # tool's input and output stay exact ints (orjson alone reads them back as floats).
    _updates, entries = build_sample("claude-multiturn-stdin")
    huge = {"size": 2**64, "offset": -(2**63) - 1, "digits": "12345678901234567890123", "half": 0.5}
    call = {"sessionUpdate": "tool_call", "toolCallId": "toolu_big", "title": "Read", "kind": "read"}
    call["rawInput"] = huge
    done = {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_big", "status": "completed"}
    done["rawOutput"] = {"bytes": 2**70}
    payloads = [entry["payload"] for entry in entries] + [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}}
        for update in (call, done)
    ]
    rows = [(entry["direction"], entry["method"]) for entry in entries] + [("from_agent", "session/update")] * 2
    async with Store.open(store_url) as store, SessionLog(store, Redactor()) as log:
        record = await store.create_run(agent="claude")
        log.open_run(record.id)
        for (direction, method), payload in zip(rows, payloads, strict=True):
            log.append(record.id, direction, method, payload)
        await log.flush()
        from_store = await load_conversation(store, log, record.id)
        appended: list[LogEntry] = [
            {"run_id": record.id, "seq": seq, "ts": "", "direction": direction, "method": method, "payload": payload}
            for seq, ((direction, method), payload) in enumerate(zip(rows, payloads, strict=True), 1)  # type: ignore[misc]
        ]
        in_memory = rebuild_conversation(appended)
        in_memory.trim(resume.STATE_CHARS)
        assert from_store.to_dict() == in_memory.to_dict()
        assert from_store.calls["toolu_big"]["input"] == huge
        assert type(from_store.calls["toolu_big"]["input"]["size"]) is int
        state = await store.load_conversation_state(record.id)
        assert state is not None and state[1] == in_memory.to_dict()
        assert type(state[1]["calls"]["toolu_big"]["input"]["size"]) is int
        log.close_run(record.id)


def chunk_update(content: Any, *, kind: str = "agent_message_chunk", meta: Any = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": content}
    if meta is not None:
        update["_meta"] = meta
    return update


async def test_agent_chunks_read_by_their_stored_text_fold_as_their_payloads_do(store_url: str) -> None:
    # A rebuild reads an agent chunk's text from log_entries.chunk_text, not its payload: every
    # shape the fold treats differently (replayed, empty, not text, redacted) must agree.
    text = {"type": "text", "text": "Let me look "}
    replay = {"baton": {"replay": True}}
    updates = [
        chunk_update(text, meta={"baton": {"source": {"id": 2**64}}}),  # a big int in what is skipped
        chunk_update({"type": "text", "text": "at canary-secret-1234 "}),  # stored redacted
        chunk_update(text, meta=replay),  # replayed history: not folded
        chunk_update({"type": "text", "text": ""}),
        chunk_update({"type": "text", "text": 7}),
        chunk_update("not an object"),
        chunk_update({"type": "image", "data": "AAAA"}),
        chunk_update({"type": "text", "text": "a user's chunk"}, kind="user_message_chunk"),
        chunk_update({"type": "text", "text": "and fix it."}, meta={"baton": "not an object"}),
    ]
    payloads: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}}
        for update in updates
    ]
    replayed_params = {"sessionId": SESSION, "update": chunk_update(text), "_meta": replay}
    payloads.append({"jsonrpc": "2.0", "method": "session/update", "params": replayed_params})
    payloads.append({"jsonrpc": "2.0", "method": "_baton/note", "params": {"update": chunk_update(text)}})
    async with Store.open(store_url) as store, SessionLog(store, Redactor(["canary-secret-1234"])) as log:
        record = await store.create_run(agent="claude")
        log.open_run(record.id)
        for payload in payloads:
            log.append(record.id, "from_agent", payload["method"], payload)
        await log.flush()
        query = (
            select(log_entries.c.chunk_text)
            .join(runs, runs.c.run_key == log_entries.c.run_key)
            .where(runs.c.id == record.id)
            .order_by(log_entries.c.seq)
        )
        with store.engine.connect() as connection:
            stored = list(connection.execute(query).scalars())
        assert stored == ["Let me look ", f"at {REDACTED} ", *[None] * 6, "and fix it.", None, None]
        from_store = await load_conversation(store, log, record.id)
        in_memory = rebuild_conversation(await log.read(record.id))
        in_memory.trim(resume.STATE_CHARS)
        assert from_store.to_dict() == in_memory.to_dict()
        assert [item.get("text") for item in from_store.view()] == [
            f"Let me look at {REDACTED} ",
            "a user's chunk",
            "and fix it.",
        ]
        log.close_run(record.id)


async def test_a_run_killed_before_its_prompt_reached_the_agent_is_resumed_with_its_task(
    settings: Settings, repo: Path
) -> None:
    store, log = await open_log(settings)
    try:
        record = await store.create_run(agent="claude", repo=str(repo), cwd=str(repo))
        with pytest.raises(RefusedError) as refused:  # nothing recorded: nothing to go on
            await plan_resume(store, log, settings, record.id, None)
        assert refused.value.code == "run_not_resumable"
        log.open_run(record.id)
        started = {"run_id": record.id, "agent": "claude", "cwd": str(repo), "prompt": "write the release notes"}
        log.append(
            record.id,
            "baton",
            "_baton/run_started",
            {"jsonrpc": "2.0", "method": "_baton/run_started", "params": started},
        )
        await log.flush()
        plan = await plan_resume(store, log, settings, record.id, None)
        assert plan.params["path"] == "rebuilt" and plan.params["interrupted_calls"] == []
        assert "<baton-transcript>\n[user]\nwrite the release notes\n</baton-transcript>" in plan.spec.prompt
    finally:
        await log.aclose()
        await store.aclose()


async def test_native_resume_takes_the_newest_session_that_has_a_transcript(settings: Settings, repo: Path) -> None:
    store, log = await open_log(settings)
    try:
        record = await store.create_run(agent="claude", repo=str(repo), cwd=str(repo))
        append_interrupted_run(log, record.id, repo)  # its agent session is SESSION
        # A first resume started a forked session and was killed before Claude Code wrote it.
        params = {"agent_session_id": "forked-never-written", "adapter": "claude"}
        log.append(
            record.id,
            "baton",
            "_baton/agent_session",
            {"jsonrpc": "2.0", "method": "_baton/agent_session", "params": params},
        )
        await log.flush()
        project = settings.run_dir(record.id) / "agent-home" / ".claude" / "projects" / "-repo"
        project.mkdir(parents=True)
        (project / f"{SESSION}.jsonl").write_text('{"type": "user"}\n')
        plan = await plan_resume(store, log, settings, record.id, None)
        assert plan.params["path"] == "native" and plan.resume_session_id == SESSION
        assert plan.spec.prompt == plan.params["prompt"]  # native: the continuation prompt alone
    finally:
        await log.aclose()
        await store.aclose()
