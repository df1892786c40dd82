"""``baton run PROMPT --repo DIR …``: start a run and stream its events."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import Annotated

import typer
from rich.console import Console

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.cli._follow import follow_run
from baton.cli._spec import (
    AgentOption,
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
from baton.errors import BatonError
from baton.runs.spec import RunSpec

__all__ = ["run_command"]


@app.command("run")
def run_command(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    repo: RepoOption,
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
    scenario: Annotated[
        str | None, typer.Option("--scenario", help="Use baton's scripted model server with this scenario.")
    ] = None,
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
        typer.Option("--no-wait", help="Exit 4 when the run parks on a gate instead of waiting for the decision."),
    ] = False,
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
            run_mode="interactive" if interactive else "background",
            agent_cmd=agent_cmd,
            trust_agent_permissions=trust_agent_permissions,
        )
        with _model_endpoint(scenario) as overrides:
            code = asyncio.run(_run(spec, Settings.load(None, **overrides), json_output, no_wait))
    except BatonError as exc:
        code = report_error(exc, json_output)
    raise typer.Exit(code)


@contextlib.contextmanager
def _model_endpoint(scenario: str | None) -> Iterator[dict[str, str | int]]:
    """With ``--scenario``, the scripted model server runs in this process for the run."""
    if scenario is None:
        yield {}
        return
    from baton.testing import ScriptedModelServer

    with ScriptedModelServer(scenario) as server:
        key = "scripted-" + secrets.token_hex(12)
        # Gemini CLI reads its endpoint from the environment only (baton passes these on).
        gemini = {"GOOGLE_GEMINI_BASE_URL": server.base_url, "GEMINI_API_KEY": key}
        saved = {name: os.environ.get(name) for name in gemini}
        os.environ.update(gemini)
        try:
            yield {
                "anthropic_base_url": server.base_url,
                "anthropic_api_key": key,
                "openai_base_url": server.base_url + "/v1",
                "openai_api_key": key,
                "model_max_retries": 0,  # a scripted API error fails the turn at once
            }
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


async def _run(spec: RunSpec, settings: Settings, json_output: bool, no_wait: bool) -> int:
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import

    console = Console(stderr=json_output, highlight=False)
    async with Baton(settings) as baton:
        handle = await baton.start(spec)
        return await follow_run(baton, handle, console=console, json_output=json_output, no_wait=no_wait)
