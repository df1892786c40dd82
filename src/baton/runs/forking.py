"""Forking a run: a new run whose conversation is the original's up to a point, and whose
workspace is the snapshot at that point (``baton fork RUN --turn N | --seq N [PROMPT]``,
``Baton.fork``, ``POST /runs/{id}/fork``; docs/resume.md "Forking a run").

The point is the end of turn N (the N-th ``turn.finished`` of the original: the N-th prompt
and everything the agent did for it) or a log ``seq``; by default the end of the log. The new
run gets, as its first prompt, the conversation folded from the original's log up to that point
(:func:`baton.runs.resume.rebuilt_prompt`: the user and agent messages, the tool calls and their
results) followed by ``PROMPT`` (by default a plain continuation); every agent is forked this way,
none natively. Its workspace is the latest snapshot the original took at or before that point,
restored into ``repo`` (the original's repository by default: ``workspace_dirty`` when it holds
changes the restore would lose; a fork into a fresh folder is what leaves the original's tree alone).
With no snapshot before the point, the workspace is left as it is (the run's base).

The original is not touched (its rows, log and snapshots are only read). The new run records
``forked_from: {run_id, seq, turn, snapshot_id}`` in ``_baton/run_started`` and ``runs.request``.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.errors import NotFoundError, UsageError
from baton.events.project import project
from baton.runs.conversation import rebuild_conversation
from baton.runs.resume import rebuilt_prompt
from baton.runs.spec import RunSpec, spec_of_record

if TYPE_CHECKING:
    from baton.runs.api import Baton
    from baton.runs.handle import RunHandle

__all__ = ["FORK_PROMPT", "ForkPoint", "fork_point", "fork_run"]

FORK_PROMPT = "Continue from this point of the conversation."


@dataclass(frozen=True)
class ForkPoint:
    run_id: str
    seq: int  # the last log entry of the original the fork keeps
    turn: int | None  # the turn that ends there, when the point was given as a turn
    snapshot: dict[str, Any] | None  # the original's latest snapshot at or before ``seq``

    def to_dict(self) -> dict[str, Any]:
        snapshot_id = None if self.snapshot is None else self.snapshot.get("id")
        return {"run_id": self.run_id, "seq": self.seq, "turn": self.turn, "snapshot_id": snapshot_id}


async def fork_point(baton: Baton, run_id: str, *, turn: int | None = None, seq: int | None = None) -> ForkPoint:
    """Where a fork of ``run_id`` starts; ``invalid_argument`` for a turn or seq the run does not have."""
    if turn is not None and seq is not None:
        raise UsageError("invalid_argument", "give --turn or --seq, not both")
    await baton.store.get_run(run_id)  # run_not_found
    entries = await baton.log.read(run_id)
    last = entries[-1]["seq"] if entries else 0
    if turn is not None:
        ends = [event["log_seq"] for event in project(entries) if event["type"] == "turn.finished"]
        if not 1 <= turn <= len(ends):
            raise UsageError(
                "invalid_argument", f"run {run_id} has {len(ends)} finished turns; --turn {turn} is not one"
            )
        cut = ends[turn - 1]
    elif seq is not None:
        if not 1 <= seq <= last:
            raise UsageError("invalid_argument", f"run {run_id}'s log has entries 1 to {last}; --seq {seq} is not one")
        cut = seq
    else:
        cut = last
    taken = [s for s in await baton.store.list_snapshots(run_id) if int(s.get("log_seq_to") or 0) <= cut]
    return ForkPoint(run_id, cut, turn, taken[-1] if taken else None)


async def fork_run(
    baton: Baton,
    run_id: str,
    *,
    turn: int | None = None,
    seq: int | None = None,
    prompt: str | None = None,
    repo: Path | None = None,
    spec_changes: dict[str, Any] | None = None,
) -> RunHandle:
    """Start the fork of ``run_id`` (see the module docstring); ``spec_changes`` override fields of
    the original's spec (``scenario``, ``record``, ``replay`` …)."""
    point = await fork_point(baton, run_id, turn=turn, seq=seq)
    record = await baton.store.get_run(run_id)
    entries = [entry for entry in await baton.log.read(run_id) if entry["seq"] <= point.seq]
    conversation = rebuild_conversation(entries)
    started = next((e["payload"].get("params") or {} for e in entries if e["method"] == "_baton/run_started"), {})
    target = Path(repo) if repo is not None else Path(record.repo or record.cwd or ".")
    if point.snapshot is not None:
        await _restore(baton, run_id, point.snapshot, target)
    spec = spec_of_record(record, started, prompt=rebuilt_prompt(conversation, prompt or FORK_PROMPT), repo=target)
    spec = replace(spec, run_id=None, forked_from=point.to_dict(), **(spec_changes or {}))
    return await baton.start(_with_spec_checks(spec))


def _with_spec_checks(spec: RunSpec) -> RunSpec:
    if spec.record is not None and spec.replay is not None:
        raise UsageError("invalid_argument", "record and replay are exclusive")
    return spec


async def _restore(baton: Baton, run_id: str, snapshot: dict[str, Any], target: Path) -> None:
    """The snapshot's tree into ``target`` (``workspace_dirty`` when that would lose changes)."""
    from baton.snapshots import GitObjects, LocalBlobStore, blob_store_for, restore_archive, shadow_for

    key = snapshot.get("archive_key")
    if not key:
        raise NotFoundError("snapshot_not_found", f"snapshot {snapshot.get('id')} of run {run_id} has no archive")
    record = await baton.store.get_run(run_id)
    settings = baton.settings
    shadow = shadow_for(settings.run_dir(run_id), Path(record.repo or record.cwd or "."))
    base = GitObjects(shadow.environment) if shadow.exists else None
    blobs = blob_store_for(None, settings.home)

    original = Path(record.repo or record.cwd or ".")
    base_commit = snapshot.get("base_commit")

    def work() -> None:
        if not target.exists() or not any(target.iterdir()):
            _clone(original, target, str(base_commit) if base_commit else None)
        if isinstance(blobs, LocalBlobStore):
            restore_archive(blobs.path_of(str(key)), target, base=base)
            return
        with tempfile.TemporaryDirectory(prefix="baton-fork-") as folder:  # pragma: no cover - remote stores
            path = Path(folder) / "archive.tar.gz"
            blobs.fetch(str(key), path)
            restore_archive(path, target, base=base)

    await asyncio.to_thread(work)


def _clone(original: Path, target: Path, commit: str | None) -> None:
    """A fresh folder becomes a clone of the original repository at the snapshot's base commit."""
    target.mkdir(parents=True, exist_ok=True)
    if not (original / ".git").exists():
        return
    git = ["git", "-c", "advice.detachedHead=false"]
    try:
        subprocess.run(
            [*git, "clone", "-q", "--no-hardlinks", str(original), str(target)], check=True, capture_output=True
        )
        if commit:
            subprocess.run([*git, "-C", str(target), "checkout", "-q", commit], check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip()
        raise UsageError("invalid_argument", f"cannot clone {original} into {target}: {message}") from exc
