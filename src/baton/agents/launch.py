"""From a run request to a started subprocess agent: the checks first, then the command.

Everything that can refuse a run is checked before the run is recorded: the policy must be
enforceable on the agent (``mode_not_enforceable``), a USD budget needs an agent that reports
cost (``budget_not_supported``), the agent must be installed (``agent_not_installed``) and
model credentials present (``model_credentials_missing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from baton.agents.registry import AgentEntry, NativeSetting, choose_setting
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.config import Settings
from baton.errors import AgentError, RefusedError
from baton.gates import Gatekeeper
from baton.sandbox.network import SandboxNetwork
from baton.sandbox.plan import SandboxPlan, command_paths
from baton.sandbox.port_forward import PORT_BASE_VARIABLE

__all__ = ["PreparedAgent", "SubprocessLaunch", "credentials_missing", "model_endpoint", "prepare_subprocess_agent"]


@dataclass(frozen=True)
class SubprocessLaunch:
    run_id: str
    workspace: Path
    agent_home: Path
    model: str | None
    sandbox: SandboxPlan | None = None  # the run's sandbox (the command's own files are added to it)
    network: SandboxNetwork | None = None  # the sandbox's own network, when it isolates it
    instructions: str | None = None  # the repository's instructions (LaunchContext.instructions)
    port_base: int | None = None  # the run's BATON_PORT_BASE (docs/workspaces.md), in the agent's environment


@dataclass(frozen=True)
class PreparedAgent:
    """A subprocess agent that passed every check, with the native setting it will run under."""

    entry: AgentEntry
    setting: NativeSetting
    executable: Path
    base_url: str | None
    api_key: str
    passthrough: tuple[str, ...]
    parent: Mapping[str, str]
    max_retries: int | None = None

    def start(self, launch: SubprocessLaunch) -> SubprocessAgent:
        """The agent for one run (its home written; the process starts with ``start()``)."""
        if self.entry.launch is None:
            raise AgentError("agent_not_installed", f"{self.entry.name} has no launch recipe")
        context = LaunchContext(
            run_id=launch.run_id,
            workspace=launch.workspace,
            agent_home=launch.agent_home,
            model=launch.model,
            base_url=self.base_url,
            api_key=self.api_key,
            passthrough=self.passthrough,
            parent=self.parent,
            setting=self.setting.config,
            max_retries=self.max_retries,
            sandboxed=launch.sandbox is not None and launch.sandbox.filesystem,
            instructions=launch.instructions if self.entry.instruction_files else None,
        )
        command = self.entry.launch(context, self.executable)
        if launch.port_base is not None:  # the run's ports, for the dev servers its agent starts
            command = replace(command, env={**command.env, PORT_BASE_VARIABLE: str(launch.port_base)})
        if launch.sandbox is not None:
            sandbox = launch.sandbox.with_read_only([self.executable, *command_paths(command.argv)])
            command = replace(command, sandbox=sandbox, network=launch.network)
        return SubprocessAgent(self.entry.name, command)


_CREDENTIALS = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
}


def credentials_missing(provider: str) -> RefusedError:
    """``model_credentials_missing`` for a run on a real model API whose process has no key."""
    key, url = _CREDENTIALS.get(provider, _CREDENTIALS["openai"])
    return RefusedError(
        "model_credentials_missing",
        f"no model credentials: set {key} (and {url} for another endpoint) where the run executes; "
        "for baton's scripted model, start the run with --scenario NAME (a run remembers its scenario) "
        "or continue it with `baton resume RUN --scenario NAME`",
    )


def model_endpoint(entry: AgentEntry, settings: Settings, parent: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(base URL, API key) of the model API the agent calls (its registry ``provider``)."""
    if entry.provider == "anthropic":
        return settings.anthropic_base_url, settings.anthropic_api_key
    if entry.provider == "gemini":
        return parent.get("GOOGLE_GEMINI_BASE_URL"), parent.get("GEMINI_API_KEY")
    if entry.provider == "none":
        return None, ""
    return settings.openai_base_url, settings.openai_api_key


def prepare_subprocess_agent(
    entry: AgentEntry,
    gatekeeper: Gatekeeper,
    settings: Settings,
    *,
    parent: Mapping[str, str],
    budget_usd: float | None = None,
) -> PreparedAgent:
    setting = choose_setting(entry, gatekeeper)
    if budget_usd is not None and not entry.reports_cost:
        raise RefusedError("budget_not_supported", f"{entry.name} reports no cost, so a USD budget cannot be enforced")
    executable = entry.executable()
    if executable is None:
        raise AgentError(
            "agent_not_installed",
            f"{entry.name} ({entry.package}@{entry.version}) is not installed; run `make setup`",
        )
    base_url, api_key = model_endpoint(entry, settings, parent)
    if not api_key and entry.provider != "none":
        raise credentials_missing(entry.provider)
    return PreparedAgent(
        entry=entry,
        setting=setting,
        executable=executable,
        base_url=base_url,
        api_key=api_key or "",
        passthrough=settings.agent_env_passthrough,
        parent=parent,
        max_retries=settings.model_max_retries,
    )
