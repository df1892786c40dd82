"""How a run's model endpoint was chosen (its ``model_source``), and the scripted model for runs on a scenario.

A run records its model source with the parameters it was started with — in ``runs.request``
and in ``_baton/run_started`` (docs/runs.md "Where the model comes from"):

- ``{"kind": "scenario", "scenario": NAME}``: baton's scripted model server playing the scenario
  NAME (``RunSpec(scenario=NAME)``, ``baton run --scenario NAME``). Whichever process executes
  the run — ``baton resume``, a worker, ``baton serve``, ``baton run`` waiting through a park —
  starts a scripted server of its own for it (:class:`ScriptedModels`).
- ``{"kind": "endpoint", "url": URL}``: the model API of the agent's provider as the starting
  process was configured (``ANTHROPIC_BASE_URL`` …); ``url`` is that base URL without its user,
  password, query or fragment, None for the provider's default. A process continuing such a run
  uses its own configuration and credentials (``model_credentials_missing`` without them).

``baton resume RUN --scenario NAME`` continues a run on a scenario whatever it recorded, and the
run records that scenario as its model source from then on.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from baton.config import Settings

if TYPE_CHECKING:  # not at import: baton.runs.spec (and so the CLI's start-up) imports this module
    from baton.agents.registry import AgentEntry
    from baton.testing import ScriptedModelServer

__all__ = ["ModelEndpoint", "ScriptedModels", "recorded_scenario", "scenario_source"]


def scenario_source(scenario: str) -> dict[str, Any]:
    return {"kind": "scenario", "scenario": scenario}


def recorded_scenario(source: Any) -> str | None:
    """The scenario a recorded ``model_source`` names; None for an endpoint (or nothing recorded)."""
    if isinstance(source, Mapping) and source.get("kind") == "scenario" and isinstance(source.get("scenario"), str):
        return str(source["scenario"])
    return None


def _without_secrets(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class ModelEndpoint:
    """What a run's agent is started with: the settings and the environment its model endpoint
    and credentials come from, and the ``model_source`` the run records."""

    settings: Settings
    parent: dict[str, str]
    source: dict[str, Any]


class ScriptedModels:
    """The scripted model servers of one :class:`~baton.runs.Baton`: one per scenario, started when
    a run first needs it and stopped when the ``Baton`` closes (runs of one scenario share it, as
    every run of a ``baton run --scenario`` process always did)."""

    def __init__(self) -> None:
        self._servers: dict[str, ScriptedModelServer] = {}
        self._key = "scripted-" + secrets.token_hex(12)  # any key will do; redacted like a real one
        self._lock = threading.Lock()

    @property
    def key(self) -> str:
        return self._key

    def endpoint(self, entry: AgentEntry, settings: Settings, scenario: str | None) -> ModelEndpoint:
        """The endpoint of a run of ``entry``: the scenario's scripted server, or the configured one."""
        from baton.agents.launch import model_endpoint

        parent = dict(os.environ)
        if scenario is None:
            url = settings.anthropic_base_url if entry.package is None else model_endpoint(entry, settings, parent)[0]
            return ModelEndpoint(settings, parent, {"kind": "endpoint", "url": _without_secrets(url)})
        base_url = self._server(scenario).base_url
        scripted = replace(
            settings,
            anthropic_base_url=base_url,
            anthropic_api_key=self._key,
            openai_base_url=base_url + "/v1",
            openai_api_key=self._key,
            model_max_retries=0,  # a scripted API error fails the turn at once
        )
        # Gemini CLI reads its endpoint from the environment only; an --agent-cmd agent is given
        # the credential variables of the environment too.
        parent.update(
            ANTHROPIC_BASE_URL=base_url,
            ANTHROPIC_API_KEY=self._key,
            OPENAI_BASE_URL=base_url + "/v1",
            OPENAI_API_KEY=self._key,
            GOOGLE_GEMINI_BASE_URL=base_url,
            GEMINI_API_KEY=self._key,
        )
        return ModelEndpoint(scripted, parent, scenario_source(scenario))

    def _server(self, scenario: str) -> ScriptedModelServer:
        from baton.testing import ScriptedModelServer, load_scenario

        with self._lock:
            server = self._servers.get(scenario)
            if server is None:
                server = ScriptedModelServer(load_scenario(scenario)).start()  # invalid_argument for an unknown one
                self._servers[scenario] = server
            return server

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.stop()
