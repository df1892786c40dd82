"""The run's inbox, read by the executing process: the real Claude Code against the scripted model.

Commands are written to the store the way another process writes them (``Store.inbox_put``
through ``post_command``); the CLI tests (tests/cli/test_inbox_cli.py) do it from other processes.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.runs.test_claude_host import assert_log_whole, decisions, scripted

from baton.config import Settings
from baton.errors import NotFoundError, RefusedError
from baton.events.entry import LogEntry
from baton.runs import Baton, RunHandle, RunSpec

pytestmark = pytest.mark.claude


def baton_notes(entries: list[LogEntry], name: str) -> list[dict[str, Any]]:
    return [e["payload"]["params"] for e in entries if e["direction"] == "baton" and e["method"] == f"_baton/{name}"]


def prompt_seqs(entries: list[LogEntry]) -> list[tuple[int, str]]:
    return [
        (e["seq"], e["payload"]["params"]["prompt"][0]["text"])
        for e in entries
        if e["method"] == "session/prompt" and e["direction"] == "to_agent"
    ]


def prompts(entries: list[LogEntry]) -> list[str]:
    return [text for _, text in prompt_seqs(entries)]


async def until_turns(baton: Baton, run_id: str, count: int) -> None:
    seen = 0
    async for entry in baton.entries(run_id):
        if entry["method"] == "_baton/turn_complete":
            seen += 1
            if seen == count:
                return


def interactive(repo: Path, **fields: Any) -> RunSpec:
    return RunSpec(prompt="first", repo=repo, run_mode="interactive", **fields)


async def test_an_interactive_run_takes_messages_in_order_until_close(settings: Settings, repo: Path) -> None:
    with scripted(settings, "plain") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(interactive(repo))
            await handle.send("second")
            await baton.send(handle.run_id, "third")
            await handle.close()
            outcome = await asyncio.wait_for(handle.wait(), 40)
            entries = await baton.log.read(handle.run_id)
            with pytest.raises(RefusedError) as ended:
                await handle.send("too late")
    assert outcome.status == "finished"
    assert_log_whole(entries)
    assert prompts(entries) == ["first", "second", "third"]
    taken = baton_notes(entries, "inbox")
    assert [(note["kind"], note["payload"]) for note in taken] == [
        ("user_message", {"content": "second"}),
        ("user_message", {"content": "third"}),
        ("close", {}),
    ]
    assert baton_notes(entries, "closed") == [{"reason": "close"}]
    assert len(baton_notes(entries, "turn_complete")) == 3
    # Each command is in the log before it is acted on.
    inbox = [e for e in entries if e["method"] == "_baton/inbox"]
    seq_of = {e["payload"]["params"]["payload"].get("content"): e["seq"] for e in inbox}
    prompted = {text: seq for seq, text in prompt_seqs(entries)}
    assert seq_of["second"] < prompted["second"] and seq_of["third"] < prompted["third"]
    assert ended.value.code == "run_not_running"


async def test_an_idle_interactive_run_ends_finished(settings: Settings, repo: Path) -> None:
    with scripted(replace(settings, interactive_idle_seconds=0.5), "plain") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(interactive(repo))
            outcome = await asyncio.wait_for(handle.wait(), 40)
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished"
    assert baton_notes(entries, "closed") == [{"reason": "idle_timeout", "idle_seconds": 0.5}]


async def test_cancel_through_the_inbox_ends_a_waiting_interactive_run(settings: Settings, repo: Path) -> None:
    with scripted(settings, "plain") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(interactive(repo))
            await until_turns(baton, handle.run_id, 1)
            await baton.cancel(handle.run_id, reason="enough")
            outcome = await asyncio.wait_for(handle.wait(), 40)
            entries = await baton.log.read(handle.run_id)
            (record,) = await baton.runs(status="cancelled")
    assert outcome.status == "cancelled" and record.id == handle.run_id
    assert baton_notes(entries, "inbox")[-1]["payload"] == {"reason": "enough"}
    assert entries[-1]["payload"]["params"]["status"] == "cancelled"


async def test_a_background_run_refuses_messages_and_close_in_its_log(settings: Settings, repo: Path) -> None:
    with scripted(settings, "long-command") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, allow=("Bash(sleep:*)", "Bash(echo:*)")))
            await _until_allowed(baton, handle)
            with pytest.raises(RefusedError) as at_once:
                await handle.send("more")
            assert at_once.value.code == "run_not_interactive"
            # What another writer (the HTTP server) queues anyway is refused in the log.
            await baton.store.inbox_put(handle.run_id, "user_message", {"content": "more"})
            await baton.store.inbox_put(handle.run_id, "close", {})
            await _until_note(baton, handle.run_id, "inbox_refused", 2)
            handle.cancel()
            await asyncio.wait_for(handle.wait(), 30)
            entries = await baton.log.read(handle.run_id)
    refused = baton_notes(entries, "inbox_refused")
    assert [(note["kind"], note["code"]) for note in refused] == [
        ("user_message", "run_not_interactive"),
        ("close", "run_not_interactive"),
    ]
    assert prompts(entries) == ["go"]


async def test_set_permission_mode_through_the_inbox_changes_later_decisions(settings: Settings, repo: Path) -> None:
    with scripted(settings, "needs-approval") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(interactive(repo, allow=("Bash(touch:*)",)))
            await until_turns(baton, handle.run_id, 1)
            await baton.set_permission_mode(handle.run_id, "plan")
            await baton.set_permission_mode(handle.run_id, "noSuchMode")
            if os.geteuid() == 0:
                await baton.set_permission_mode(handle.run_id, "bypassPermissions")
            await handle.send("once more")
            await handle.close()
            await asyncio.wait_for(handle.wait(), 40)
            entries = await baton.log.read(handle.run_id)
            record = await baton.store.get_run(handle.run_id)
    first, second = (answer["reason"] for answer in decisions(entries).values())
    assert (first, second) == ("rule:Bash(touch:*)", "mode:plan")
    assert record.permission_mode == "plan"
    refused = [(note["kind"], note["code"]) for note in baton_notes(entries, "inbox_refused")]
    expected = [("set_permission_mode", "invalid_argument")]
    if os.geteuid() == 0:
        expected.append(("set_permission_mode", "bypass_refused_as_root"))
    assert refused == expected
    # The agent was told too (session/set_mode), before the next prompt.
    methods = [e["method"] for e in entries]
    assert methods.index("session/set_mode") < len(methods) - methods[::-1].index("session/prompt")


async def test_commands_for_an_unknown_run_are_refused(settings: Settings) -> None:
    async with Baton(settings) as baton:
        for command in (baton.cancel("run_nope"), baton.send("run_nope", "hi"), baton.close("run_nope")):
            with pytest.raises(NotFoundError) as missing:
                await command
            assert missing.value.code == "run_not_found"


async def _until_allowed(baton: Baton, handle: RunHandle) -> None:
    async for entry in baton.entries(handle.run_id):
        if entry["method"] == "session/request_permission" and entry["direction"] == "to_agent":
            await asyncio.sleep(0.5)  # let the allowed `sleep` start
            return


async def _until_note(baton: Baton, run_id: str, name: str, count: int) -> None:
    seen = 0
    async for entry in baton.entries(run_id):
        if entry["method"] == f"_baton/{name}":
            seen += 1
            if seen == count:
                return
