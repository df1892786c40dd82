"""Launching a run's agent: one place for every agent, and for start, resume and adoption alike.

A launch is prepared in two steps, because everything that can refuse a run is checked before
the run is recorded (or taken over):

1. :meth:`Launcher.prepare` chooses the agent's model endpoint (the scenario's scripted server,
   or the configured API: :mod:`baton.runs.model_source`) and checks what the agent needs: the
   model credentials (``model_credentials_missing``, for Claude in-process and for a subprocess
   agent alike), for a subprocess agent a native setting that enforces the policy
   (``mode_not_enforceable``), its installation (``agent_not_installed``) and a cost report for
   a USD budget (``budget_not_supported``).
2. :meth:`PreparedLaunch.start` builds the agent for one run id: its environment (an
   allow-list, never baton's own), the credentials it is given added to the log's redactor, and
   its sandbox. Claude runs in-process (``InProcessClaude``; a resumed one gets the session to
   load and the budget left); an ACP agent, a registry entry or ``--agent-cmd``, runs as a
   subprocess.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from baton.agents.base import AgentProcess
from baton.agents.claude.agent import ClaudeLaunch, InProcessClaude
from baton.agents.claude.environment import bundled_claude_binary, claude_environment
from baton.agents.command import COMMAND_AGENT, CREDENTIAL_VARIABLES, parse_agent_command
from baton.agents.launch import (
    PreparedAgent,
    SubprocessLaunch,
    credentials_missing,
    model_endpoint,
    prepare_subprocess_agent,
)
from baton.agents.registry import AGENTS, AgentEntry, command_entry
from baton.config import Settings
from baton.errors import UsageError
from baton.gates import Gatekeeper
from baton.gates.budget import Spend, claude_budget_left, claude_turns_left
from baton.runs.model_source import ModelEndpoint, RunModel, ScriptedModels, agent_upstream, pointed_at, start_run_model
from baton.runs.resumed_cassettes import skip_answered
from baton.runs.sandboxing import run_sandbox
from baton.runs.spec import RunSpec
from baton.sandbox import ModelUpstream, new_placeholder_key
from baton.sandbox.network import MODEL_URL, SandboxNetwork, proxy_environment
from baton.sandbox.plan import SandboxPlan
from baton.sandbox.port_forward import PORT_BASE_VARIABLE
from baton.store import Redactor

__all__ = ["ClaudeSession", "LaunchedAgent", "Launcher", "PreparedLaunch", "agent_entry"]


def agent_entry(spec: RunSpec) -> AgentEntry:
    """The registry entry of the run's agent, or the one built for ``--agent-cmd``."""
    if spec.agent_command:
        if spec.agent != COMMAND_AGENT:
            raise UsageError("invalid_argument", "--agent-cmd and --agent are exclusive")
        return command_entry(parse_agent_command(spec.agent_command), trusted=spec.trust_agent_permissions)
    entry = AGENTS.get(spec.agent)
    if entry is None:
        raise UsageError("invalid_argument", f"unknown agent {spec.agent!r}; known: {', '.join(AGENTS)}")
    return entry


@dataclass(frozen=True)
class ClaudeSession:
    """What a resumed Claude continues: the session to load (None: a fresh one, the rebuilt path),
    whether it ended on a deferred call, and what the run spent before (its budget left)."""

    session_id: str | None
    continues_deferred: bool
    spent: Spend


@dataclass(frozen=True)
class LaunchedAgent:
    """The agent of one execution, the gatekeeper it runs under, and the registry entry the host
    maps a subprocess agent's calls with (None for Claude in-process)."""

    agent: AgentProcess
    gatekeeper: Gatekeeper
    entry: AgentEntry | None


class Launcher:
    """Prepares the agents of one :class:`~baton.runs.Baton`: its settings, the redactor of its
    log, and the scripted model servers of its runs on a scenario."""

    def __init__(self, settings: Settings, redactor: Redactor) -> None:
        self.settings = settings
        self.redactor = redactor
        self.scripted = ScriptedModels()

    def close(self) -> None:
        """Stop the scripted model servers (blocking: call it in a thread)."""
        self.scripted.close()

    def prepare(self, spec: RunSpec, entry: AgentEntry, gatekeeper: Gatekeeper) -> PreparedLaunch:
        """The run's model endpoint and every check of its agent; nothing is started or recorded."""
        model = self.scripted.endpoint(entry, self.settings, spec.scenario)
        if spec.scenario is not None:
            self.redactor.add(self.scripted.key)
        return self._prepared(spec, entry, gatekeeper, model)

    async def prepare_new(
        self, spec: RunSpec, entry: AgentEntry, gatekeeper: Gatekeeper
    ) -> tuple[PreparedLaunch, RunModel]:
        """``prepare`` for a run starting from its beginning, with the run's own model when it records
        or replays a cassette (:func:`~baton.runs.model_source.start_run_model`); close the
        ``RunModel`` if the run is not started after all."""
        model = await start_run_model(
            self.scripted,
            entry,
            self.settings,
            scenario=spec.scenario,
            record=spec.record,
            replay=spec.replay,
            replay_timing=spec.replay_timing,
            redactor=self.redactor,
        )
        try:
            return self._prepared(spec, entry, gatekeeper, model.endpoint), model
        except BaseException:
            await model.aclose()
            raise

    async def prepare_resumed(
        self, spec: RunSpec, entry: AgentEntry, gatekeeper: Gatekeeper, *, run_id: str, record: Path | None
    ) -> tuple[PreparedLaunch, RunModel]:
        """``prepare`` for a resumed run that replays its cassette (the rest of it: what run
        ``run_id`` was not answered with yet; ``cassette_exhausted`` when nothing is left) or
        records one (``record``: appended to); baton.runs.resumed_cassettes."""
        model = await start_run_model(
            self.scripted,
            entry,
            self.settings,
            scenario=spec.scenario,
            record=record,
            replay=spec.replay,
            replay_timing=spec.replay_timing,
            redactor=self.redactor,
        )
        try:
            skip_answered(model, self.settings, run_id)
            return self._prepared(spec, entry, gatekeeper, model.endpoint), model
        except BaseException:
            await model.aclose()
            raise

    def _prepared(
        self, spec: RunSpec, entry: AgentEntry, gatekeeper: Gatekeeper, model: ModelEndpoint
    ) -> PreparedLaunch:
        if entry.package is not None:
            prepared = prepare_subprocess_agent(
                entry, gatekeeper, model.settings, parent=model.parent, budget_usd=spec.budget_usd
            )
            return PreparedLaunch(self, entry, gatekeeper, model, prepared, None, prepared.api_key)
        api_key = model.settings.anthropic_api_key
        if not api_key:
            raise credentials_missing("anthropic")
        binary = model.settings.claude_binary or bundled_claude_binary()
        return PreparedLaunch(self, entry, gatekeeper, model, None, binary, api_key)


@dataclass(frozen=True)
class PreparedLaunch:
    """An agent that passed every check, ready to start for a run id."""

    launcher: Launcher
    entry: AgentEntry
    gatekeeper: Gatekeeper
    model: ModelEndpoint
    subprocess: PreparedAgent | None  # None: Claude in-process
    claude_binary: Path | None
    api_key: str

    @property
    def source(self) -> dict[str, Any]:
        """The ``model_source`` the run records (docs/runs.md "Where the model comes from")."""
        return self.model.source

    @property
    def in_process(self) -> bool:
        return self.subprocess is None

    def start(
        self,
        run_id: str,
        spec: RunSpec,
        *,
        claude: ClaudeSession | None = None,
        instructions: str | None = None,
        ports: tuple[int, ...] = (),
    ) -> LaunchedAgent:
        """The agent of one execution of ``run_id`` (the process starts with the execution);
        ``claude`` for a resumed Claude (ignored for a subprocess agent); ``instructions``: the
        repository's (baton.workspaces.instructions), for the agent's system-prompt channel;
        ``ports``: the run's ``BATON_PORT_BASE`` block (in the agent's environment, and forwarded
        from the host into its sandbox's network: baton.sandbox.port_forward)."""
        self._redact()
        settings = self.launcher.settings
        agent_home = settings.run_dir(run_id) / "agent-home"
        if self.subprocess is not None:
            sandbox = run_sandbox(settings, spec, run_id)
            network, model = self._network(sandbox, ports)
            prepared = self.subprocess
            if network is not None:  # the agent holds the placeholder and reaches the model proxy
                base_url, _ = model_endpoint(self.entry, model.settings, model.parent)
                prepared = replace(prepared, base_url=base_url, api_key=network.placeholder, parent=model.parent)
            launch = SubprocessLaunch(
                run_id,
                Path(spec.repo).resolve(),
                agent_home,
                spec.model,
                sandbox,
                network,
                instructions,
                port_base=ports[0] if ports else None,
            )
            return LaunchedAgent(prepared.start(launch), self.gatekeeper, self.entry)
        planned = self.gatekeeper.with_plan_dir(agent_home / ".claude" / "plans")
        launched = self._claude_launch(run_id, spec, claude, instructions, ports)
        return LaunchedAgent(InProcessClaude(launched), planned, None)

    def _network(self, sandbox: SandboxPlan, ports: tuple[int, ...]) -> tuple[SandboxNetwork | None, ModelEndpoint]:
        """The agent's own network when its sandbox isolates it (docs/sandbox.md "The network"):
        the model proxy in front of the endpoint the agent would have used, holding that key,
        and the endpoint the agent is given instead (the proxy, with a placeholder)."""
        if not sandbox.network.isolated:
            return None, self.model
        url, key = agent_upstream(self.entry, self.model)
        upstream = ModelUpstream(url, key, ca_bundle=self.launcher.settings.model_ca_bundle)
        placeholder = new_placeholder_key()
        self.launcher.redactor.add(placeholder)
        if len(key) >= 8:
            self.launcher.redactor.add(key)
        model = self.model
        pointed = pointed_at(model.settings, model.parent, MODEL_URL, placeholder, model.source, scripted=False)
        network = SandboxNetwork(sandbox.network, upstream, placeholder)
        network.forward_ports = ports
        return network, pointed

    def _claude_launch(
        self,
        run_id: str,
        spec: RunSpec,
        session: ClaudeSession | None,
        instructions: str | None,
        ports: tuple[int, ...] = (),
    ) -> ClaudeLaunch:
        assert self.claude_binary is not None
        settings = self.launcher.settings
        run_dir = settings.run_dir(run_id)
        launch_dir = run_dir / "launch"
        launch_dir.mkdir(parents=True, exist_ok=True)
        # The run's sandbox for Claude Code: its launch files and its binary read-only too.
        sandbox = run_sandbox(settings, spec, run_id, agent_paths=[launch_dir, self.claude_binary])
        network, model = self._network(sandbox, ports)
        env = claude_environment(
            run_id=run_id,
            agent_home=run_dir / "agent-home",
            base_url=model.settings.anthropic_base_url,
            api_key=network.placeholder if network is not None else self.api_key,
            passthrough=model.settings.agent_env_passthrough,
            parent=model.parent,
        )
        if network is not None:
            env.update(proxy_environment())
        if ports:
            env[PORT_BASE_VARIABLE] = str(ports[0])
        budget_usd, budget_turns = spec.budget_usd, spec.budget_turns
        if session is not None:  # a resumed Claude counts only its own spend: it gets what is left
            budget_usd = claude_budget_left(spec.budget_usd, session.spent.usd)
            budget_turns = claude_turns_left(spec.budget_turns, session.spent.turns)
        return ClaudeLaunch(
            run_id=run_id,
            binary=self.claude_binary,
            env=env,
            launch_dir=launch_dir,
            model=spec.model,
            max_budget_usd=budget_usd,
            max_turns=budget_turns,
            permission_mode=spec.permission_mode,
            hook_timeout_seconds=settings.gate_grace_seconds + 60,
            resume_session_id=session.session_id if session is not None else None,
            continues_deferred=session.continues_deferred if session is not None else False,
            sandbox=sandbox,
            network=network,
            instructions=instructions,
        )

    def _redact(self) -> None:
        """The agent's model key, and every key an ``--agent-cmd`` agent is given."""
        redactor = self.launcher.redactor
        if self.subprocess is None:
            redactor.add(self.api_key)
            return
        keys = [self.subprocess.parent.get(name, "") for name in CREDENTIAL_VARIABLES if name.endswith("_KEY")]
        for secret in (self.subprocess.api_key, *keys):
            if len(secret) >= 8:
                redactor.add(secret)
