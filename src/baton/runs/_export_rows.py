"""The rows of a run export, checked as they are read: an export is hostile input, so every
row must be an object with its table's required columns, and anything odd is refused with
``archive_unsafe_entry`` before the store sees it (:mod:`baton.runs.handoff`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Table

from baton.acp.wire import decode_json
from baton.errors import WorkspaceError
from baton.store.records import RUN_MODES, RUN_STATUSES, chunk_text
from baton.store.tables import run_transitions, runs, snapshots

__all__ = [
    "as_integer",
    "as_list",
    "log_row",
    "parse_json",
    "row_of",
    "run_row",
    "snapshot_row",
    "unsafe",
]

_RUN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_SNAPSHOT_ID: Final = re.compile(r"s[1-9][0-9]*")
_DIRECTIONS: Final = frozenset({"to_agent", "from_agent", "baton"})


def unsafe(message: str) -> WorkspaceError:
    return WorkspaceError("archive_unsafe_entry", message)


def row_of(value: Any, table: Table, required: Iterable[str], what: str) -> dict[str, Any]:
    """A row of ``table`` from the file: known columns only (never its keys), the required ones present."""
    if not isinstance(value, dict):
        raise unsafe(f"the export's {what} is not an object")
    columns = {column.name for column in table.c} - {"run_key"} - ({"id"} if table is run_transitions else set())
    row = {name: item for name, item in value.items() if name in columns}
    missing = [name for name in required if row.get(name) is None]
    if missing:
        raise unsafe(f"the export's {what} lacks {missing}")
    return row


def run_row(value: Any) -> dict[str, Any]:
    run = row_of(value, runs, ("id", "agent", "permission_mode", "run_mode", "status", "created_at"), "run")
    if not isinstance(run["id"], str) or not _RUN_ID.fullmatch(run["id"]) or run["id"] in (".", ".."):
        raise unsafe(f"the export's run id {run['id']!r} is not a run id")
    if run["status"] not in RUN_STATUSES or run["run_mode"] not in RUN_MODES:
        raise unsafe(f"the export's run has an unknown status or run mode: {run['status']!r}, {run['run_mode']!r}")
    for name in ("agent", "permission_mode", "created_at"):
        if not isinstance(run[name], str):
            raise unsafe(f"the export's run {name} is not a string")
    return run


def parse_json(body: bytes, name: str) -> Any:
    try:
        return decode_json(body)  # orjson's speed on a long log, json.loads's values
    except ValueError as exc:  # not JSON, or not UTF-8
        raise unsafe(f"{name} in the export is not JSON: {exc}") from exc


def as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise unsafe(f"the export's {what} are not a list")
    return value


def as_integer(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise unsafe(f"the export's {what} is not a count")
    return value


def log_row(value: Any, expected: int) -> dict[str, Any]:
    """Log entry number ``expected`` (the log is numbered 1, 2, 3 …) from the file."""
    if not isinstance(value, dict):
        raise unsafe("a log entry in the export is not an object")
    seq = as_integer(value.get("seq"), "log seq")
    if seq != expected:
        raise unsafe(f"the export's log is not numbered 1, 2, 3 … (entry {expected} has seq {seq})")
    payload, direction, method = value.get("payload"), value.get("direction"), value.get("method")
    parsed = parse_json(payload.encode(), "a log payload") if isinstance(payload, str) else None
    if not isinstance(parsed, dict):
        raise unsafe(f"log entry {seq}'s payload is not a JSON object")
    if direction not in _DIRECTIONS or not (method is None or isinstance(method, str)):
        raise unsafe(f"log entry {seq} has an unknown direction or method")
    return {
        "seq": seq,
        "ts": str(value.get("ts")),
        "direction": direction,
        "method": method,
        "payload": payload,
        "chunk_text": chunk_text(method, parsed),  # not in the export: the importing store's
    }


def snapshot_row(value: Any, archives: Mapping[str, Path]) -> dict[str, Any]:
    row = row_of(value, snapshots, ("id", "tree_hash", "created_at"), "snapshot")
    if not isinstance(row["id"], str) or not _SNAPSHOT_ID.fullmatch(row["id"]):
        raise unsafe(f"the export's snapshot id {row['id']!r} is not s1, s2 …")
    for name in ("added", "modified", "deleted", "renamed", "skipped"):
        row[name] = as_list(row.get(name) or [], f"snapshot {name}")
    key = row.get("archive_key")
    if key is not None and key not in archives:
        raise unsafe(f"snapshot {row['id']} names the archive {key!r}, which the export lacks")
    return row
