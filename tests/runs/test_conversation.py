"""``rebuild_conversation``: the conversation folded from a run's log (pure, incremental)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.golden.build import EntryLog, build_sample

from baton.runs.conversation import Conversation, rebuild_conversation

SESSION = "sess-1"


def update(log: EntryLog, body: dict[str, Any], **params: Any) -> None:
    log.notify("session/update", {"sessionId": SESSION, "update": body, **params})


def prompt(log: EntryLog, text: str, request_id: int = 2) -> None:
    log.request(
        "to_agent", "session/prompt", request_id, {"sessionId": SESSION, "prompt": [{"type": "text", "text": text}]}
    )


def chunk(log: EntryLog, text: str, kind: str = "agent_message_chunk") -> None:
    update(log, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})


def call(log: EntryLog, call_id: str, tool: str, raw_input: dict[str, Any]) -> None:
    update(
        log,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": f"{tool} something",
            "kind": "execute" if tool == "Bash" else "edit",
            "status": "pending",
            "rawInput": raw_input,
            "_meta": {"baton": {"tool_name": tool}},
        },
    )


def result(log: EntryLog, call_id: str, text: str, *, failed: bool = False, raw_output: Any = None) -> None:
    body: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed" if failed else "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": text}}],
    }
    if raw_output is not None:
        body["rawOutput"] = raw_output
    update(log, body)


def started() -> EntryLog:
    log = EntryLog("run-conv")
    log.run_started("/work/repo")
    log.baton("agent_session", {"agent_session_id": SESSION, "adapter": "claude"})
    return log


def test_turns_text_calls_plan_and_usage() -> None:
    log = started()
    prompt(log, "fix the bug")
    chunk(log, "Let me ")
    chunk(log, "look.")
    call(log, "t1", "Bash", {"command": "node --test"})
    chunk(log, "thinking…", kind="agent_thought_chunk")
    result(log, "t1", "# fail 1", failed=True, raw_output={"stdout": "# fail 1", "exit_code": 1})
    update(log, {"sessionUpdate": "plan", "entries": [{"content": "fix add", "status": "pending"}]})
    chunk(log, "Fixed.")
    log.notify("_baton/usage", {"sessionId": SESSION, "usage": {"input_tokens": 7}, "total_cost_usd": 0.5})
    conversation = rebuild_conversation(log.entries)
    assert conversation.view() == [
        {"type": "user", "text": "fix the bug"},
        {"type": "agent", "text": "Let me look."},
        {"type": "tool_call", "call_id": "t1"},
        {"type": "plan", "entries": [{"content": "fix add", "status": "pending"}]},
        {"type": "agent", "text": "Fixed."},
    ]
    assert conversation.calls["t1"] == {
        "id": "t1",
        "tool": "Bash",
        "title": "Bash something",
        "kind": "execute",
        "input": {"command": "node --test"},
        "status": "failed",
        "output": None,  # the result's text says it
        "text": "# fail 1",
    }
    assert conversation.usage == {"input_tokens": 7} and conversation.total_cost_usd == 0.5
    assert conversation.agent_session_id == SESSION and conversation.cwd == "/work/repo"
    assert conversation.interrupted_calls == []
    assert conversation.upto_seq == len(log.entries)


def test_results_match_by_call_id_in_any_order_and_open_calls_are_interrupted() -> None:
    log = started()
    prompt(log, "go")
    result(log, "t2", "second first")  # an update before its call
    call(log, "t1", "Write", {"file_path": "/work/repo/a.txt"})
    call(log, "t2", "Write", {"file_path": "/work/repo/b.txt"})
    call(log, "t3", "Bash", {"command": "sleep 5"})
    result(log, "t1", "wrote a")
    result(log, "t1", "a late duplicate", failed=True)  # a call ends once
    conversation = rebuild_conversation(log.entries)
    assert conversation.calls["t1"]["status"] == "completed" and conversation.calls["t1"]["text"] == "wrote a"
    assert conversation.calls["t2"]["text"] == "second first"
    assert conversation.calls["t2"]["input"] == {"file_path": "/work/repo/b.txt"}
    assert [c["id"] for c in conversation.interrupted_calls] == ["t3"]
    # A resume that named t3 settles it; later calls can be interrupted anew.
    log.baton("resume", {"path": "native", "interrupted_calls": ["t3"], "prompt": "[baton:resume] …"})
    call(log, "t4", "Bash", {"command": "echo again"})
    assert [c["id"] for c in rebuild_conversation(log.entries).interrupted_calls] == ["t4"]


def test_replayed_entries_are_skipped() -> None:
    log = started()
    replay = {"_meta": {"baton": {"replay": True}}}
    update(log, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old"}, **replay})
    update(log, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old too"}}, **replay)
    chunk(log, "new")
    assert rebuild_conversation(log.entries).view() == [{"type": "agent", "text": "new"}]


def test_the_conversation_starts_over_at_the_last_compaction() -> None:
    log = started()
    prompt(log, "first task")
    chunk(log, "long history")
    call(log, "t1", "Bash", {"command": "echo 1"})
    result(log, "t1", "1")
    call(log, "t2", "Bash", {"command": "sleep 9"})
    log.notify("_baton/compact_boundary", {"sessionId": SESSION, "trigger": "auto", "summary": "did echo 1"})
    chunk(log, "after compaction")
    conversation = rebuild_conversation(log.entries)
    assert conversation.compactions == 1
    assert conversation.view() == [
        {"type": "summary", "text": "did echo 1"},
        {"type": "tool_call", "call_id": "t2"},  # still open: it stays
        {"type": "agent", "text": "after compaction"},
    ]
    assert set(conversation.calls) == {"t2"}


def test_incremental_apply_from_a_stored_state_equals_a_full_rebuild() -> None:
    _updates, entries = build_sample("claude-multiturn-stdin")
    full = rebuild_conversation(entries)
    assert full.user_turns == ["SCENARIO:plain hello", "Create hello.txt and run echo hi"]
    assert {c["tool"] for c in full.calls.values()} == {"Write", "Bash"}
    for cut in range(0, len(entries) + 1, 3):
        head = rebuild_conversation(entries[:cut])
        stored = json.loads(json.dumps(head.to_dict()))  # through JSON, as the store keeps it
        resumed = Conversation.from_dict(stored).apply(entries)  # earlier entries are skipped
        assert resumed.to_dict() == full.to_dict(), cut


def test_chunks_split_across_a_checkpoint_still_merge() -> None:
    log = started()
    chunk(log, "Hel")
    state = rebuild_conversation(log.entries).to_dict()
    chunk(log, "lo")
    resumed = Conversation.from_dict(state).apply(log.entries)
    assert resumed.view() == [{"type": "agent", "text": "Hello"}]


def test_a_state_of_another_version_is_refused() -> None:
    state = rebuild_conversation(started().entries).to_dict()
    state["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        Conversation.from_dict(state)


def test_a_rebuilt_resume_prompt_is_kept_as_the_prompt_it_names() -> None:
    log = started()
    prompt(log, "the task")
    log.baton("resume", {"path": "rebuilt", "interrupted_calls": [], "prompt": "[baton:resume] go on"})
    prompt(log, "[baton:resume] rebuilt … <baton-transcript>[user] the task</baton-transcript> … go on", 3)
    chunk(log, "Continuing.")
    assert rebuild_conversation(log.entries).user_turns == ["the task", "[baton:resume] go on"]


def test_trim_keeps_the_task_open_calls_and_the_newest_items() -> None:
    log = started()
    prompt(log, "the task")
    call(log, "open", "Bash", {"command": "sleep 100"})
    for turn in range(50):
        chunk(log, f"turn {turn} " + "y" * 100)
        call(log, f"t{turn}", "Bash", {"command": f"echo {turn}"})
        result(log, f"t{turn}", "z" * 100)
    full = rebuild_conversation(log.entries)
    trimmed = rebuild_conversation(log.entries)
    dropped = trimmed.trim(2_000)
    assert dropped > 80 and trimmed.dropped_items == dropped
    items = trimmed.view()
    assert items[0] == {"type": "user", "text": "the task"}
    assert items[1] == {"type": "tool_call", "call_id": "open"}  # still open: kept
    assert items[-1] == full.view()[-1] and items[-2] == full.view()[-2]
    assert len(items) == len(full.view()) - dropped
    assert set(trimmed.calls) == {"open"} | {item["call_id"] for item in items if item["type"] == "tool_call"}
    assert [c["id"] for c in trimmed.interrupted_calls] == ["open"]
    # The trimmed state goes on folding and remembers what it let go.
    chunk(log, "after")
    resumed = Conversation.from_dict(json.loads(json.dumps(trimmed.to_dict()))).apply(log.entries)
    assert resumed.dropped_items == dropped and resumed.view()[-1] == {"type": "agent", "text": "after"}
    assert rebuild_conversation(log.entries).trim(10**9) == 0
