"""``baton run PROMPT --repo DIR …``: start a run and stream its events."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.cli._follow import follow_run
from baton.cli._spec import (
    AgentOption,
    AllowNetOption,
    AllowOption,
    BaseOption,
    BudgetUsdOption,
    DenyOption,
    IncludeUncommittedOption,
    MaxSecondsOption,
    MaxTurnsOption,
    McpOption,
    ModelOption,
    ModeOption,
    MountRoOption,
    MountRwOption,
    RefOption,
    SandboxOption,
    SetupOption,
    WorkspaceOption,
    build_spec,
)
from baton.config import Settings
from baton.errors import BatonError, UsageError
from baton.runs.spec import RunSpec

__all__ = ["run_command"]


@app.command("run")
def run_command(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    repo: Annotated[
        str, typer.Option("--repo", help="The repository: a folder, or a git URL to clone (docs/workspaces.md).")
    ],
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
    mcp: McpOption = None,
    workspace: WorkspaceOption = None,
    base: BaseOption = None,
    ref: RefOption = None,
    include_uncommitted: IncludeUncommittedOption = False,
    setup: SetupOption = None,
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario", help="Use baton's scripted model with this scenario (remembered: resumes and workers use it)."
        ),
    ] = None,
    record: Annotated[
        Path | None,
        typer.Option("--record", help="Record the model traffic to this cassette (docs/scenarios.md)."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option("--replay", help="Answer from this cassette instead of a model (no endpoint or key)."),
    ] = None,
    replay_timing: Annotated[
        str, typer.Option("--replay-timing", help="real: the recorded pacing; fast: every answer at once.")
    ] = "fast",
    json_output: Annotated[bool, typer.Option("--json", help="One runner event per line on stdout.")] = False,
    interactive: Annotated[
        bool,
        typer.Option("--interactive", help="Stay open for `baton send` messages until `baton close` or idle."),
    ] = False,
    agent_cmd: Annotated[
        str | None,
        typer.Option("--agent-cmd", help='Any other ACP agent: "CMD ARGS" (needs --trust-agent-permissions).'),
    ] = None,
    trust_agent_permissions: Annotated[
        bool,
        typer.Option("--trust-agent-permissions", help="Run an --agent-cmd agent gating only what it asks."),
    ] = False,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Exit 4 as soon as a gate opens (the run parks): no wait for a decision."),
    ] = False,
    queue: Annotated[
        bool,
        typer.Option(
            "--queue",
            help="Queue the run for the fleet's workers (baton worker) and print its id; nothing runs here (Postgres).",
        ),
    ] = False,
    priority: Annotated[
        int | None,
        typer.Option(
            "--priority",
            help="With --queue: the run's place on the queue, 1 (first) to 2147483647; default 100 (docs/fleet.md).",
        ),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="With --queue: a label its worker must have, NAME=VALUE (e.g. gpu=yes)."),
    ] = None,
) -> None:
    """Run an agent on a task in a repository and stream what it does."""
    try:
        spec = build_spec(
            prompt,
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
            mcp=mcp,
            run_mode="interactive" if interactive else "background",
            agent_cmd=agent_cmd,
            trust_agent_permissions=trust_agent_permissions,
            scenario=scenario,
            workspace=workspace,
            base=base,
            ref=ref,
            include_uncommitted=include_uncommitted,
            setup=setup,
            record=record,
            replay=replay,
            replay_timing=replay_timing,
        )
        if (priority is not None or label) and not queue:
            raise UsageError("invalid_argument", "--priority and --label are for a run queued for the fleet (--queue)")
        if queue:
            from dataclasses import replace

            from baton.runs.fleet import check_priority, parse_labels

            labels = parse_labels(label, "--label")
            spec = replace(spec, labels=labels, priority=check_priority(priority, "--priority"))
            code = asyncio.run(_queue(spec, Settings.load(), json_output))
        else:
            code = asyncio.run(_run(spec, Settings.load(None, **_parks_at_once(no_wait)), json_output, no_wait))
    except BatonError as exc:
        code = report_error(exc, json_output)
    raise typer.Exit(code)


def _parks_at_once(no_wait: bool) -> dict[str, float]:
    """``--no-wait``: a gate does not wait in-process for its grace period; the run parks as soon
    as the gate is open (properly: the agent stopped, ``baton resume`` continues it after the decision)."""
    return {"gate_grace_seconds": 0.0} if no_wait else {}


async def _queue(spec: RunSpec, settings: Settings, json_output: bool) -> int:
    """``--queue``: the run recorded and on the fleet's queue (docs/fleet.md); its id on stdout
    (``--json``: the run object)."""
    from baton.runs import Baton

    async with Baton(settings) as baton:
        record = await baton.queue(spec)
        if json_output:
            sys.stdout.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(record.id + "\n")
    return 0


async def _run(spec: RunSpec, settings: Settings, json_output: bool, no_wait: bool) -> int:
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import

    console = Console(stderr=json_output, highlight=False)
    async with Baton(settings) as baton:
        handle = await baton.start(spec)
        return await follow_run(baton, handle, console=console, json_output=json_output, no_wait=no_wait)
