"""A canary secret handed to an agent never reaches the store: not the log rows, not the
runner events derived from them, not any table, and on SQLite not a byte of the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Text, cast, select

from baton.events.project import Projector
from baton.store import REDACTED, Redactor, SessionLog, Store
from baton.store.tables import metadata

pytestmark = pytest.mark.timeout(20)

CANARY = "sk-ant-canary-7f3a9c2e5b1d"


def agent_conversation() -> list[tuple[str, str, dict[str, object]]]:
    """Where a key turns up in practice: tool output, JSON inside strings, headers, prompts."""
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "completed",
        "rawInput": {"command": f"curl -H 'x-api-key: {CANARY}' https://api.invalid"},
        "rawOutput": {"stdout": f"ANTHROPIC_API_KEY={CANARY}\n", "json": json.dumps({"key": CANARY})},
        "content": [{"type": "content", "content": {"type": "text", "text": f"env shows {CANARY}"}}],
    }
    return [
        ("to_agent", "session/prompt", {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {
            "prompt": [{"type": "text", "text": f"use the key {CANARY}"}]}}),
        ("from_agent", "session/update", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Bash",
                                        "kind": "execute", "rawInput": update["rawInput"]}}}),
        ("from_agent", "session/update", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": update}}),
        ("from_agent", "session/update", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {
                "type": "text", "text": f"Authorization: Bearer {CANARY[::-1]}xyz and {json.dumps(CANARY)}"}}}}),
    ]  # fmt: skip


async def test_the_canary_is_nowhere_in_the_store(store_url: str, tmp_path: Path) -> None:
    async with Store.open(store_url) as store, SessionLog(store, Redactor([CANARY])) as log:
        run = await store.create_run(agent="claude")
        log.open_run(run.id)
        for direction, method, payload in agent_conversation():
            log.append(run.id, direction, method, payload)  # type: ignore[arg-type]
        await log.flush()
        entries = await log.read(run.id)
        projector = Projector(run.id)
        events = [event for entry in entries for event in projector.feed(entry)]
        assert events, "the conversation yields runner events"
        await store.save_runner_events(run.id, events)
        await store.save_conversation_state(run.id, entries[-1]["seq"], {"entries": list(entries)})

        assert REDACTED in json.dumps(entries)
        assert CANARY not in json.dumps(entries)
        assert CANARY not in json.dumps([event["raw"] for event in events])
        assert CANARY not in json.dumps(await store.read_runner_events(run.id))
        with store.engine.connect() as connection:
            for table in metadata.sorted_tables:
                for row in connection.execute(select(*[cast(column, Text) for column in table.c])):
                    assert CANARY not in repr(tuple(row)), f"the canary is in {table.name}"
    if store_url.startswith("sqlite:///"):
        database = Path(store_url.removeprefix("sqlite:///"))
        for path in database.parent.glob(database.name + "*"):  # the database, its WAL and SHM
            assert CANARY.encode() not in path.read_bytes(), f"the canary is in {path.name}"
