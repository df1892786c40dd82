"""``baton.runs.queries.Runs``, the light core API: cheap to import, and the same answers on its
SQLite read path (``baton.store.reads``, standard ``sqlite3``) as over SQLAlchemy's store."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from baton.config import Settings
from baton.events.entry import utc_timestamp
from baton.gates.ledger import GateLedger
from baton.runs.queries import Runs
from baton.store import Redactor, SessionLog, Store
from baton.store.migrate import upgrade
from baton.store.reads import SqliteReads

pytestmark = pytest.mark.timeout(120)

HEAVY = ("acp", "alembic", "claude_agent_sdk", "dbos", "fastapi", "sqlalchemy", "uvicorn", "yaml")


def test_the_light_api_imports_no_agent_code_no_server_and_no_sqlalchemy() -> None:
    probe = (
        "import sys\n"
        "from baton import BatonError, RunSpec, Runs, Settings\n"
        "import baton.runs.queries, baton.store.reads, baton.store\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('baton.agents', 'baton.acp', 'baton.server'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    # baton.acp.wire (the JSON decoder of the log; orjson alone) under baton.acp's lazy package.
    assert done.stdout.splitlines() == ["[]", "['baton.acp', 'baton.acp.wire']"]


def test_baton_exports_its_public_names() -> None:
    import baton
    from baton import Baton, BatonError, Runs, RunSpec, Settings

    assert {"Baton", "BatonError", "RunSpec", "Runs", "Settings"} <= set(baton.__all__)
    assert Baton.__module__ == "baton.runs.api" and Runs is not None and RunSpec.__name__ == "RunSpec"
    assert issubclass(BatonError, Exception) and Settings.__name__ == "Settings"
    with pytest.raises(AttributeError):
        baton.Nope  # noqa: B018


async def _fill(settings: Settings) -> dict[str, str]:
    settings.home.mkdir(parents=True, exist_ok=True)
    async with Store.open(settings.resolved_database_url) as store, SessionLog(store, Redactor()) as log:
        task = await store.create_task("the task", title="A title", repo="/tmp/x", metadata={"k": [1]})
        first = await store.create_run(agent="claude", repo="/tmp/x", request={"prompt": "do it"}, owner="ann")
        second = await store.create_run(agent="codex", repo="/tmp/y", task_id=task.id, owner="bob")
        await store.update_run(first.id, status="running", status_reason="started", total_cost_usd=0.5)
        log.open_run(first.id)
        for number in range(3):
            message = {"jsonrpc": "2.0", "method": "session/update", "params": {"n": number, "text": "héllo"}}
            log.append(first.id, "from_agent", "session/update", message)
        for where in ("/first", "/second"):  # the latest of a method is the one read
            note = {"jsonrpc": "2.0", "method": "_baton/sandbox", "params": {"workspace": where, "big": 2**70}}
            log.append(first.id, "internal", "_baton/sandbox", note)
        log.append(first.id, "internal", "_baton/odd", {"jsonrpc": "2.0", "method": "_baton/odd", "params": [1]})
        await log.flush()
        await store.add_snapshot(
            first.id,
            {"id": "s2", "tree_hash": "b" * 40, "added": ["a"], "modified": [], "deleted": [], "renamed": []},
        )
        await store.add_snapshot(
            first.id, {"id": "s10", "tree_hash": "c" * 40, "added": [], "modified": ["m"], "deleted": [], "renamed": []}
        )
        ledger = GateLedger(store)
        gate, _ = await ledger.open(
            first.id, "tool", summary="rm -rf one", tool_name="Bash", input={"command": "rm -rf one"}
        )
        await ledger.open(second.id, "question", summary="which?", questions=[{"header": "h", "options": []}])
        await ledger.decide(gate.id, {"decision": "deny", "reason": "no"}, decided_by="me")
    return {"first": first.id, "second": second.id, "task": task.id, "gate": gate.id}


async def _everything(runs: Runs, ids: dict[str, str]) -> dict[str, Any]:
    listed = await runs.list_runs()
    return {
        "runs": listed,
        "running": await runs.list_runs("interrupted"),
        "one": await runs.get_run(ids["first"]),
        "prompts": [await runs.prompt(record) for record in listed],
        "transitions": await runs.transitions(ids["first"]),
        "task": await runs.get_task(ids["task"]),
        "position": await runs.log_position(ids["first"]),
        "log": await runs.read_log(ids["first"], after=1),
        "until": await runs.read_log(ids["first"], until=2),
        "snapshots": await runs.snapshots(ids["first"]),
        "gates": await runs.gates(),
        "denied": await runs.gates(status="denied"),
        "bob": await runs.gates(owner="bob"),
        "of_run": await runs.gates(run_id=ids["second"]),
        "gate": await runs.gate(ids["gate"]),
        "sandbox": await runs.last_note(ids["first"], "_baton/sandbox"),
        "no_note": await runs.last_note(ids["second"], "_baton/sandbox"),
        "odd_note": await runs.last_note(ids["first"], "_baton/odd"),
    }


def test_the_sqlite_read_path_answers_as_the_store_does(tmp_path: Path) -> None:
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home")})
    ids = asyncio.run(_fill(settings))
    assert SqliteReads.open(settings.resolved_database_url) is not None

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Runs(settings) as light:
            lightly = await _everything(light, ids)
        async with Store.open(settings.resolved_database_url) as store, SessionLog(store, Redactor()) as log:
            fully = await _everything(Runs.over(store, log, settings), ids)
        return lightly, fully

    lightly, fully = asyncio.run(both())
    assert lightly == fully
    assert lightly["one"].status == "interrupted" and lightly["one"].status_reason == "executor_dead"
    assert lightly["prompts"] == ["do it", "A title"]
    assert [snapshot["id"] for snapshot in lightly["snapshots"]] == ["s2", "s10"]
    assert [entry["seq"] for entry in lightly["log"]] == [2, 3, 4, 5, 6] and lightly["log"][0]["payload"]["params"][
        "n"
    ] == 1
    assert lightly["sandbox"] == {"workspace": "/second", "big": 2**70}
    assert lightly["no_note"] is None and lightly["odd_note"] is None  # params that are not an object: none
    assert [gate.kind for gate in lightly["gates"]] == ["tool", "question"] and lightly["bob"] == lightly["of_run"]


def test_reading_a_sqlite_store_imports_no_sqlalchemy(tmp_path: Path) -> None:
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home")})
    ids = asyncio.run(_fill(settings))
    probe = (
        "import asyncio, sys\n"
        "from baton import Runs, Settings\n"
        "async def read():\n"
        f"    async with Runs(Settings.load({{'BATON_HOME': {str(settings.home)!r}}})) as runs:\n"
        f"        return len(await runs.list_runs()), len(await runs.read_log({ids['first']!r})), "
        "len(await runs.gates())\n"
        "print(asyncio.run(read()), 'sqlalchemy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 6, 2) False"


def test_unknown_runs_and_gates_are_not_found_on_both_paths(tmp_path: Path) -> None:
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home")})
    asyncio.run(_fill(settings))

    async def codes(runs: Runs) -> list[str]:
        found = []
        for read in (
            runs.get_run("run_nope"),
            runs.transitions("run_nope"),
            runs.log_position("run_nope"),
            runs.read_log("run_nope"),
            runs.snapshots("run_nope"),
            runs.gates(run_id="run_nope"),
            runs.gate("gate_nope"),
            runs.get_task("task_nope"),
            runs.last_note("run_nope", "_baton/sandbox"),
        ):
            try:
                await read
            except Exception as exc:
                found.append(getattr(exc, "code", repr(exc)))
        return found

    async def both() -> tuple[list[str], list[str]]:
        async with Runs(settings) as light:
            lightly = await codes(light)
        async with Store.open(settings.resolved_database_url) as store, SessionLog(store, Redactor()) as log:
            fully = await codes(Runs.over(store, log, settings))
        return lightly, fully

    lightly, fully = asyncio.run(both())
    assert lightly == fully == [*["run_not_found"] * 6, "gate_not_found", "task_not_found", "run_not_found"]


def test_a_store_not_at_the_newest_revision_is_migrated_not_read_lightly(tmp_path: Path) -> None:
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home")})
    settings.home.mkdir(parents=True)
    from baton.store.engine import make_engine

    engine = make_engine(settings.resolved_database_url)
    upgrade(engine, "0002")
    engine.dispose()
    assert SqliteReads.open(settings.resolved_database_url) is None
    assert SqliteReads.open("postgresql://localhost/baton") is None

    async def listed() -> list[Any]:
        async with Runs(settings) as runs:
            return await runs.list_runs()

    assert asyncio.run(listed()) == []  # opened through the Store, which migrated it
    assert SqliteReads.open(settings.resolved_database_url) is not None


def test_a_gate_past_its_deadline_is_listed_expired(tmp_path: Path) -> None:
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "home")})
    ids = asyncio.run(_fill(settings))

    async def expire_and_list() -> list[Any]:
        async with Store.open(settings.resolved_database_url) as store:
            gate, _ = await GateLedger(store).open(ids["first"], "plan_review", summary="plan", plan="p")
            past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
            assert past < utc_timestamp()
            await asyncio.to_thread(_set_expiry, store, gate.id, past)
        async with Runs(settings) as runs:
            return await runs.gates(status="expired")

    expired = asyncio.run(expire_and_list())
    assert [(gate.kind, gate.decided_by) for gate in expired] == [("plan_review", "timeout")]


def _set_expiry(store: Store, gate_id: str, when: str) -> None:
    from sqlalchemy import update

    from baton.store.tables import gates

    with store.engine.begin() as connection:
        connection.execute(update(gates).where(gates.c.id == gate_id).values(expires_at=when))
