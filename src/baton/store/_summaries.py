"""What a list of runs shows beside the run object: pending gates and token totals (a blocking
function; :meth:`~baton.store.store.Store.run_summaries` runs it in a thread).

``GET /v1/runs?summary=true`` adds ``summaries: {run_id: {pending_gates, input_tokens,
output_tokens, prompt}}`` for the page's runs. ``prompt`` is the first line of what the run was
asked (as ``Runs.prompt`` finds it: its task's title, else its own prompt, its task's, or the one
logged at its start), at most ``PROMPT_CHARS`` characters (``…`` ends a cut one); None when
nothing says. Tokens are the sums over the run's turns of the usage
its agent reported (``_baton/usage`` notes, docs/internals.md): ``input_tokens`` and
``output_tokens`` as the agent counts them (Claude's cache reads and writes are not in
``input_tokens``); an agent that reports none gives 0. Read with one query per page over the
log's ``method`` column, never by projecting the logs.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Engine, func, select

from baton.acp.wire import decode_json
from baton.store.tables import gates, log_entries, runs, tasks

__all__ = ["PROMPT_CHARS", "first_line", "run_summaries"]

PROMPT_CHARS: Final = 200


def run_summaries(engine: Engine, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not run_ids:
        return {}
    found: dict[str, dict[str, Any]] = {
        run_id: {"pending_gates": 0, "input_tokens": 0, "output_tokens": 0, "prompt": None} for run_id in run_ids
    }
    with engine.connect() as connection:
        pending = connection.execute(
            select(runs.c.id, func.count())
            .select_from(gates.join(runs, gates.c.run_key == runs.c.run_key))
            .where(runs.c.id.in_(run_ids), gates.c.status == "pending")
            .group_by(runs.c.id)
        )
        for run_id, count in pending:
            found[run_id]["pending_gates"] = int(count)
        asked = connection.execute(
            select(runs.c.id, runs.c.request, tasks.c.title, tasks.c.prompt)
            .select_from(runs.outerjoin(tasks, tasks.c.id == runs.c.task_id))
            .where(runs.c.id.in_(run_ids))
        )
        for run_id, request, title, task_prompt in asked:
            prompt = request.get("prompt") if isinstance(request, dict) else None
            found[run_id]["prompt"] = first_line(title or (prompt if isinstance(prompt, str) else None) or task_prompt)
        usage = connection.execute(
            select(runs.c.id, log_entries.c.method, log_entries.c.payload)
            .select_from(log_entries.join(runs, log_entries.c.run_key == runs.c.run_key))
            .where(runs.c.id.in_(run_ids), log_entries.c.method.in_(("_baton/usage", "_baton/run_started")))
        )
        for run_id, method, payload in usage:
            if method == "_baton/run_started":  # a run recorded before runs.request existed
                if found[run_id]["prompt"] is None:
                    found[run_id]["prompt"] = first_line(_params(payload).get("prompt"))
                continue
            counts = _usage(payload)
            for name in ("input_tokens", "output_tokens"):
                found[run_id][name] += counts.get(name, 0)
    return found


def first_line(text: Any) -> str | None:
    """The first line of ``text`` with words, at most ``PROMPT_CHARS`` characters; None for none."""
    if not isinstance(text, str):
        return None
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not line:
        return None
    return line if len(line) <= PROMPT_CHARS else line[: PROMPT_CHARS - 1].rstrip() + "…"


def _params(payload: str) -> dict[str, Any]:
    try:
        params = decode_json(payload).get("params")
    except (ValueError, AttributeError):
        return {}
    return params if isinstance(params, dict) else {}


def _usage(payload: str) -> dict[str, int]:
    usage = _params(payload).get("usage")
    if not isinstance(usage, dict):
        return {}
    return {name: value for name, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)}
