"""What a run is asked to do, and how it ended."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from baton.errors import UsageError
from baton.runs.model_source import recorded_cassette, recorded_scenario
from baton.store.records import RunRecord

__all__ = ["EXIT_CODES", "RunOutcome", "RunSpec", "require_repo", "run_request", "spec_of_record", "spec_of_request"]

RunEnd = Literal["finished", "failed", "cancelled", "paused"]  # paused: parked on a gate (not an end)

# docs/design.md "CLI contract": 0 finished, 1 failed, 2 usage, 3 refused, 4 paused, 5 cancelled.
EXIT_CODES: dict[str, int] = {"finished": 0, "failed": 1, "cancelled": 5, "paused": 4}


@dataclass(frozen=True)
class RunSpec:
    prompt: str
    repo: Path
    agent: str = "claude"
    model: str | None = None
    permission_mode: str = "default"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    budget_usd: float | None = None
    budget_turns: int | None = None  # --max-turns: the agent's model turns (baton.gates.budget)
    budget_seconds: float | None = None  # --max-seconds: the time of the run's turns
    task_id: str | None = None
    run_mode: Literal["background", "interactive"] = "background"
    agent_command: tuple[str, ...] = ()  # --agent-cmd: any ACP agent (agent "command")
    trust_agent_permissions: bool = False  # only what that agent asks is gated
    run_id: str | None = None  # the run's id (baton agent-server --run-id); a new one by default
    owner: str | None = None  # the token sub the run belongs to (HTTP)
    # --scenario: baton's scripted model server plays this scenario instead of a real model API;
    # the run remembers it (its ``model_source``), so whoever continues it uses the same.
    scenario: str | None = None
    sandbox: str | None = None  # --sandbox bwrap|none; None: the configured one (docs/sandbox.md)
    mount_ro: tuple[str, ...] = ()  # --mount-ro: more paths the agent may read
    mount_rw: tuple[str, ...] = ()  # --mount-rw: more paths the agent may write
    allow_net: tuple[str, ...] = ()  # --allow-net: more hosts the sandboxed agent may reach
    # --mcp: the run's MCP servers, NAME (configured), NAME=URL or NAME=COMMAND… (baton.mcp.servers)
    mcp: tuple[str, ...] = ()
    # Where it works (docs/workspaces.md): "worktree", "clone", "in-place"; None: the configured
    # kind, else a worktree of a local git repository (a clone of a URL or a bare repository).
    workspace: str | None = None
    repo_url: str | None = None  # --repo URL: the repository to clone (``repo`` is then ignored)
    base: str | None = None  # --base REF: the commit the worktree or clone starts at (default HEAD)
    ref: str | None = None  # --ref REF: the same, for a clone (a branch, tag or commit of the remote)
    include_uncommitted: bool = False  # the user's staged, unstaged and new files, into the worktree
    setup: str | None = None  # --setup CMD: run in the new workspace before the agent starts
    # --record FILE: the agent's model traffic passes a model proxy whose recorder writes this
    # cassette; --replay FILE: a scripted server plays that cassette back (docs/scenarios.md).
    record: Path | None = None
    replay: Path | None = None
    replay_timing: Literal["real", "fast"] = "fast"
    forked_from: Mapping[str, Any] | None = None  # baton fork: {run_id, seq, turn, snapshot_id} (baton.runs.forking)
    # A fleet run's (docs/fleet.md "Labels and priority"): the labels its worker must have, and
    # its place on the queue (DBOS's priority: lower first; None: baton.runs.fleet.DEFAULT_PRIORITY).
    labels: Mapping[str, str] = field(default_factory=dict)
    priority: int | None = None


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: RunEnd
    stop_reason: str | None = None
    code: str | None = None
    message: str | None = None
    total_cost_usd: float | None = None
    duration_ms: int | None = None
    num_turns: int | None = None
    result: str | None = None
    usage: dict[str, Any] | None = field(default=None)
    gate_id: str | None = None  # paused: the gate the run parked on

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def require_repo(repo: Path) -> Path:
    """``repo`` if it is a directory, else ``invalid_argument`` (checked before anything is imported or recorded)."""
    path = Path(repo)
    if not path.is_dir():
        raise UsageError("invalid_argument", f"--repo {path} is not a directory")
    return path


def run_request(
    spec: RunSpec, model_source: Mapping[str, Any], workspace: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What ``runs.request`` keeps of ``spec``: the fields the run's columns do not (its prompt …),
    its ``model_source`` (baton.runs.model_source) and its ``workspace`` (baton.workspaces.record)."""
    extra = {"workspace": dict(workspace)} if workspace is not None else {}
    return {
        **extra,
        "prompt": spec.prompt,
        "allow": list(spec.allow),
        "deny": list(spec.deny),
        "ask": list(spec.ask),
        "agent_command": list(spec.agent_command),
        "trust_agent_permissions": spec.trust_agent_permissions,
        "model_source": dict(model_source),
        "sandbox": spec.sandbox,
        "mount_ro": list(spec.mount_ro),
        "mount_rw": list(spec.mount_rw),
        "allow_net": list(spec.allow_net),
        **({"mcp": list(spec.mcp)} if spec.mcp else {}),
        **({"forked_from": dict(spec.forked_from)} if spec.forked_from is not None else {}),
    }


def spec_of_request(record: RunRecord) -> RunSpec | None:
    """The spec a queued run was started with, from its record and ``runs.request``; None when
    the run has no request (recorded by an older baton, or continuing an ended run)."""
    request = record.request
    if not isinstance(request, dict) or not isinstance(request.get("prompt"), str):
        return None
    spec = spec_of_record(record, request, prompt=request["prompt"], repo=Path(record.repo or record.cwd or "."))
    return replace(spec, run_id=record.id, owner=record.owner)


def spec_of_record(record: RunRecord, rules: Mapping[str, Any], *, prompt: str, repo: Path) -> RunSpec:
    """A run's spec from its record and the rules it was started with — its ``runs.request`` or
    its ``_baton/run_started`` (``allow``/``deny``/``ask``, ``agent_command``, its trust, its
    sandbox and mounts); the
    ``model_source`` of ``runs.request`` wins over the one in ``rules`` (``baton resume --scenario``
    changes the former)."""
    request = record.request if isinstance(record.request, dict) else {}
    source = request.get("model_source") or rules.get("model_source")
    cassette = recorded_cassette(source)
    return RunSpec(
        prompt=prompt,
        repo=repo,
        agent=record.agent,
        model=record.model,
        permission_mode=record.permission_mode,
        allow=tuple(str(rule) for rule in rules.get("allow") or ()),
        deny=tuple(str(rule) for rule in rules.get("deny") or ()),
        ask=tuple(str(rule) for rule in rules.get("ask") or ()),
        budget_usd=record.budget_usd,
        budget_turns=record.budget_turns,
        budget_seconds=record.budget_seconds,
        task_id=record.task_id,
        run_mode="interactive" if record.run_mode == "interactive" else "background",
        agent_command=tuple(str(arg) for arg in rules.get("agent_command") or ()),
        trust_agent_permissions=bool(rules.get("trust_agent_permissions")),
        scenario=recorded_scenario(source),
        replay=Path(cassette[0]) if cassette else None,
        replay_timing="real" if cassette and cassette[1] == "real" else "fast",
        sandbox=str(rules["sandbox"]) if rules.get("sandbox") else None,
        mount_ro=tuple(str(path) for path in rules.get("mount_ro") or ()),
        mount_rw=tuple(str(path) for path in rules.get("mount_rw") or ()),
        allow_net=tuple(str(host) for host in rules.get("allow_net") or ()),
        mcp=tuple(str(entry) for entry in rules.get("mcp") or ()),
    )
