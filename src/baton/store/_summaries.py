"""What a list of runs shows beside the run object: pending gates and token totals (a blocking
function; :meth:`~baton.store.store.Store.run_summaries` runs it in a thread).

``GET /v1/runs?summary=true`` adds ``summaries: {run_id: {pending_gates, input_tokens,
output_tokens}}`` for the page's runs. Tokens are the sums over the run's turns of the usage
its agent reported (``_baton/usage`` notes, docs/internals.md): ``input_tokens`` and
``output_tokens`` as the agent counts them (Claude's cache reads and writes are not in
``input_tokens``); an agent that reports none gives 0. Read with one query per page over the
log's ``method`` column, never by projecting the logs.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, func, select

from baton.store.tables import gates, log_entries, runs

__all__ = ["run_summaries"]


def run_summaries(engine: Engine, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not run_ids:
        return {}
    found = {run_id: {"pending_gates": 0, "input_tokens": 0, "output_tokens": 0} for run_id in run_ids}
    with engine.connect() as connection:
        pending = connection.execute(
            select(runs.c.id, func.count())
            .select_from(gates.join(runs, gates.c.run_key == runs.c.run_key))
            .where(runs.c.id.in_(run_ids), gates.c.status == "pending")
            .group_by(runs.c.id)
        )
        for run_id, count in pending:
            found[run_id]["pending_gates"] = int(count)
        usage = connection.execute(
            select(runs.c.id, log_entries.c.payload)
            .select_from(log_entries.join(runs, log_entries.c.run_key == runs.c.run_key))
            .where(runs.c.id.in_(run_ids), log_entries.c.method == "_baton/usage")
        )
        for run_id, payload in usage:
            counts = _usage(payload)
            for name in ("input_tokens", "output_tokens"):
                found[run_id][name] += counts.get(name, 0)
    return found


def _usage(payload: str) -> dict[str, int]:
    try:
        params = json.loads(payload).get("params") or {}
    except (ValueError, AttributeError):
        return {}
    usage = params.get("usage") if isinstance(params, dict) else None
    if not isinstance(usage, dict):
        return {}
    return {name: value for name, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)}
