"""A run's result delivered: the branch made, pushed, handed to ``result.on_branch``, merged.

:class:`Results` does it for one store. Where the log notes go depends on who holds the run:

- at the end of an execution (:meth:`Results.at_end`, called from the executor's finish path,
  before its final ``_baton/status``), the execution's own session log takes them, so
  ``branch.created`` comes before ``task.finished``;
- for a run no live process executes (``baton branch``/``push``/``merge`` after it ended), the
  notes are appended and ``runs.result`` updated in one short transaction holding the run's
  lock (``Store.with_locked_run``), after the git work is done. A run a live process executes is
  refused with ``run_active``.

The notes (docs/internals.md): ``_baton/branch_created``, ``_baton/no_branch``,
``_baton/branch_pushed``, ``_baton/pull_request``, ``_baton/branch_merged``, and ``_baton/error``
(``push_failed``, ``on_branch_failed``) when a step after the branch fails.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from baton.acp.extensions import notification
from baton.config import Settings
from baton.errors import BatonError, NotFoundError, RefusedError
from baton.results.branch import Author, Made, check_branch_name, commit_archive
from baton.results.merge import Merged, merge_branch
from baton.results.message import commit_message, last_agent_message, left_out, prompt_of
from baton.results.push import HookRun, push_branch, run_on_branch
from baton.results.repository import Repository
from baton.runs.executors import executor_alive
from baton.runs.relocation import blob_path
from baton.snapshots import blob_store_for
from baton.store import Redactor, SessionLog, Store
from baton.store.records import RunRecord
from baton.store.store import LockedRun

__all__ = ["AUTOMATIC_KINDS", "BranchOutcome", "Note", "Results", "default_branch_name", "workspace_kind"]

AUTOMATIC_KINDS: Final = frozenset({"worktree", "clone"})  # a branch at the end without being asked
DEFAULT_REMOTE: Final = "origin"
Note = Callable[[str, dict[str, Any]], Any]  # an execution's ``_note(name, params)``


def workspace_kind(record: RunRecord) -> str:
    """``worktree``, ``clone`` or ``in-place`` (a run recorded without ``request.workspace``)."""
    return str(record.workspace["kind"])


def default_branch_name(run_id: str) -> str:
    """``baton/<short id>``: the last 8 characters of a ``run_<ulid>`` id (its random part)."""
    short = run_id.removeprefix("run_")
    return f"baton/{short[-8:] if len(short) == 26 else short}"


@dataclass
class BranchOutcome:
    """What ``branch`` did: ``made`` (None when the run changed nothing), the push, the hook."""

    run_id: str
    made: Made | None
    snapshot_id: str | None
    skipped: list[dict[str, str]] = field(default_factory=list)
    pushed_to: str | None = None
    push_error: dict[str, Any] | None = None
    hook: HookRun | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"run_id": self.run_id, "snapshot_id": self.snapshot_id}
        if self.made is None:
            body.update(branch=None, reason="no_changes")
            return body
        body.update(self.made.to_dict(), skipped=self.skipped, pushed_to=self.pushed_to)
        if self.push_error is not None:
            body["push_error"] = self.push_error
        if self.hook is not None:
            body["pull_request_url"] = self.hook.url
        return body


@dataclass
class _Delivery:
    """Notes to log and the new ``runs.result``, recorded together."""

    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    result: dict[str, Any] | None = None


class Results:
    """Branches, pushes and merges of runs in one store (see the module)."""

    def __init__(self, store: Store, settings: Settings, log: SessionLog | None = None) -> None:
        self._store = store
        self._settings = settings
        self._log = log if log is not None else SessionLog(store, Redactor())  # never entered: it only reads

    # -- the end of an execution ----------------------------------------------------------------

    async def at_end(self, run_id: str, note: Note, *, result: str | None = None) -> None:
        """The branch a worktree or clone run leaves (and an in-place one with
        ``result.branch_in_place``), logged through ``note`` before the run's final status.
        A failure is logged as ``_baton/error``: the run's own outcome stands."""
        record = await self._store.get_run(run_id)
        if workspace_kind(record) not in AUTOMATIC_KINDS and not self._settings.result_branch_in_place:
            return
        await self._log.flush()
        delivery = _Delivery()
        try:
            await self._branch(record, None, None, delivery, last_message=result)
        except BatonError as exc:
            delivery.notes.append(("error", {"code": exc.code, "message": exc.message}))
        for name, params in delivery.notes:
            note(name, params)
        if delivery.result is not None:
            await self._store.update_run(run_id, result=delivery.result)

    # -- commands (a run no live process executes) -----------------------------------------------

    async def branch(self, run_id: str, *, snapshot_id: str | None = None, name: str | None = None) -> BranchOutcome:
        """Make the run's branch now (``baton branch RUN [--snapshot S] [--name NAME]``)."""
        record = await self._ended(run_id)
        delivery = _Delivery()
        outcome = await self._branch(record, snapshot_id, name, delivery)
        await self._record(run_id, delivery)
        return outcome

    async def push(self, run_id: str, remote: str | None = None) -> dict[str, Any]:
        """Push the run's branch (``push_failed``), then run ``result.on_branch``; the run's new result."""
        record = await self._ended(run_id)
        result, repo = self._made(record)
        delivery = _Delivery(result=dict(result))
        remote = remote or DEFAULT_REMOTE
        await asyncio.to_thread(push_branch, repo, str(result["branch"]), remote)
        self._pushed(delivery, remote)
        await self._hook(record.id, repo, delivery)
        await self._record(run_id, delivery)
        return dict(delivery.result or {})

    async def merge(self, run_id: str, into: str | None = None) -> Merged:
        """Merge the run's branch into ``into`` (default: the checked-out branch): ``merge_conflict``,
        ``workspace_dirty``, or the merge made."""
        record = await self._ended(run_id)
        result, repo = self._made(record)
        author = Author.parse(self._settings.result_author)
        merged = await asyncio.to_thread(merge_branch, repo, str(result["branch"]), into, author)
        if merged.kind != "up-to-date":
            delivery = _Delivery(result={**result, "merged_into": merged.into, "merge_commit": merged.commit})
            delivery.notes.append(("branch_merged", merged.to_dict()))
            await self._record(run_id, delivery)
        return merged

    # -- the steps ----------------------------------------------------------------------------------

    async def _branch(
        self,
        record: RunRecord,
        snapshot_id: str | None,
        name: str | None,
        delivery: _Delivery,
        *,
        last_message: str | None = None,
    ) -> BranchOutcome:
        branch = check_branch_name(name or default_branch_name(record.id))
        snapshots = [s for s in await self._store.list_snapshots(record.id) if s.get("archive_key")]
        chosen = _choose(snapshots, record.id, snapshot_id)
        if chosen is None:
            delivery.notes.append(("no_branch", {"reason": "no_changes", "snapshot_id": None}))
            return BranchOutcome(record.id, None, None)
        upto = snapshots[: snapshots.index(chosen) + 1]
        skipped = left_out(upto)
        entries = await self._log.read(record.id)
        message = commit_message(
            prompt_of(record.request, entries),
            last_message or last_agent_message(entries),
            skipped,
            record.id,
        )
        author = Author.parse(self._settings.result_author)
        repo = await asyncio.to_thread(Repository.at, _repository_path(record))
        base = chosen.get("base_commit")
        made = await asyncio.to_thread(self._commit, repo, chosen, base, branch, message, author)
        outcome = BranchOutcome(record.id, made, str(chosen["id"]), skipped)
        if made is None:
            delivery.notes.append(("no_branch", {"reason": "no_changes", "snapshot_id": chosen["id"]}))
            return outcome
        delivery.notes.append(
            ("branch_created", {**made.to_dict(), "skipped": skipped, "snapshot_id": chosen["id"],
                                "repository": str(repo.work_tree)})
        )  # fmt: skip
        delivery.result = {**made.to_dict(), "repository": str(repo.work_tree), "snapshot_id": chosen["id"]}
        if self._settings.result_push or (self._settings.result_push is None and workspace_kind(record) == "clone"):
            try:
                await asyncio.to_thread(push_branch, repo, made.branch, DEFAULT_REMOTE)
            except BatonError as exc:
                outcome.push_error = exc.to_dict()
                delivery.notes.append(("error", {"code": exc.code, "message": exc.message}))
                return outcome
            self._pushed(delivery, DEFAULT_REMOTE)
            outcome.pushed_to = DEFAULT_REMOTE
        outcome.hook = await self._hook(record.id, repo, delivery)
        return outcome

    def _commit(
        self, repo: Repository, snapshot: dict[str, Any], base: Any, branch: str, message: str, author: Author
    ) -> Made | None:
        if base is not None and repo.resolve(f"{base}^{{commit}}") is None:
            raise RefusedError(
                "base_commit_missing",
                f"{repo.work_tree} does not have the run's base commit {base}",
                details={"base_commit": base},
            )
        blobs = blob_store_for(None, self._settings.home)
        with tempfile.TemporaryDirectory(prefix="baton-result-") as scratch:
            archive = blob_path(blobs, str(snapshot["archive_key"]), Path(scratch))
            return commit_archive(
                repo, archive, base=str(base) if base else None, name=branch, message=message, author=author
            )

    def _pushed(self, delivery: _Delivery, remote: str) -> None:
        result = delivery.result or {}
        delivery.result = {**result, "pushed_to": remote}
        delivery.notes.append(("branch_pushed", {"branch": result.get("branch"), "commit": result.get("commit"),
                                                 "remote": remote}))  # fmt: skip

    async def _hook(self, run_id: str, repo: Repository, delivery: _Delivery) -> HookRun | None:
        command = self._settings.result_on_branch
        result = delivery.result or {}
        if not command:
            return None
        ran = await asyncio.to_thread(
            run_on_branch,
            repo,
            command,
            run_id=run_id,
            branch=str(result["branch"]),
            base=result.get("base"),
            commit=str(result["commit"]),
            remote=result.get("pushed_to"),
        )
        if not ran.ok:
            message = f"result.on_branch exited {ran.returncode}: {ran.output.strip()}"
            delivery.notes.append(("error", {"code": "on_branch_failed", "message": message}))
        elif ran.url is not None:
            delivery.result = {**result, "pull_request_url": ran.url}
            delivery.notes.append(("pull_request", {"url": ran.url, "branch": result["branch"]}))
        return ran

    # -- records ------------------------------------------------------------------------------------

    async def _ended(self, run_id: str) -> RunRecord:
        """The run, unless a live process executes it (``run_active``)."""
        record = await self._store.get_run(run_id)
        if _live(record):
            raise RefusedError(
                "run_active",
                f"run {run_id} is {record.status} in a live process; its branch is made when it ends",
            )
        return record

    def _made(self, record: RunRecord) -> tuple[dict[str, Any], Repository]:
        result = record.result if isinstance(record.result, dict) else None
        if not result or not result.get("branch"):
            raise NotFoundError("branch_not_found", f"run {record.id} has no branch yet: `baton branch {record.id}`")
        return result, Repository.at(Path(str(result.get("repository") or _repository_path(record))))

    async def _record(self, run_id: str, delivery: _Delivery) -> None:
        """The notes and the result, in one transaction holding the run's lock."""

        def work(locked: LockedRun) -> None:
            if _live(locked.record):
                raise RefusedError("run_active", f"run {run_id} was taken over by a live process meanwhile")
            for name, params in delivery.notes:
                message = notification(name, params)
                locked.append("baton", message["method"], message)
            if delivery.result is not None:
                locked.update(result=delivery.result)

        await self._store.with_locked_run(run_id, work)


def _live(record: RunRecord) -> bool:
    return not record.is_terminal and executor_alive(record.executor_id, record.heartbeat_at)


def _choose(snapshots: list[dict[str, Any]], run_id: str, snapshot_id: str | None) -> dict[str, Any] | None:
    if snapshot_id is None:
        return snapshots[-1] if snapshots else None
    for snapshot in snapshots:
        if snapshot["id"] == snapshot_id:
            return snapshot
    raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshot {snapshot_id} with an archive")


def _repository_path(record: RunRecord) -> Path:
    """Where the branch goes: a clone's own repository; for a worktree or in place, the user's."""
    request = record.request if isinstance(record.request, dict) else {}
    found = request.get("workspace")
    asked: dict[str, Any] = found if isinstance(found, dict) else {}
    if asked.get("kind") == "clone" and asked.get("path"):
        return Path(str(asked["path"]))
    repo = asked.get("repo")
    if isinstance(repo, str) and repo and "://" not in repo and Path(repo).is_dir():
        return Path(repo)
    return Path(str(asked.get("path") or record.repo or record.cwd or "."))
