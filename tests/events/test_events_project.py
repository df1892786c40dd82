"""Runner-event projection: every event type, ordering rules and the odd inputs."""

from __future__ import annotations

from typing import Any

from baton.events._tool_calls import OUTPUT_LIMIT, truncate_output
from baton.events.project import SETUP_LINE_CHARS, SETUP_OUTPUT_LINES, Projector, RunnerEvent, project
from golden.build import EntryLog

CWD = "/work/repo"


def started() -> EntryLog:
    log = EntryLog("r1")
    log.run_started(CWD, mode="acceptEdits")
    log.baton("agent_session", {"agent_session_id": "sess", "adapter": "claude"})
    return log


def update(log: EntryLog, body: dict[str, Any]) -> None:
    log.notify("session/update", {"sessionId": "sess", "update": body})


def call(log: EntryLog, call_id: str, kind: str, **fields: Any) -> None:
    update(
        log,
        {"sessionUpdate": "tool_call", "toolCallId": call_id, "kind": kind, "status": "pending", **fields},
    )


def bash(log: EntryLog, call_id: str, command: str) -> None:
    meta = {"baton": {"tool_name": "Bash", "command": command}}
    call(log, call_id, "execute", title=f"`{command}`", rawInput={"command": command}, _meta=meta)


def done(log: EntryLog, call_id: str, text: str = "", *, failed: bool = False, **meta: Any) -> None:
    body: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
    body["status"] = "failed" if failed else "completed"
    body["content"] = [{"type": "content", "content": {"type": "text", "text": text}}] if text else []
    body["_meta"] = {"baton": {"is_error": failed, **meta}}
    update(log, body)


def events(log: EntryLog) -> list[RunnerEvent]:
    return project(log.entries)


def of_type(log: EntryLog, event_type: str) -> list[dict[str, Any]]:
    return [event["data"] for event in events(log) if event["type"] == event_type]


def test_task_started_waits_for_the_agent_session() -> None:
    log = EntryLog("r1")
    log.run_started(CWD, model="m", mode="plan")
    assert events(log) == []
    log.baton("agent_session", {"agent_session_id": "sess", "adapter": "claude"})
    log.baton("agent_session", {"agent_session_id": "sess-2", "adapter": "claude"})  # a resume
    [event] = events(log)
    assert event["type"] == "task.started"
    assert event["data"] == {
        "agent": "claude",
        "model": "m",
        "cwd": CWD,
        "agent_session_id": "sess",
        "permission_mode": "plan",
        "run_mode": "background",
    }
    assert (event["run_id"], event["seq"], event["log_seq"]) == ("r1", 1, 3)
    assert event["raw"] is log.entries[2]["payload"]


def test_messages_from_agent_user_and_prompt() -> None:
    log = started()
    log.request("to_agent", "session/prompt", 7, {"sessionId": "sess", "prompt": [{"type": "text", "text": "go"}]})
    update(log, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}})
    update(log, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "more"}})
    update(log, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})
    log.respond("from_agent", "session/prompt", 7, result={"stopReason": "end_turn"})
    assert of_type(log, "message") == [
        {"role": "user", "text": "go"},
        {"role": "agent", "text": "ok"},
        {"role": "user", "text": "more"},
    ]


def test_malformed_line_is_a_message() -> None:
    log = started()
    params = {"line": "oops {", "stream": "stdout"}
    log.add(
        "from_agent",
        "_baton/malformed_line",
        {"jsonrpc": "2.0", "method": "_baton/malformed_line", "params": params},
    )
    assert of_type(log, "message") == [{"role": "agent", "text": "oops {", "malformed": True}]


def test_file_events_only_when_the_call_completes() -> None:
    log = started()
    diff = {"type": "diff", "path": f"{CWD}/a.txt", "oldText": None, "newText": "x"}
    call(log, "w", "edit", title="Write a.txt", locations=[{"path": f"{CWD}/a.txt"}], content=[diff])
    call(
        log,
        "r",
        "read",
        title="Read /etc/hosts",
        locations=[{"path": "/etc/hosts"}],
        _meta={"baton": {"tool_name": "Read"}},
    )
    call(log, "bad", "edit", locations=[{"path": f"{CWD}/b.txt"}])
    assert of_type(log, "file.changed") == [] and of_type(log, "file.read") == []
    done(log, "bad", "no such file", failed=True)
    done(log, "r", "127.0.0.1 localhost")
    done(log, "w", "created")
    assert of_type(log, "file.read") == [
        {"path": "/etc/hosts", "abs_path": "/etc/hosts", "tool": "Read", "tool_call_id": "r"}
    ]
    assert of_type(log, "file.changed") == [
        {
            "path": "a.txt",
            "abs_path": f"{CWD}/a.txt",
            "change": "add",
            "tool": "Write a.txt",
            "tool_call_id": "w",
            "diff": {"old_text": None, "new_text": "x"},
        }
    ]


def test_file_change_kinds() -> None:
    log = started()
    edit = {"type": "diff", "path": "src/m.py", "oldText": "a", "newText": "b"}
    call(log, "e", "edit", content=[edit])
    call(log, "d", "delete", locations=[{"path": f"{CWD}/old.txt"}])
    call(log, "m", "move", locations=[{"path": f"{CWD}/x"}])
    call(log, "u", "edit", locations=[{"path": f"{CWD}/nb.ipynb"}])
    declared = {
        "type": "diff",
        "path": f"{CWD}/g.txt",
        "oldText": "",
        "newText": "hi",
        "_meta": {"kind": "add"},
    }
    call(log, "g", "edit", content=[declared])
    # a Write over an existing file: the completion knows the old text the proposal did not
    call(log, "o", "edit", content=[{"type": "diff", "path": f"{CWD}/o.txt", "oldText": None, "newText": "n"}])
    update(
        log,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "o",
            "status": "completed",
            "content": [{"type": "diff", "path": f"{CWD}/o.txt", "oldText": "old", "newText": "n"}],
        },
    )
    for call_id in "edmug":
        done(log, call_id)
    changes = {data["tool_call_id"]: (data["path"], data["change"]) for data in of_type(log, "file.changed")}
    assert changes == {
        "e": ("src/m.py", "modify"),
        "d": ("old.txt", "delete"),
        "m": ("x", "move"),
        "u": ("nb.ipynb", "unknown"),
        "g": ("g.txt", "add"),
        "o": ("o.txt", "modify"),
    }


def test_a_file_a_call_names_two_ways_is_one_change_with_the_diff() -> None:
    # Kilo: the permission request has the absolute path and the diff, its updates ``./new.txt``.
    log = started()
    diff = {"type": "diff", "path": f"{CWD}/new.txt", "oldText": None, "newText": "hi\n"}
    params = {"sessionId": "sess", "toolCall": {"toolCallId": "w", "kind": "edit", "content": [diff]}, "options": []}
    log.request("from_agent", "session/request_permission", 1, params)
    chosen = {"outcome": {"outcome": "selected", "optionId": "once"}}
    log.respond("to_agent", "session/request_permission", 1, result=chosen)
    call(log, "w", "edit", title="write", locations=[{"path": "./new.txt"}], _meta={"baton": {"tool_name": "Write"}})
    done(log, "w", change="add")
    assert of_type(log, "file.changed") == [
        {
            "path": "new.txt",
            "abs_path": f"{CWD}/new.txt",
            "change": "add",
            "tool": "Write",
            "tool_call_id": "w",
            "diff": {"old_text": None, "new_text": "hi\n"},
        }
    ]


def test_search_reads_the_workspace_with_its_pattern() -> None:
    log = started()
    call(log, "s", "search", rawInput={"pattern": "TODO"}, _meta={"baton": {"tool_name": "Grep"}})
    done(log, "s", "a.py")
    assert of_type(log, "file.read") == [
        {"path": ".", "abs_path": CWD, "pattern": "TODO", "tool": "Grep", "tool_call_id": "s"}
    ]


def test_command_lifecycle_and_exit_codes() -> None:
    log = started()
    bash(log, "c1", "make build")
    bash(log, "c2", "false")
    done(log, "c2", "Exit code 1\nboom", failed=True)  # out of order: c2 ends first
    done(log, "c1", "built", exit_code=0)
    types = [event["type"] for event in events(log)]
    assert types == [
        "task.started",
        "command.started",
        "command.started",
        "command.finished",
        "command.finished",
    ]
    finished = of_type(log, "command.finished")
    assert finished[0] == {
        "command": "false",
        "tool_call_id": "c2",
        "is_error": True,
        "denied": False,
        "exit_code": 1,
        "output": "Exit code 1\nboom",
        "output_truncated": False,
    }
    assert finished[1]["tool_call_id"] == "c1" and finished[1]["exit_code"] == 0


def test_command_known_only_later_is_started_then() -> None:
    log = started()
    call(log, "c", "execute", title="Terminal", rawInput={})
    assert of_type(log, "command.started") == []
    update(
        log,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "rawInput": {"command": ["bash", "-lc", "ls"]},
        },
    )
    update(
        log,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "status": "completed",
            "rawOutput": {"stdout": "a", "exit_code": 0},
        },
    )
    assert of_type(log, "command.started") == [{"command": "ls", "tool": "Terminal", "tool_call_id": "c"}]
    [finished] = of_type(log, "command.finished")
    assert (finished["output"], finished["exit_code"]) == ("a", 0)


def test_result_before_its_call_and_repeated_results() -> None:
    log = started()
    update(
        log,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "x",
            "kind": "execute",
            "title": "ls",
            "status": "completed",
        },
    )
    update(log, {"sessionUpdate": "tool_call_update", "toolCallId": "x", "status": "completed"})
    assert [event["type"] for event in events(log)][1:] == ["command.started", "command.finished"]


def test_test_result_follows_command_finished_from_the_same_entry() -> None:
    log = started()
    bash(log, "t", "cd app && npm test 2>&1 | tail -5")
    done(log, "t", "  1 passing\n  1 failing\n", exit_code=0)
    last_two = events(log)[-2:]
    assert [event["type"] for event in last_two] == ["command.finished", "test.result"]
    assert last_two[0]["log_seq"] == last_two[1]["log_seq"]
    assert last_two[1]["data"] == {
        "command": "cd app && npm test 2>&1 | tail -5",
        "tool_call_id": "t",
        "passed": False,
        "framework": "mocha",
    }


def test_passing_test_named_fail_is_a_pass() -> None:
    log = started()
    bash(log, "t", "go test ./...")
    done(
        log,
        "t",
        "=== RUN   TestFAIL_fast\n--- PASS: TestFAIL_fast (0.00s)\nPASS\nok  \tpkg\t0.01s",
        exit_code=0,
    )
    assert of_type(log, "test.result") == [
        {"command": "go test ./...", "tool_call_id": "t", "passed": True, "framework": "go"}
    ]


def test_output_is_truncated_at_64_kib() -> None:
    log = started()
    bash(log, "big", "cat big.log")
    text = "start\n" + "é" * 70_000 + "\nend"
    done(log, "big", text)
    [finished] = of_type(log, "command.finished")
    assert finished["output_truncated"] is True
    assert len(finished["output"].encode()) <= OUTPUT_LIMIT
    assert finished["output"].startswith("start\n") and finished["output"].endswith("\nend")
    assert "bytes omitted" in finished["output"]
    assert truncate_output("x" * OUTPUT_LIMIT) == ("x" * OUTPUT_LIMIT, False)
    shown, cut = truncate_output("x" * (OUTPUT_LIMIT + 1))
    assert cut and len(shown.encode()) <= OUTPUT_LIMIT


def permission(log: EntryLog, request_id: int, call_id: str, result: dict[str, Any], tool: str | None = "Bash") -> None:
    params: dict[str, Any] = {
        "sessionId": "sess",
        "toolCall": {"toolCallId": call_id, "title": "`rm -rf x`", "kind": "execute", "status": "pending"},
        "options": [
            {"optionId": "approved", "kind": "allow_once", "name": "Yes"},
            {"optionId": "abort", "kind": "reject_once", "name": "No"},
        ],
    }
    if tool is not None:
        params["_meta"] = {"baton": {"tool_name": tool, "tool_use_id": call_id}}
    log.request("from_agent", "session/request_permission", request_id, params)
    log.respond("to_agent", "session/request_permission", request_id, result=result)


def test_denied_call_gives_a_message_and_a_denied_finish() -> None:
    log = started()
    bash(log, "c", "rm -rf x")
    deny = {"decision": "deny", "reason": "rule:Bash(rm:*)"}
    permission(log, 0, "c", {"outcome": {"outcome": "selected", "optionId": "abort"}, "_meta": {"baton": deny}})
    done(log, "c", "denied by baton", failed=True)
    types = [event["type"] for event in events(log)]
    assert types == ["task.started", "command.started", "message", "command.finished"]
    assert of_type(log, "message") == [{"role": "user", "text": "rule:Bash(rm:*)", "denied": True, "tool": "Bash"}]
    assert of_type(log, "command.finished")[0]["denied"] is True


def test_denial_read_from_the_chosen_option_or_a_cancelled_outcome() -> None:
    log = started()
    bash(log, "a", "rm a")
    bash(log, "b", "rm b")
    bash(log, "c", "ls")
    permission(log, 0, "a", {"outcome": {"outcome": "selected", "optionId": "abort"}}, tool=None)
    permission(log, 1, "b", {"outcome": {"outcome": "cancelled"}}, tool=None)
    permission(log, 2, "c", {"outcome": {"outcome": "selected", "optionId": "approved"}})
    assert of_type(log, "message") == [
        {"role": "user", "text": "denied", "denied": True, "tool": "Bash"},
        {"role": "user", "text": "cancelled", "denied": True, "tool": "Bash"},
    ]


def test_permission_before_the_call_still_marks_it_denied() -> None:
    log = started()
    deny = {"outcome": {"outcome": "selected", "optionId": "abort"}, "_meta": {"baton": {"decision": "deny"}}}
    permission(log, 0, "c", deny)
    bash(log, "c", "rm -rf x")
    done(log, "c", "no", failed=True)
    assert of_type(log, "command.finished")[0]["denied"] is True


def approved(log: EntryLog, request_id: int, call_id: str, tool: str, proposed: dict[str, Any], **answer: Any) -> None:
    """The agent asks about a call; the host allows it (``answer``: more of ``_meta.baton``)."""
    tool_call = {"toolCallId": call_id, "status": "pending", "rawInput": proposed}
    params = {"sessionId": "sess", "toolCall": tool_call, "options": [{"optionId": "ok", "kind": "allow_once"}]}
    params["_meta"] = {"baton": {"tool_name": tool, "input": proposed, "tool_use_id": call_id}}
    log.request("from_agent", "session/request_permission", request_id, params)
    meta = {"decision": "allow", "reason": "human", **answer}
    result = {"outcome": {"outcome": "selected", "optionId": "ok"}, "_meta": {"baton": meta}}
    log.respond("to_agent", "session/request_permission", request_id, result=result)


def test_an_edited_call_is_reported_as_what_ran_and_who_edited_it() -> None:
    log = started()
    bash(log, "c", "rm -rf one")
    approved(log, 0, "c", "Bash", {"command": "rm -rf one"}, decided_by="ada", updated_input={"command": "echo no"})
    done(log, "c", "no", exit_code=0)
    edited = {"edited": True, "edited_by": "ada", "original_command": "rm -rf one"}
    assert of_type(log, "command.started") == [
        {"command": "rm -rf one", "tool": "Bash", "tool_call_id": "c"},  # as proposed, before the decision
        {"command": "echo no", "tool": "Bash", "tool_call_id": "c", **edited},  # what runs
    ]
    [finished] = of_type(log, "command.finished")
    assert finished["command"] == "echo no" and {k: finished[k] for k in edited} == edited
    # A Write sent to another file: the file changed is the edited input's.
    log = started()
    proposed = {"file_path": f"{CWD}/a.txt", "content": "x"}
    diff = {"type": "diff", "path": f"{CWD}/a.txt", "oldText": None, "newText": "x"}
    call(log, "w", "edit", rawInput=proposed, locations=[{"path": f"{CWD}/a.txt"}], content=[diff])
    updated = {"file_path": f"{CWD}/b.txt", "content": "y"}
    approved(log, 1, "w", "Write", proposed, decided_by="terminal", updated_input=updated)
    done(log, "w", "File created")
    assert of_type(log, "file.changed") == [
        {"path": "b.txt", "abs_path": f"{CWD}/b.txt", "change": "add", "tool": "edit",
         "tool_call_id": "w", "edited": True, "edited_by": "terminal", "original_input": proposed},
    ]  # fmt: skip


def test_an_input_handed_back_unchanged_is_no_edit() -> None:
    log = started()
    bash(log, "c", "ls")
    approved(log, 0, "c", "Bash", {"command": "ls"}, decided_by="ada", updated_input={"command": "ls"})
    done(log, "c", "a.txt", exit_code=0)
    assert [data.get("edited") for data in of_type(log, "command.started") + of_type(log, "command.finished")] == [
        None,
        None,
    ]


def test_turn_and_task_finished_and_nothing_after() -> None:
    log = started()
    log.baton(
        "turn_complete",
        {"stop_reason": "end_turn", "usage": {"o": 1}, "total_cost_usd": 0.1, "duration_ms": 5},
    )
    log.baton("status", {"status": "cancelled", "reason": "cancelled", "usage": None})
    update(log, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}})
    log.baton("status", {"status": "failed", "reason": "x", "code": "agent_exited", "message": "gone"})
    produced = events(log)
    assert [event["type"] for event in produced] == ["task.started", "turn.finished", "task.finished"]
    assert produced[1]["data"] == {
        "stop_reason": "end_turn",
        "usage": {"o": 1},
        "total_cost_usd": 0.1,
        "duration_ms": 5,
    }
    assert produced[2]["data"] == {
        "stop_reason": "cancelled",
        "usage": None,
        "total_cost_usd": None,
        "num_turns": None,
        "duration_ms": None,
    }


def test_task_failed_keeps_usage_only_when_known() -> None:
    log = started()
    log.baton("status", {"status": "running", "reason": "resumed"})
    log.baton(
        "status",
        {"status": "failed", "reason": "x", "code": "agent_exited", "message": "gone", "total_cost_usd": 0.5},
    )
    assert of_type(log, "task.failed") == [{"code": "agent_exited", "message": "gone", "total_cost_usd": 0.5}]


def test_replayed_entries_yield_nothing() -> None:
    log = started()
    replay = {"baton": {"replay": True}}
    update(
        log,
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old"}, "_meta": replay},
    )
    log.notify(
        "session/update",
        {
            "sessionId": "sess",
            "_meta": replay,
            "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old"}},
        },
    )
    bash(log, "c", "ls")
    log.entries[-1]["payload"]["params"]["update"]["_meta"]["baton"]["replay"] = True
    done(log, "c", "a", replay=True)
    assert [event["type"] for event in events(log)] == ["task.started"]


def test_feed_is_incremental_and_deterministic() -> None:
    log = started()
    bash(log, "c", "pytest -q")
    done(log, "c", "1 failed, 2 passed in 0.1s", exit_code=0)
    log.baton("status", {"status": "finished", "reason": "end_turn", "stop_reason": "end_turn", "result": "ok"})
    projector = Projector("r1")
    one_by_one = [event for entry in log.entries for event in projector.feed(entry)]
    assert one_by_one == project(log.entries)
    assert [event["seq"] for event in one_by_one] == [1, 2, 3, 4, 5]
    assert one_by_one[3]["data"]["passed"] is False
    assert one_by_one[-1]["data"]["result"] == "ok"
    assert projector.ended and projector.cwd == CWD


def test_cwd_given_up_front_is_used_until_run_started() -> None:
    projector = Projector("r1", cwd="/srv/repo/")
    assert projector.cwd == "/srv/repo"


def test_a_setups_output_is_bounded_and_the_lines_left_out_are_counted() -> None:
    log = EntryLog("r1")
    log.run_started(CWD)
    log.baton("setup", {"status": "started", "source": "option", "command": "yes | head -1500"})
    for number in range(SETUP_OUTPUT_LINES + 500):
        log.baton("setup", {"status": "output", "text": f"line {number}" if number else "x" * (SETUP_LINE_CHARS + 10)})
    log.baton("setup", {"status": "finished", "exit_code": 0})  # an older note: no duration_ms
    events = project(log.entries)
    lines = [event["data"]["text"] for event in events if event["type"] == "setup.output"]
    assert len(lines) == SETUP_OUTPUT_LINES and lines[-1] == f"line {SETUP_OUTPUT_LINES - 1}"
    assert lines[0] == "x" * SETUP_LINE_CHARS
    finished = events[-1]
    assert finished["type"] == "setup.finished"
    # the duration from the entries' timestamps (1 ms apart: the started note to this one)
    assert finished["data"] == {
        "status": "finished",
        "exit_code": 0,
        "duration_ms": SETUP_OUTPUT_LINES + 501,
        "output_lines_omitted": 500,
    }
    # the count starts again for the next setup (a run continuing this one in another execution)
    log.baton("setup", {"status": "started", "source": "option", "command": "true"})
    log.baton("setup", {"status": "output", "text": "again"})
    log.baton("setup", {"status": "finished", "exit_code": 0, "duration_ms": 3})
    again = project(log.entries)[len(events) :]
    assert [event["type"] for event in again] == ["setup.started", "setup.output", "setup.finished"]
    assert again[-1]["data"]["output_lines_omitted"] == 0 and again[-1]["data"]["duration_ms"] == 3
