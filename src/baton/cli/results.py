"""``baton branch RUN``, ``baton push RUN``, ``baton merge RUN``: a run's result as a branch (docs/workspaces.md).

Each goes through the light API (``Runs.branch``/``push``/``merge``) and works from any process
on a run no live process executes (``run_active`` otherwise). ``--json`` prints one object.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError
from baton.runs.queries import Runs

__all__ = ["branch_command", "merge_command", "push_command"]

_JSON = typer.Option("--json", help="One JSON object on stdout; errors as JSON on stderr.")


@app.command("branch")
def branch_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    snapshot: Annotated[str | None, typer.Option("--snapshot", help="A snapshot id (default: the last).")] = None,
    name: Annotated[
        str | None, typer.Option("--name", "--branch", help="The branch's name (default: baton/<short run id>).")
    ] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Commit the run's final tree on its base commit as a new branch (HEAD, index and working tree untouched)."""
    try:
        body = asyncio.run(_branch(Settings.load(), run_id, snapshot, name))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
        return
    if body["branch"] is None:
        sys.stdout.write(f"run {run_id} changed nothing: no branch made\n")
        return
    sys.stdout.write(
        f"branch {body['branch']} at {body['commit'][:12]} on {str(body['base'] or '(no base)')[:12]}: "
        f"{body['files_changed']} files, +{body['insertions']} -{body['deletions']}\n"
    )
    for skipped in body["skipped"]:
        sys.stdout.write(f"  left out: {skipped['path']} ({skipped['reason']})\n")
    if body.get("pushed_to"):
        sys.stdout.write(f"pushed to {body['pushed_to']}\n")
    if body.get("push_error"):
        sys.stdout.write(f"push failed: {body['push_error']['message']}\n")
    if body.get("pull_request_url"):
        sys.stdout.write(f"pull request: {body['pull_request_url']}\n")


@app.command("push")
def push_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    remote: Annotated[str | None, typer.Option("--remote", help="The remote (default: origin).")] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Push the run's branch (then run result.on_branch, when configured)."""
    try:
        result = asyncio.run(_push(Settings.load(), run_id, remote))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return
    sys.stdout.write(f"pushed {result['branch']} to {result['pushed_to']}\n")
    if result.get("pull_request_url"):
        sys.stdout.write(f"pull request: {result['pull_request_url']}\n")


@app.command("merge")
def merge_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    into: Annotated[
        str | None, typer.Option("--into", help="The branch to merge into (default: the current one).")
    ] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Merge the run's branch into your branch (fast-forward or merge commit); refused on a conflict or dirty files."""
    try:
        merged = asyncio.run(_merge(Settings.load(), run_id, into))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(merged, ensure_ascii=False) + "\n")
        return
    if merged["kind"] == "up-to-date":
        sys.stdout.write(f"{merged['into']} already has {merged['branch']}\n")
        return
    sys.stdout.write(f"merged {merged['branch']} into {merged['into']} ({merged['kind']}): {merged['commit'][:12]}\n")


async def _branch(settings: Settings, run_id: str, snapshot: str | None, name: str | None) -> dict[str, Any]:
    async with Runs(settings) as runs:
        return (await runs.branch(run_id, snapshot_id=snapshot, name=name)).to_dict()


async def _push(settings: Settings, run_id: str, remote: str | None) -> dict[str, Any]:
    async with Runs(settings) as runs:
        return await runs.push(run_id, remote)


async def _merge(settings: Settings, run_id: str, into: str | None) -> dict[str, Any]:
    async with Runs(settings) as runs:
        return (await runs.merge(run_id, into)).to_dict()
