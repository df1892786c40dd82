"""Claude SDK messages → ACP updates: tools, results, partial messages, the result message."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import SessionNotification

from baton.agents.claude.convert import ClaudeConverter, stop_reason_for, usage_params
from golden.build import load_sample

CWD = "/work/repo"


def assistant(*blocks: dict[str, Any], message_id: str = "msg_1") -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": message_id, "role": "assistant", "content": list(blocks)}}


def tool_use(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def tool_result(tool_id: str, content: Any, *, is_error: Any = None, tool_use_result: Any = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    msg: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": [block]}}
    if tool_use_result is not None:
        msg["tool_use_result"] = tool_use_result
    return msg


def delta(text: str, *, index: int = 0, kind: str = "text_delta", message_id: str = "msg_1") -> dict[str, Any]:
    key = "text" if kind == "text_delta" else "thinking"
    event = {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: text}}
    return {"type": "stream_event", "event": event, "api_message_id": message_id}


def valid(update: dict[str, Any]) -> dict[str, Any]:
    SessionNotification.model_validate({"sessionId": "s", "update": update})
    return update


def one(converter: ClaudeConverter, msg: dict[str, Any]) -> dict[str, Any]:
    [update] = converter.convert(msg)
    return valid(update)


@pytest.mark.parametrize(
    ("name", "tool_input", "kind", "title", "locations"),
    [
        ("Read", {"file_path": f"{CWD}/calc.js"}, "read", "Read calc.js", [f"{CWD}/calc.js"]),
        ("Read", {"file_path": "/etc/hosts"}, "read", "Read /etc/hosts", ["/etc/hosts"]),
        ("NotebookRead", {"notebook_path": "nb.ipynb"}, "read", "Read nb.ipynb", [f"{CWD}/nb.ipynb"]),
        (
            "Edit",
            {"file_path": f"{CWD}/calc.js", "old_string": "-", "new_string": "+"},
            "edit",
            "Edit calc.js",
            [f"{CWD}/calc.js"],
        ),
        (
            "Write",
            {"file_path": f"{CWD}/a/b.txt", "content": "x"},
            "edit",
            "Write a/b.txt",
            [f"{CWD}/a/b.txt"],
        ),
        (
            "NotebookEdit",
            {"notebook_path": f"{CWD}/nb.ipynb", "new_source": "x"},
            "edit",
            "Edit nb.ipynb",
            [f"{CWD}/nb.ipynb"],
        ),
        ("Glob", {"pattern": "**/*.js"}, "search", "Find `**/*.js`", [CWD]),
        ("Grep", {"pattern": "add", "path": f"{CWD}/src"}, "search", "Search `add` in src", [f"{CWD}/src"]),
        ("LS", {"path": CWD}, "search", "List .", [CWD]),
        ("Bash", {"command": "node --test", "description": "run tests"}, "execute", "`node --test`", []),
        ("BashOutput", {"bash_id": "b1"}, "execute", "Output of shell b1", []),
        ("KillShell", {"shell_id": "b1"}, "execute", "Kill shell b1", []),
        ("WebFetch", {"url": "https://example.com", "prompt": "x"}, "fetch", "Fetch https://example.com", []),
        ("WebSearch", {"query": "acp spec"}, "fetch", "Search the web: acp spec", []),
        ("Task", {"description": "Explore the repo", "prompt": "x"}, "think", "Explore the repo", []),
        ("ExitPlanMode", {"plan": "1. do it"}, "switch_mode", "Exit plan mode", []),
        ("mcp__github__create_issue", {"title": "x"}, "other", "github: create_issue", []),
        ("Skill", {"skill": "x"}, "other", "Skill", []),
    ],
)
def test_tool_call_kind_title_locations(
    name: str, tool_input: dict[str, Any], kind: str, title: str, locations: list[str]
) -> None:
    msg = assistant(tool_use("t1", name, **tool_input))
    update = one(ClaudeConverter(CWD), msg)
    assert update["sessionUpdate"] == "tool_call"
    assert (update["toolCallId"], update["kind"], update["title"], update["status"]) == (
        "t1",
        kind,
        title,
        "pending",
    )
    assert [loc["path"] for loc in update["locations"]] == locations
    assert update["rawInput"] is msg["message"]["content"][0]["input"]
    assert update["_meta"]["baton"]["source"] is msg
    assert update["_meta"]["baton"]["tool_name"] == name


def test_bash_carries_its_command() -> None:
    update = one(ClaudeConverter(CWD), assistant(tool_use("t1", "Bash", command="npm test | tail -5")))
    assert update["_meta"]["baton"]["command"] == "npm test | tail -5"


def test_diffs_for_write_edit_multiedit() -> None:
    converter = ClaudeConverter(CWD)
    write = one(converter, assistant(tool_use("w", "Write", file_path="new.txt", content="hi\n")))
    assert write["content"] == [{"type": "diff", "path": f"{CWD}/new.txt", "oldText": None, "newText": "hi\n"}]
    edit = one(converter, assistant(tool_use("e", "Edit", file_path=f"{CWD}/c.js", old_string="a", new_string="b")))
    assert edit["content"] == [{"type": "diff", "path": f"{CWD}/c.js", "oldText": "a", "newText": "b"}]
    edits = [{"old_string": "1", "new_string": "2"}, {"old_string": "3", "new_string": "4"}]
    multi = one(converter, assistant(tool_use("m", "MultiEdit", file_path=f"{CWD}/c.js", edits=edits)))
    assert [(d["oldText"], d["newText"]) for d in multi["content"]] == [("1", "2"), ("3", "4")]


def test_results_match_their_calls_in_any_order() -> None:
    converter = ClaudeConverter(CWD)
    converter.convert(assistant(tool_use("a", "Bash", command="sleep 1")))
    converter.convert(assistant(tool_use("b", "Read", file_path="x")))
    first = one(converter, tool_result("b", [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]))
    second = one(
        converter,
        tool_result("a", "done", is_error=False, tool_use_result={"stdout": "done", "interrupted": False}),
    )
    assert (first["toolCallId"], first["_meta"]["baton"]["tool_name"]) == ("b", "Read")
    assert first["content"] == [{"type": "content", "content": {"type": "text", "text": "line 1\nline 2"}}]
    assert first["rawOutput"] == [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]
    assert (second["toolCallId"], second["status"], second["rawOutput"]["stdout"]) == (
        "a",
        "completed",
        "done",
    )
    assert second["_meta"]["baton"] | {"source": None} == {
        "source": None,
        "tool_name": "Bash",
        "is_error": False,
        "exit_code": 0,
    }


@pytest.mark.parametrize(
    ("is_error", "status"),
    [(True, "failed"), (None, "completed"), (False, "completed"), ("true", "completed")],
)
def test_only_is_error_true_fails(is_error: Any, status: str) -> None:
    converter = ClaudeConverter(CWD)
    converter.convert(assistant(tool_use("w", "Write", file_path="a", content="")))
    assert one(converter, tool_result("w", "ok", is_error=is_error))["status"] == status


def test_bash_failure_exit_code_from_the_error_text() -> None:
    converter = ClaudeConverter(CWD)
    converter.convert(assistant(tool_use("b", "Bash", command="npm test")))
    update = one(converter, tool_result("b", "Exit code 1\nnpm error Test failed", is_error=True))
    assert update["status"] == "failed"
    assert update["_meta"]["baton"]["exit_code"] == 1
    assert update["_meta"]["baton"]["is_error"] is True


def test_write_over_an_existing_file_reports_the_old_text() -> None:
    converter = ClaudeConverter(CWD)
    converter.convert(assistant(tool_use("w", "Write", file_path="a.txt", content="new")))
    result = {"type": "update", "filePath": f"{CWD}/a.txt", "content": "new", "originalFile": "old"}
    update = one(converter, tool_result("w", "File updated", tool_use_result=result))
    assert update["content"][1] == {
        "type": "diff",
        "path": f"{CWD}/a.txt",
        "oldText": "old",
        "newText": "new",
    }


def test_todowrite_is_a_plan_and_its_result_is_silent() -> None:
    converter = ClaudeConverter(CWD)
    todos = [
        {"content": "Read calc.js", "status": "completed", "activeForm": "Reading"},
        {"content": "Fix add", "status": "in_progress", "activeForm": "Fixing"},
        {"content": "Run tests", "status": "weird", "activeForm": "Running"},
    ]
    plan = one(converter, assistant(tool_use("p", "TodoWrite", todos=todos)))
    assert plan["sessionUpdate"] == "plan"
    assert plan["entries"] == [
        {"content": "Read calc.js", "priority": "medium", "status": "completed"},
        {"content": "Fix add", "priority": "medium", "status": "in_progress"},
        {"content": "Run tests", "priority": "medium", "status": "pending"},
    ]
    assert converter.convert(tool_result("p", "Todos updated")) == []


def test_a_call_announced_by_the_hook_is_not_announced_again() -> None:
    converter = ClaudeConverter(CWD)
    hook = {"type": "assistant", "message": {"content": [tool_use("t", "Bash", command="ls")]}}
    assert len(converter.convert(hook)) == 1
    assert converter.convert(assistant(tool_use("t", "Bash", command="ls"))) == []
    assert one(converter, tool_result("t", "a"))["sessionUpdate"] == "tool_call_update"


def test_text_thinking_and_user_text() -> None:
    converter = ClaudeConverter(CWD)
    msg = assistant({"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "Hi"})
    thought, text = converter.convert(msg)
    assert valid(thought) == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "hmm"},
        "_meta": {"baton": {"source": msg}},
    }
    assert valid(text)["content"] == {"type": "text", "text": "Hi"}
    user = {"type": "user", "message": {"role": "user", "content": "[Request interrupted by user]"}}
    assert one(converter, user)["sessionUpdate"] == "user_message_chunk"
    assert converter.convert(assistant({"type": "text", "text": ""})) == []


def test_partial_messages_are_not_emitted_twice() -> None:
    converter = ClaudeConverter(CWD)
    start = {"type": "stream_event", "event": {"type": "message_start", "message": {"id": "msg_1"}}}
    assert converter.convert(start) == []
    chunks = [one(converter, delta(part)) for part in ("Hel", "lo")]
    assert [c["content"]["text"] for c in chunks] == ["Hel", "lo"]
    assert converter.convert(assistant({"type": "text", "text": "Hello"})) == []
    # a later block of the same message that was never streamed is emitted whole
    assert one(converter, assistant({"type": "text", "text": "More"}))["content"]["text"] == "More"


def test_partial_message_cut_short_emits_the_rest() -> None:
    converter = ClaudeConverter(CWD)
    converter.convert(delta("think", kind="thinking_delta", index=0, message_id="m"))
    converter.convert(delta("Hello, wo", index=1, message_id="m"))
    msg_thinking = assistant({"type": "thinking", "thinking": "think"}, message_id="m")
    assert converter.convert(msg_thinking) == []
    assert (
        one(converter, assistant({"type": "text", "text": "Hello, world"}, message_id="m"))["content"]["text"] == "rld"
    )


def test_messages_without_updates() -> None:
    converter = ClaudeConverter(CWD)
    silent = [
        {"type": "system", "subtype": "init", "cwd": CWD},
        {"type": "system", "subtype": "status", "status": "requesting"},
        {"type": "rate_limit_event", "rate_limit_info": {}},
        {"type": "control_request", "request_id": "r", "request": {"subtype": "can_use_tool"}},
        {"type": "control_response", "response": {"subtype": "success"}},
        {
            "type": "stream_event",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{"},
            },
        },
        {"type": "stream_event", "event": {"type": "message_stop"}},
        {"type": "result", "subtype": "success", "is_error": False},
    ]
    for msg in silent:
        assert converter.convert(msg) == []


def test_control_stdout_sample_converts_cleanly() -> None:
    messages = load_sample("claude-sdk-control-stdout")
    converter = ClaudeConverter("/home/dev/work8")
    kinds = []
    for msg in messages:
        updates = converter.convert(msg)
        if msg["type"].startswith("control_") or msg["type"] == "system":
            assert updates == []
        kinds += [valid(update)["sessionUpdate"] for update in updates]
    assert kinds.count("tool_call") == kinds.count("tool_call_update") == 3
    assert kinds.count("agent_message_chunk") == 7


RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "stop_reason": "end_turn",
    "session_id": "sess",
    "usage": {"input_tokens": 3},
    "total_cost_usd": 0.25,
    "duration_ms": 10,
    "num_turns": 2,
    "result": "done",
}


def test_usage_params() -> None:
    params = usage_params(RESULT)
    assert params == {
        "sessionId": "sess",
        "usage": {"input_tokens": 3},
        "total_cost_usd": 0.25,
        "duration_ms": 10,
        "num_turns": 2,
        "stop_reason": "end_turn",
        "is_error": False,
        "subtype": "success",
        "result": "done",
        "_meta": {"baton": {"source": RESULT}},
    }
    assert params["usage"] is RESULT["usage"]
    assert usage_params(RESULT, session_id="acp")["sessionId"] == "acp"
    assert usage_params(RESULT | {"is_error": True})["is_error"] is True  # 529: success yet failed
    assert usage_params(RESULT | {"subtype": "error_max_turns"})["is_error"] is True


@pytest.mark.parametrize(
    ("changes", "cancel", "expected"),
    [
        ({}, False, "end_turn"),
        ({"stop_reason": "stop_sequence"}, False, "end_turn"),
        ({"stop_reason": "max_tokens"}, False, "max_tokens"),
        ({"stop_reason": "refusal"}, False, "refusal"),
        ({"stop_reason": "tool_deferred"}, False, "end_turn"),
        ({"subtype": "error_max_turns"}, False, "max_turn_requests"),
        ({"subtype": "error_max_budget_usd"}, False, "max_turn_requests"),
        ({"subtype": "error_during_execution"}, True, "cancelled"),
        ({"subtype": "error_during_execution"}, False, "end_turn"),
        ({"stop_reason": "end_turn"}, True, "end_turn"),
    ],
)
def test_stop_reason_for(changes: dict[str, Any], cancel: bool, expected: str) -> None:
    assert stop_reason_for(RESULT | changes, cancel_requested=cancel) == expected
