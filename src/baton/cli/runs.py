"""``baton runs [--status S] [--json]``: the runs in this ``BATON_HOME``, oldest first."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from typing import Annotated, Any, Final

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError
from baton.runs.queries import RUN_STATUSES, RunRecord, Runs

__all__ = ["runs_command"]

_GAP: Final = "  "
_MIN_PROMPT: Final = 24  # the prompt keeps at least this many columns; optional columns give way first


@app.command("runs")
def runs_command(
    status: Annotated[
        str | None, typer.Option("--status", help="Only runs with this status (queued, running, interrupted, …).")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of run objects.")] = False,
) -> None:
    """List runs: id, status, agent, what each was asked (and creation time, cost, repository when they fit)."""
    try:
        if status is not None and status not in RUN_STATUSES:
            raise UsageError("invalid_argument", f"--status must be one of {', '.join(sorted(RUN_STATUSES))}")
        listed = asyncio.run(_list(Settings.load(), status, with_prompts=not json_output))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps([record.to_dict() for record, _ in listed], ensure_ascii=False) + "\n")
        return
    if not listed:
        sys.stdout.write("no runs\n")
        return
    sys.stdout.write(run_table(listed, shutil.get_terminal_size().columns))


async def _list(settings: Settings, status: str | None, *, with_prompts: bool) -> list[tuple[RunRecord, str | None]]:
    async with Runs(settings) as runs:
        records = await runs.list_runs(status)
        return [(record, await runs.prompt(record) if with_prompts else None) for record in records]


def run_table(listed: list[tuple[RunRecord, str | None]], width: int) -> str:
    """The runs as aligned columns within ``width``: ID, STATUS, AGENT, then CREATED, COST and REPO
    while the prompt keeps ``_MIN_PROMPT`` columns, and the PROMPT (on one line, cut to fit) last."""
    rows = [_cells(record, prompt) for record, prompt in listed]
    columns: list[tuple[str, str]] = [("ID", "<"), ("STATUS", "<"), ("AGENT", "<")]
    widths = [max(len(header), *(len(row[header]) for row in rows)) for header, _ in columns]
    for header, align in (("CREATED", "<"), ("COST", ">"), ("REPO", "<")):
        needed = max(len(header), *(len(row[header]) for row in rows))
        if sum(widths) + needed + len(_GAP) * (len(widths) + 1) + _MIN_PROMPT > width:
            break
        columns.append((header, align))
        widths.append(needed)
    room = max(10, width - sum(widths) - len(_GAP) * len(widths))
    lines = [_line([header for header, _ in columns], columns, widths) + _GAP + "PROMPT"]
    for row in rows:
        lines.append(_line([row[header] for header, _ in columns], columns, widths) + _GAP + _cut(row["PROMPT"], room))
    return "".join(line.rstrip() + "\n" for line in lines)


def _cells(record: RunRecord, prompt: str | None) -> dict[str, Any]:
    cost = record.total_cost_usd
    return {
        "ID": record.id,
        "STATUS": record.status,
        "AGENT": record.agent,
        "CREATED": record.created_at[:19].replace("T", " "),
        "COST": f"${cost:.4f}" if isinstance(cost, int | float) else "-",
        "REPO": record.repo or "-",
        "PROMPT": " ".join((prompt or "-").split()),
    }


def _line(cells: list[str], columns: list[tuple[str, str]], widths: list[int]) -> str:
    return _GAP.join(f"{cell:{align}{size}}" for cell, (_, align), size in zip(cells, columns, widths, strict=True))


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"
