"""When a run's snapshots are captured: after file-changing tools, shell commands, and turns.

:class:`SnapshotRecorder` watches the log entries of a run as the tapping transport appends
them (through :meth:`SnapshotRecorder.sink`). When a tool call completes or fails it asks for
a capture: a file tool (Write, Edit, MultiEdit, NotebookEdit; ACP kinds ``edit``, ``delete``,
``move``) names its paths, so only those are re-hashed; a shell command (kind ``execute``)
or a tool that may change anything asks for a full scan. Captures run in a worker thread,
one at a time, and requests made while one runs are merged into the next (the snapshot's
``log_seq_from``/``log_seq_to`` say which part of the log it covers), so the agent never
waits for git. :meth:`SnapshotRecorder.settle` (called at the end of a turn) scans and waits,
so a turn's captures are logged before its ``_baton/turn_complete``.

Each snapshot is archived (:mod:`baton.snapshots.archive`) into the blob store, logged as
``_baton/tree_snapshot`` (direction ``baton``) and stored with ``Store.add_snapshot`` when the
store has it. A capture that fails is logged as ``_baton/error`` (``snapshot_failed``) and the
run goes on.
"""

# ruff: noqa: PTH118
# (paths from tool calls are joined as strings, exactly as the agent gave them)
from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from baton.events.entry import Direction
from baton.snapshots.archive import build_archive
from baton.snapshots.blobs import BlobStore
from baton.snapshots.shadow import ShadowRepo, Snapshot

if TYPE_CHECKING:  # the ACP package costs ~0.5 s to import: CLI commands that read snapshots never need it
    from baton.events.entry import EntrySink

__all__ = ["STORED_FIELDS", "TREE_SNAPSHOT", "SnapshotRecorder"]

TREE_SNAPSHOT: Final = "_baton/tree_snapshot"
# The snapshot fields the store keeps (the shadow's commit and the log entry hold the rest).
STORED_FIELDS: Final = (
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
_FILE_TOOLS: Final = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
_FILE_KINDS: Final = frozenset({"edit", "delete", "move"})
_SCAN_TOOLS: Final = frozenset({"Bash", "Task", "Agent"})
_PATH_KEYS: Final = ("file_path", "notebook_path", "path", "source", "destination", "old_path", "new_path")


class _ObservingSink:
    def __init__(self, inner: EntrySink, observe: Callable[[int, str | None, dict[str, Any]], None]) -> None:
        self._inner = inner
        self._observe = observe

    def append(self, run_id: str, direction: Direction, method: str | None, payload: dict[str, Any]) -> int:
        seq = self._inner.append(run_id, direction, method, payload)
        self._observe(seq, method, payload)
        return seq

    async def drain(self) -> None:
        await self._inner.drain()


class SnapshotRecorder:
    """Captures one run's snapshots; ``async with`` it around the conversation."""

    def __init__(
        self,
        *,
        run_id: str,
        shadow: ShadowRepo,
        blobs: BlobStore,
        log: EntrySink,
        scratch: Path,
        store: Any = None,
    ) -> None:
        self.run_id = run_id
        self.shadow = shadow
        self._blobs = blobs
        self._log = log
        self._store = store
        self._scratch = scratch
        self._calls: dict[str, dict[str, Any]] = {}
        self._paths: set[str] = set()
        self._full = False
        self._requested_seq = 0
        self._last_seq = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self._busy = False
        self.snapshots: collections.deque[Snapshot] = collections.deque(maxlen=64)  # the latest, for callers

    def sink(self, inner: EntrySink) -> EntrySink:
        """``inner`` (the session log) with this recorder watching every entry appended to it."""
        return _ObservingSink(inner, self.observe)

    async def __aenter__(self) -> SnapshotRecorder:
        if self._worker is not None or self._closed:
            raise RuntimeError("a SnapshotRecorder cannot be reopened")
        try:
            self._scratch.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(self.shadow.prepare)
        except Exception as exc:  # snapshots are best effort: the run goes on without them
            self._failed(exc)
            self._closed = True
            return self
        self._worker = asyncio.create_task(self._work(), name=f"baton-snapshots-{self.run_id}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose(settle=exc_type is None)

    async def aclose(self, *, settle: bool = True) -> None:
        """Finish (``settle``) or abandon the pending capture, then stop the worker."""
        if self._closed:
            return
        if settle and self._worker is not None and not self._worker.done():
            with contextlib.suppress(Exception):
                await self.settle(scan=False)
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()

    # -- requests -----------------------------------------------------------------------------

    def observe(self, seq: int, method: str | None, payload: dict[str, Any]) -> None:
        """Look at one appended entry; a finished file or shell tool call requests a capture."""
        self._last_seq = seq
        if method != "session/update" or self._closed:
            return
        params = payload.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return
        meta = update.get("_meta")
        baton = meta.get("baton") if isinstance(meta, dict) else None
        if isinstance(baton, dict) and baton.get("replay") is True:
            return  # history the agent replayed (session/load): nothing changed now
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return
        call = self._calls.setdefault(call_id, {"paths": set()})
        if isinstance(update.get("kind"), str):
            call["kind"] = update["kind"]
        if isinstance(baton, dict) and isinstance(baton.get("tool_name"), str):
            call["tool"] = baton["tool_name"]
        for location in update.get("locations") or ():
            if isinstance(location, dict) and isinstance(location.get("path"), str):
                call["paths"].add(location["path"])
        raw_input = update.get("rawInput")
        if isinstance(raw_input, dict):
            for key in _PATH_KEYS:
                if isinstance(raw_input.get(key), str):
                    call["paths"].add(raw_input[key])
        if update.get("status") not in ("completed", "failed"):
            return
        self._calls.pop(call_id, None)
        tool, kind = call.get("tool"), call.get("kind")
        if tool in _FILE_TOOLS or kind in _FILE_KINDS:
            if call["paths"]:
                self.request(call["paths"], seq)
            else:
                self.request(None, seq)
        elif kind == "execute" or tool in _SCAN_TOOLS:
            self.request(None, seq)

    def request(self, paths: set[str] | None, seq: int) -> None:
        """Ask for a capture of ``paths`` (``None``: scan everything) covering the log up to ``seq``."""
        if self._closed:
            return
        if paths is None:
            self._full = True
        else:
            self._paths.update(os.path.join(self.shadow.work_tree, p) for p in paths)
        self._requested_seq = max(self._requested_seq, seq)
        self._wake.set()

    async def settle(self, *, scan: bool = True) -> None:
        """Scan (``scan``) and wait until every capture asked for so far is logged."""
        if scan:
            self.request(None, self._last_seq)
        if not self._wake.is_set() and not self._busy:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    # -- the worker ---------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            paths = None if self._full else sorted(self._paths)
            seq = self._requested_seq
            waiters, self._waiters = self._waiters, []
            self._full, self._paths = False, set()
            self._busy = True
            try:
                began = time.monotonic()
                captured = await asyncio.to_thread(self._capture, paths, seq)
                if captured is not None:
                    await self._publish(captured, int((time.monotonic() - began) * 1000))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failed capture never ends the run
                self._failed(exc)
            finally:
                self._busy = False
            if not self._wake.is_set():  # nothing new: whoever waits has what they asked for
                waiters, self._waiters = waiters + self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _failed(self, exc: Exception) -> None:
        params = {"code": "snapshot_failed", "message": f"{type(exc).__name__}: {exc}"[:4000]}
        self._log.append(
            self.run_id, "baton", "_baton/error", {"jsonrpc": "2.0", "method": "_baton/error", "params": params}
        )

    def _capture(self, paths: list[str] | None, seq: int) -> Snapshot | None:
        return self.shadow.capture(paths, log_seq_to=seq, annotate=self._archive)

    def _archive(self, snapshot: Snapshot) -> dict[str, Any]:
        out = self._scratch / f"{snapshot.id}.tar.gz"
        try:
            build_archive(self.shadow, snapshot, out)
            size = out.stat().st_size
            key = self._blobs.put_file(out)
        finally:
            out.unlink(missing_ok=True)
        return {"run_id": self.run_id, "archive_key": key, "archive_size": size}

    async def _publish(self, snapshot: Snapshot, capture_ms: int) -> None:
        # The log gets this step's changes; the changes against the base, which grow with the
        # run, stay in the shadow's commit and the archive's manifest.
        record = snapshot.to_dict(since_base=False)
        params = {"snapshot_id": snapshot.id, **record, "capture_ms": capture_ms}
        message = {"jsonrpc": "2.0", "method": TREE_SNAPSHOT, "params": params}
        self._log.append(self.run_id, "baton", TREE_SNAPSHOT, message)
        self.snapshots.append(snapshot)
        add_snapshot = getattr(self._store, "add_snapshot", None)
        if add_snapshot is not None:
            await add_snapshot(self.run_id, {key: record[key] for key in STORED_FIELDS if key in record})
