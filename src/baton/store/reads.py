"""The store's read path on the standard ``sqlite3``: what the read commands need, without SQLAlchemy.

SQLAlchemy costs ~0.5 s to import, longer than most read commands take altogether, so a
SQLite store is read here with the standard module: runs, their status changes, tasks, log
entries and positions, snapshots and gates, as the same records :class:`~baton.store.Store`
and :class:`~baton.gates.ledger.GateLedger` return. It never writes and never migrates:
:meth:`SqliteReads.open` answers None for a database that is not a plain SQLite file at the
newest revision (missing, older, a Postgres URL), and the caller opens the :class:`Store`
instead (which creates or migrates it). This is the store's one module that speaks
``sqlite3`` for reads; :class:`RunReads` is what both paths offer.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import unquote

from baton.acp.wire import decode_json
from baton.errors import NotFoundError
from baton.events.entry import LogEntry
from baton.store._revisions import declared_head
from baton.store.records import GateRecord, RunRecord, TaskRecord, Transition
from baton.store.storage_errors import in_thread

__all__ = ["RunReads", "SqliteReads", "sqlite_path"]

_BUSY_TIMEOUT_SECONDS: Final = 5.0
_RUN_COLUMNS: Final = tuple(name for name in RunRecord.__dataclass_fields__)
_GATE_COLUMNS: Final = tuple(name for name in GateRecord.__dataclass_fields__ if name != "run_id")
_SNAPSHOT_COLUMNS: Final = (
    "id",
    "tree_hash",
    "base_commit",
    "added",
    "modified",
    "deleted",
    "renamed",
    "skipped",
    "log_seq_from",
    "log_seq_to",
    "archive_key",
    "created_at",
)
_JSON_COLUMNS: Final = frozenset(
    {
        "request",
        "result",
        "metadata",
        "input",
        "questions",
        "decision",
        "added",
        "modified",
        "deleted",
        "renamed",
        "skipped",
    }
)
_SELECT_RUNS: Final = f"SELECT {', '.join('r.' + name for name in _RUN_COLUMNS)} FROM runs r"
_RUN_BY_ID: Final = f"{_SELECT_RUNS} WHERE r.id = ?"
_SELECT_GATES: Final = (
    f"SELECT {', '.join('g.' + name for name in _GATE_COLUMNS)}, r.id FROM gates g JOIN runs r ON r.run_key = g.run_key"
)


class RunReads(Protocol):
    """The reads both paths offer: :class:`SqliteReads`, and the :class:`Store` with its log and gates."""

    async def get_run(self, run_id: str) -> RunRecord: ...
    async def list_runs(self, status: str | None = None) -> list[RunRecord]: ...
    async def list_transitions(self, run_id: str) -> list[Transition]: ...
    async def get_task(self, task_id: str) -> TaskRecord: ...
    async def log_position(self, run_id: str) -> int: ...
    async def read_log(self, run_id: str, after: int = 0, until: int | None = None) -> list[LogEntry]: ...
    async def last_params(self, run_id: str, method: str) -> dict[str, Any] | None: ...
    async def list_snapshots(self, run_id: str) -> list[dict[str, Any]]: ...
    async def list_gates(
        self, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> list[GateRecord]: ...
    async def get_gate(self, gate_id: str) -> GateRecord: ...
    async def aclose(self) -> None: ...


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL (as baton writes it); None for any other URL."""
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            rest = url.removeprefix(prefix)
            if not rest or "?" in rest or rest == ":memory:":
                return None
            return Path(unquote(rest))
    return None


class SqliteReads:
    """Reads of one SQLite store file on one connection (used from worker threads, one at a time)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, url: str, *, busy_timeout: float = _BUSY_TIMEOUT_SECONDS) -> SqliteReads | None:
        """Reads of the store at ``url``; None unless it is a SQLite file at the newest revision.

        ``busy_timeout=0`` for reads on the event loop: a locked database raises at once
        (``storage_busy``) instead of blocking the loop (in WAL mode a read is never locked out
        by a writer).
        """
        path = sqlite_path(url)
        head = declared_head()
        if path is None or head is None or not path.is_file():
            return None
        connection = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False)
        connection.isolation_level = None  # no implicit BEGIN: each read is its own statement
        try:
            rows = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.DatabaseError:  # no such table: a blank database
            rows = []
        if [tuple(row) for row in rows] != [(head,)]:
            connection.close()
            return None
        return cls(connection)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    # Runs and tasks.

    async def get_run(self, run_id: str) -> RunRecord:
        return await in_thread(self.run_now, run_id)

    def run_now(self, run_id: str) -> RunRecord:
        """The run, read in the calling thread (a primary-key read: ~0.1 ms), or ``run_not_found``."""
        rows = self._fetch(_RUN_BY_ID, (run_id,))
        if not rows:
            raise NotFoundError("run_not_found", f"no run {run_id}")
        return _run(rows[0])

    async def list_runs(self, status: str | None = None) -> list[RunRecord]:
        if status is None:
            rows = await self._query(f"{_SELECT_RUNS} ORDER BY r.run_key", ())
        else:
            rows = await self._query(f"{_SELECT_RUNS} WHERE r.status = ? ORDER BY r.run_key", (status,))
        return [_run(row) for row in rows]

    async def list_transitions(self, run_id: str) -> list[Transition]:
        rows = await self._query(
            "SELECT r.run_key, t.from_status, t.to_status, t.reason, t.at FROM runs r "
            "LEFT JOIN run_transitions t ON t.run_key = r.run_key WHERE r.id = ? ORDER BY t.id",
            (run_id,),
        )
        if not rows:
            raise NotFoundError("run_not_found", f"no run {run_id}")
        return [Transition(*row[1:]) for row in rows if row[2] is not None]

    async def get_task(self, task_id: str) -> TaskRecord:
        rows = await self._query(
            "SELECT id, prompt, repo, title, metadata, created_at, owner FROM tasks WHERE id = ?", (task_id,)
        )
        if not rows:
            raise NotFoundError("task_not_found", f"no task {task_id}")
        task_id_, prompt, repo, title, metadata, created_at, owner = rows[0]
        return TaskRecord(task_id_, prompt, repo, title, _json(metadata) or {}, created_at, owner)

    # The log.

    async def log_position(self, run_id: str) -> int:
        rows = await self._query(
            "SELECT (SELECT coalesce(max(seq), 0) FROM log_entries e WHERE e.run_key = r.run_key) FROM runs r "
            "WHERE r.id = ?",
            (run_id,),
        )
        if not rows:
            raise NotFoundError("run_not_found", f"no run {run_id}")
        return int(rows[0][0])

    async def read_log(self, run_id: str, after: int = 0, until: int | None = None) -> list[LogEntry]:
        key = await self._run_key(run_id)
        query = "SELECT seq, ts, direction, method, payload FROM log_entries WHERE run_key = ? AND seq > ?"
        arguments: tuple[Any, ...] = (key, after)
        if until is not None:
            query, arguments = query + " AND seq <= ?", (*arguments, until)
        rows = await self._query(query + " ORDER BY seq", arguments)
        return [
            {
                "run_id": run_id,
                "seq": seq,
                "ts": ts,
                "direction": direction,
                "method": method,
                "payload": decode_json(payload),
            }
            for seq, ts, direction, method, payload in rows
        ]

    async def last_params(self, run_id: str, method: str) -> dict[str, Any] | None:
        """The ``params`` of the run's latest committed entry with ``method`` (None: none), or
        ``run_not_found``; one row read."""
        key = await self._run_key(run_id)
        rows = await self._query(
            "SELECT payload FROM log_entries WHERE run_key = ? AND method = ? ORDER BY seq DESC LIMIT 1", (key, method)
        )
        if not rows:
            return None
        params = decode_json(rows[0][0]).get("params")
        return params if isinstance(params, dict) else None

    # Snapshots and gates.

    async def list_snapshots(self, run_id: str) -> list[dict[str, Any]]:
        key = await self._run_key(run_id)
        rows = await self._query(f"SELECT {', '.join(_SNAPSHOT_COLUMNS)} FROM snapshots WHERE run_key = ?", (key,))
        found = [{"run_id": run_id, **_decoded(_SNAPSHOT_COLUMNS, row)} for row in rows]
        found.sort(key=lambda snapshot: int(snapshot["id"][1:]))
        return found

    async def list_gates(
        self, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> list[GateRecord]:
        where, arguments = [], []
        for column, value in (("r.id", run_id), ("g.status", status), ("r.owner", owner)):
            if value is not None:
                where.append(f"{column} = ?")
                arguments.append(value)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._query(f"{_SELECT_GATES}{clause} ORDER BY g.created_at, g.id", tuple(arguments))
        return [_gate(row) for row in rows]

    async def get_gate(self, gate_id: str) -> GateRecord:
        rows = await self._query(f"{_SELECT_GATES} WHERE g.id = ?", (gate_id,))
        if not rows:
            raise NotFoundError("gate_not_found", f"no gate {gate_id}")
        return _gate(rows[0])

    async def _run_key(self, run_id: str) -> int:
        rows = await self._query("SELECT run_key FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise NotFoundError("run_not_found", f"no run {run_id}")
        return int(rows[0][0])

    async def _query(self, sql: str, arguments: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return await in_thread(self._fetch, sql, arguments)

    def _fetch(self, sql: str, arguments: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return [tuple(row) for row in self._connection.execute(sql, arguments).fetchall()]


def _json(text: str | None) -> Any:
    # JSON columns hold JSON text; a Python None was written as SQL NULL or as the text "null".
    return None if text is None else decode_json(text)


def _decoded(columns: tuple[str, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    return {name: _json(value) if name in _JSON_COLUMNS else value for name, value in zip(columns, row, strict=True)}


def _run(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(**_decoded(_RUN_COLUMNS, row))


def _gate(row: tuple[Any, ...]) -> GateRecord:
    fields = _decoded(_GATE_COLUMNS, row[:-1])
    fields["summary"] = fields["summary"] or ""
    return GateRecord(run_id=row[-1], **fields)
