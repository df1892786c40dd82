"""An editor session's runs and the conversation they hold, read back from the store and the log.

An editor session *is* a baton task (``tasks.id``, metadata ``{"source": "baton acp"}``): every
run behind the session carries it as ``task_id``, so any process finds the session's runs —
the newest one is the run the next prompt continues. ``session/load`` shows the editor its
conversation again with :func:`history_updates`: the user's prompts as ``user_message_chunk``
(``_meta.baton.prompt = true``)
and the agent's own ``session/update`` notifications as they were logged, in log order, run
after run. What an agent itself replayed (``_meta.baton.replay``) is not shown twice, and a
resumed run's first prompt (the rebuilt transcript on the rebuilt path) is shown as what the
user asked (``_baton/resume``'s ``prompt``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

from baton.errors import BatonError, NotFoundError
from baton.store import SessionLog, Store
from baton.store.records import RunRecord, TaskRecord

__all__ = ["SESSION_SOURCE", "history_updates", "is_replayed", "last_seq", "session_runs", "session_task"]

SESSION_SOURCE: Final = "baton acp"
_PAGE: Final = 5_000
_PROMPT_META: Final = {"baton": {"prompt": True}}  # a prompt the editor sent, not a chunk the agent did


async def session_task(store: Store, session_id: str) -> TaskRecord:
    """The task an editor session id names; ``session_not_found`` when there is none."""
    try:
        task = await store.get_task(session_id)
    except BatonError as exc:  # task_not_found
        raise NotFoundError("session_not_found", f"no session {session_id}") from exc
    if task.metadata.get("source") != SESSION_SOURCE:
        raise NotFoundError("session_not_found", f"{session_id} is a task, not an editor session")
    return task


async def session_runs(store: Store, session_id: str) -> list[RunRecord]:
    """The session's runs, oldest first."""
    return [record for record in await store.list_runs() if record.task_id == session_id]


async def last_seq(log: SessionLog, run_id: str) -> int:
    """The run's last committed entry (0 for none)."""
    seq = 0
    while page := await log.read(run_id, after=seq, until=seq + _PAGE):
        seq = page[-1]["seq"]
    return seq


async def history_updates(log: SessionLog, run_ids: list[str]) -> AsyncIterator[dict[str, Any]]:
    """The ``session/update`` payloads (``update`` objects) that show the runs' conversation."""
    for run_id in run_ids:
        seq = 0
        resumed_prompt: str | None = None
        while page := await log.read(run_id, after=seq, until=seq + _PAGE):
            seq = page[-1]["seq"]
            for entry in page:
                method = entry["method"]
                params = entry["payload"].get("params")
                if not isinstance(params, dict) or is_replayed(params):
                    continue
                if method == "_baton/resume" and params.get("path") == "rebuilt":
                    resumed_prompt = str(params.get("prompt") or "")
                elif method == "session/prompt" and entry["direction"] == "to_agent":
                    text = resumed_prompt if resumed_prompt is not None else _prompt_text(params.get("prompt"))
                    resumed_prompt = None
                    if text:
                        content = {"type": "text", "text": text}
                        yield {"sessionUpdate": "user_message_chunk", "content": content, "_meta": _PROMPT_META}
                elif method == "session/update" and entry["direction"] == "from_agent":
                    update = params.get("update")
                    if isinstance(update, dict) and not is_replayed(update):
                        yield update


def is_replayed(holder: dict[str, Any]) -> bool:
    """Whether ``_meta.baton.replay`` marks this (params or update) as history an agent replayed."""
    meta = holder.get("_meta")
    baton = meta.get("baton") if isinstance(meta, dict) else None
    return isinstance(baton, dict) and baton.get("replay") is True


def _prompt_text(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return ""
    return "\n".join(str(block["text"]) for block in blocks if isinstance(block, dict) and block.get("type") == "text")
