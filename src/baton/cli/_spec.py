"""What ``baton run`` and ``baton agent-server`` share: the options that describe a run (agent,
model, mode, rules, budget) and the one builder that turns them into a :class:`RunSpec`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from baton.errors import UsageError
from baton.runs.spec import RunSpec, require_repo

__all__ = [
    "AgentOption",
    "AllowNetOption",
    "AllowOption",
    "BaseOption",
    "BudgetUsdOption",
    "DenyOption",
    "IncludeUncommittedOption",
    "MaxSecondsOption",
    "MaxTurnsOption",
    "ModeOption",
    "ModelOption",
    "MountRoOption",
    "MountRwOption",
    "RefOption",
    "RepoOption",
    "SandboxOption",
    "SetupOption",
    "WorkspaceOption",
    "build_spec",
    "scenario_argument",
]

RepoOption = Annotated[Path, typer.Option("--repo", help="The repository (working tree) to run in.")]
AgentOption = Annotated[str, typer.Option("--agent", help="The agent to run.")]
ModelOption = Annotated[str | None, typer.Option("--model", help="The model the agent uses.")]
ModeOption = Annotated[
    str, typer.Option("--mode", help="Permission mode: default, acceptEdits, plan, bypassPermissions.")
]
AllowOption = Annotated[list[str] | None, typer.Option("--allow", help="Allow rule, e.g. 'Bash(npm test:*)'.")]
DenyOption = Annotated[list[str] | None, typer.Option("--deny", help="Deny rule, e.g. 'Write(secrets/**)'.")]
BudgetUsdOption = Annotated[
    float | None, typer.Option("--budget-usd", help="Ask to continue once the run costs this much (USD).")
]
MaxTurnsOption = Annotated[
    int | None,
    typer.Option(
        "--max-turns",
        help="Ask to continue after this many model turns (Claude: requests to the model, stopped before the "
        "next; other agents: prompt turns).",
    ),
]
MaxSecondsOption = Annotated[
    float | None,
    typer.Option("--max-seconds", help="Ask to continue once the run's turns took this long (checked mid-turn)."),
]

SandboxOption = Annotated[
    str | None,
    typer.Option("--sandbox", help="bwrap: the agent sees only its workspace and what it needs; none: all of it."),
]
MountRoOption = Annotated[
    list[str] | None, typer.Option("--mount-ro", help="Another path the sandboxed agent may read (absolute).")
]
MountRwOption = Annotated[
    list[str] | None, typer.Option("--mount-rw", help="Another path the sandboxed agent may write (absolute).")
]
AllowNetOption = Annotated[
    list[str] | None,
    typer.Option("--allow-net", help="A host the sandboxed agent may reach: HOST[:PORT], *.DOMAIN (docs/sandbox.md)."),
]
McpOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        help="An MCP server for the run: NAME (baton.toml [mcp.NAME]), NAME=URL or NAME=COMMAND… (baton starts it).",
    ),
]


WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        help="worktree (default for a git repository), clone (a URL or a bare repository) or in-place.",
    ),
]
BaseOption = Annotated[
    str | None, typer.Option("--base", help="The commit, branch or tag the workspace starts at (default: HEAD).")
]
RefOption = Annotated[str | None, typer.Option("--ref", help="For a clone: the remote's branch, tag or commit.")]
IncludeUncommittedOption = Annotated[
    bool,
    typer.Option("--include-uncommitted", help="Carry your staged, unstaged and new files into the worktree."),
]
SetupOption = Annotated[
    str | None, typer.Option("--setup", help="A command run in the new workspace before the agent starts.")
]


def build_spec(
    prompt: str,
    repo: Path | str,
    *,
    agent: str,
    model: str | None,
    mode: str,
    allow: list[str] | None,
    deny: list[str] | None,
    budget_usd: float | None,
    max_turns: int | None,
    max_seconds: float | None,
    run_mode: Literal["background", "interactive"],
    agent_cmd: str | None = None,
    trust_agent_permissions: bool = False,
    task_id: str | None = None,
    run_id: str | None = None,
    owner: str | None = None,
    scenario: str | None = None,
    sandbox: str | None = None,
    mount_ro: list[str] | None = None,
    mount_rw: list[str] | None = None,
    allow_net: list[str] | None = None,
    mcp: list[str] | None = None,
    workspace: str | None = None,
    base: str | None = None,
    ref: str | None = None,
    include_uncommitted: bool = False,
    setup: str | None = None,
    record: Path | None = None,
    replay: Path | None = None,
    replay_timing: str = "fast",
) -> RunSpec:
    """The run the options describe; ``--agent-cmd`` (any ACP agent) excludes ``--agent``; a URL
    as ``--repo`` is cloned (docs/workspaces.md)."""
    from baton.workspaces.mirror import is_git_url

    repo_url = str(repo) if is_git_url(str(repo)) else None
    repo = Path() if repo_url is not None else Path(repo)
    if repo_url is None:
        require_repo(repo)  # before any agent code is imported: a typo in --repo is answered at once
    if record is not None and replay is not None:
        raise UsageError("invalid_argument", "--record and --replay are exclusive")
    if replay is not None and scenario is not None:
        raise UsageError("invalid_argument", "--replay and --scenario are exclusive (the cassette answers)")
    if replay_timing not in ("real", "fast"):
        raise UsageError("invalid_argument", f"--replay-timing is real or fast, not {replay_timing!r}")
    agent_command: tuple[str, ...] = ()
    if agent_cmd is not None:
        from baton.agents.command import COMMAND_AGENT

        agent_command = tuple(shlex.split(agent_cmd))
        if agent != "claude":
            raise UsageError("invalid_argument", "--agent-cmd and --agent are exclusive")
        agent = COMMAND_AGENT
        if trust_agent_permissions:
            sys.stderr.write(
                f"baton: --trust-agent-permissions: only what {agent_command[0] if agent_command else 'the agent'} "
                "asks is gated; what it does without asking is not\n"
            )
    return RunSpec(
        prompt=prompt,
        repo=repo,
        agent=agent,
        agent_command=agent_command,
        trust_agent_permissions=trust_agent_permissions,
        model=model,
        permission_mode=mode,
        allow=tuple(allow or ()),
        deny=tuple(deny or ()),
        budget_usd=budget_usd,
        budget_turns=max_turns,
        budget_seconds=max_seconds,
        task_id=task_id,
        run_mode=run_mode,
        run_id=run_id,
        owner=owner,
        scenario=scenario_argument(scenario),
        sandbox=sandbox,
        mount_ro=tuple(str(Path(path).absolute()) for path in mount_ro or ()),
        mount_rw=tuple(str(Path(path).absolute()) for path in mount_rw or ()),
        allow_net=tuple(allow_net or ()),
        mcp=tuple(mcp or ()),
        workspace=workspace,
        repo_url=repo_url,
        base=base,
        ref=ref,
        include_uncommitted=include_uncommitted,
        setup=setup,
        record=Path(record).absolute() if record is not None else None,
        replay=Path(replay).absolute() if replay is not None else None,
        replay_timing="real" if replay_timing == "real" else "fast",
    )


def scenario_argument(value: str | None) -> str | None:
    """``--scenario``: a shipped scenario's name as given, a scenario file's path made absolute (the
    run records it, and whoever continues the run reads it from anywhere)."""
    if value is None:
        return None
    from baton.testing import scenario_file  # YAML and the scripted server: only with --scenario

    path = scenario_file(value)
    return value if path is None else str(path.absolute())
