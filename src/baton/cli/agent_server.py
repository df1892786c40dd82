"""``baton agent-server --repo DIR (--prompt TEXT | --task-file F | --task-id ID) …``: one run, served.

The run starts at once and is served over HTTP (``GET /health``, ``GET /events``,
``POST /command``; docs/server.md "baton agent-server"); the process exits with the run's exit
code when it ends: background runs when the agent's turn is over, interactive ones on ``close``
(or cancel, or idle).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.cli._spec import (
    AgentOption,
    AllowNetOption,
    AllowOption,
    BudgetUsdOption,
    DenyOption,
    MaxSecondsOption,
    MaxTurnsOption,
    ModelOption,
    ModeOption,
    MountRoOption,
    MountRwOption,
    RepoOption,
    SandboxOption,
    build_spec,
)
from baton.config import Settings
from baton.errors import BatonError, UsageError

__all__ = ["agent_server_command", "read_task_file"]


def read_task_file(path: Path) -> tuple[str, dict[str, Any]]:
    """The prompt in ``path``: a JSON object's ``prompt`` (a ``.json`` file), else the whole text."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("invalid_argument", f"--task-file {path}: cannot read it: {exc}") from None
    if path.suffix != ".json":
        if not text.strip():
            raise UsageError("invalid_argument", f"--task-file {path} is empty")
        return text, {}
    try:
        task = json.loads(text)
    except ValueError as exc:
        raise UsageError("invalid_argument", f"--task-file {path} is not JSON: {exc}") from None
    if not isinstance(task, dict) or not isinstance(task.get("prompt"), str) or not task["prompt"].strip():
        raise UsageError("invalid_argument", f'--task-file {path} must be a JSON object with a "prompt" string')
    return task["prompt"], task


@app.command("agent-server")
def agent_server_command(
    repo: RepoOption,
    prompt: Annotated[str | None, typer.Option("--prompt", help="What the agent should do.")] = None,
    task_file: Annotated[
        Path | None, typer.Option("--task-file", help="A file holding the prompt (a .json file: {prompt, ...}).")
    ] = None,
    task_id: Annotated[str | None, typer.Option("--task-id", help="A stored task (its prompt).")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="The run's id (default: a new one).")] = None,
    run_mode: Annotated[
        str, typer.Option("--run-mode", help="background: ends with the turn; interactive: stays up until close.")
    ] = "background",
    agent: AgentOption = "claude",
    model: ModelOption = None,
    mode: ModeOption = "default",
    allow: AllowOption = None,
    deny: DenyOption = None,
    budget_usd: BudgetUsdOption = None,
    max_turns: MaxTurnsOption = None,
    max_seconds: MaxSecondsOption = None,
    sandbox: SandboxOption = None,
    mount_ro: MountRoOption = None,
    mount_rw: MountRwOption = None,
    allow_net: AllowNetOption = None,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Only tokens with this sub (or admin) see the run.")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address; non-loopback needs JWT keys.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0 picks a free one).")] = 8080,
    audience: Annotated[
        str | None, typer.Option("--audience", help="The JWT audience required (default baton:sandbox).")
    ] = None,
) -> None:
    """Execute one run and serve it over HTTP (events, commands); exit with the run's exit code."""
    from baton.server import ServerConfig
    from baton.server.sandbox import serve_one_run

    try:
        given = [
            name for name, value in (("--prompt", prompt), ("--task-file", task_file), ("--task-id", task_id)) if value
        ]
        if len(given) != 1:
            raise UsageError("invalid_argument", "give exactly one of --prompt, --task-file, --task-id")
        if run_mode not in ("background", "interactive"):
            raise UsageError("invalid_argument", f"--run-mode must be background or interactive, not {run_mode!r}")
        if task_file is not None:
            prompt, _ = read_task_file(task_file)
        mode_of_run: Literal["background", "interactive"] = "interactive" if run_mode == "interactive" else "background"
        spec = build_spec(
            prompt or "",
            repo,
            agent=agent,
            model=model,
            mode=mode,
            allow=allow,
            deny=deny,
            budget_usd=budget_usd,
            max_turns=max_turns,
            max_seconds=max_seconds,
            sandbox=sandbox,
            mount_ro=mount_ro,
            mount_rw=mount_rw,
            allow_net=allow_net,
            run_mode=mode_of_run,
            task_id=task_id,
            run_id=run_id,
            owner=owner,
            workspace="in-place",  # the checkout it was given is the run's (a sandbox's, a worker's)
        )
        settings = Settings.load()
        config = ServerConfig.load(settings, host=host, port=port, sandbox_jwt_audience=audience)
        code = asyncio.run(serve_one_run(settings, config, spec, announce=_announce))
    except BatonError as exc:
        code = report_error(exc, False)
    raise typer.Exit(code)


def _announce(url: str, run_id: str) -> None:
    sys.stderr.write(f"baton agent-server: {url} run {run_id}\n")
    sys.stderr.flush()
