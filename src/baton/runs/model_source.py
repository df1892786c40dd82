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

import asyncio
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from baton.config import Settings
from baton.errors import AgentError, UsageError

if TYPE_CHECKING:  # not at import: baton.runs.spec (and so the CLI's start-up) imports this module
    from baton.agents.registry import AgentEntry
    from baton.cassettes import CassetteRecorder
    from baton.sandbox import ModelProxy
    from baton.store.redact import Redactor
    from baton.testing import CassettePlayer, ReplayTiming, ScriptedModelServer

__all__ = [
    "ModelEndpoint",
    "RunModel",
    "ScriptedModels",
    "agent_upstream",
    "cassette_path",
    "pointed_at",
    "recorded_cassette",
    "recorded_scenario",
    "scenario_source",
    "start_run_model",
]


def scenario_source(scenario: str) -> dict[str, Any]:
    return {"kind": "scenario", "scenario": scenario}


def recorded_scenario(source: Any) -> str | None:
    """The scenario a recorded ``model_source`` names; None for an endpoint (or nothing recorded)."""
    if isinstance(source, Mapping) and source.get("kind") == "scenario" and isinstance(source.get("scenario"), str):
        return str(source["scenario"])
    return None


def recorded_cassette(source: Any) -> tuple[str, str] | None:
    """(cassette, timing) of a recorded ``model_source`` that replays one; None otherwise."""
    if isinstance(source, Mapping) and source.get("kind") == "cassette" and isinstance(source.get("cassette"), str):
        return str(source["cassette"]), str(source.get("timing") or "fast")
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


def pointed_at(
    settings: Settings,
    parent: Mapping[str, str],
    base_url: str,
    key: str,
    source: dict[str, Any],
    *,
    scripted: bool = True,
) -> ModelEndpoint:
    """Every provider's endpoint and key in ``settings`` and the environment set to ``base_url``
    (a scripted server, or a model proxy in front of one): ``/v1`` for OpenAI, as is for the others."""
    pointed = replace(
        settings,
        anthropic_base_url=base_url,
        anthropic_api_key=key,
        openai_base_url=base_url + "/v1",
        openai_api_key=key,
        # a scripted API error fails the turn at once
        model_max_retries=0 if scripted else settings.model_max_retries,
    )
    # Gemini CLI reads its endpoint from the environment only; an --agent-cmd agent is given
    # the credential variables of the environment too.
    environment = dict(parent)
    environment.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=key,
        OPENAI_BASE_URL=base_url + "/v1",
        OPENAI_API_KEY=key,
        GOOGLE_GEMINI_BASE_URL=base_url,
        GEMINI_API_KEY=key,
    )
    return ModelEndpoint(pointed, environment, source)


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
        return pointed_at(settings, parent, base_url, self._key, scenario_source(scenario))

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


_DEFAULT_ENDPOINTS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


@dataclass
class RunModel:
    """One run's model while it executes here: its endpoint, and when it records or replays, the
    cassette's recorder (behind a model proxy) or player (in a scripted server of its own)."""

    endpoint: ModelEndpoint
    recorder: CassetteRecorder | None = None
    proxy: ModelProxy | None = None
    player: CassettePlayer | None = None
    server: ScriptedModelServer | None = None

    @property
    def source(self) -> dict[str, Any]:
        return self.endpoint.source

    def bind(self, *, workspace: Path, agent_home: Path) -> None:
        """The run's paths, once it has its id: recorded in the cassette, or rewritten on replay."""
        from baton.cassettes import CassettePaths

        if self.recorder is not None:
            self.recorder.paths = CassettePaths(str(workspace), str(agent_home))
        if self.player is not None:
            self.player.bind(workspace=workspace, agent_home=agent_home)

    def mismatch(self) -> AgentError | None:
        """``replay_mismatch`` for the first request the cassette did not hold; None otherwise."""
        if self.player is None or not self.player.mismatches:
            return None
        first = self.player.mismatches[0]
        more = len(self.player.mismatches) - 1
        message = first.message + (f"\n({more} more requests did not match)" if more else "")
        return AgentError("replay_mismatch", message)

    async def aclose(self) -> None:
        """Stop this run's proxy and server; the cassette is complete once this returns."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            await proxy.aclose()
        if self.recorder is not None:
            self.recorder.close()
        server, self.server = self.server, None
        if server is not None:
            await asyncio.to_thread(server.stop)


async def start_run_model(
    scripted: ScriptedModels,
    entry: AgentEntry,
    settings: Settings,
    *,
    scenario: str | None,
    record: Path | None,
    replay: Path | None,
    replay_timing: ReplayTiming,
    redactor: Redactor,
) -> RunModel:
    """Where a run's agent gets its model, started for this run (the single per-run start).

    - ``replay``: a scripted server of the run's own plays the cassette (``cassette_invalid``
      before anything is recorded); no endpoint or key is needed. Source
      ``{"kind": "cassette", "cassette": PATH, "timing": …}``.
    - ``record``: a model proxy on loopback in front of the run's endpoint (the scenario's
      scripted server, or the configured provider's API with the real key, which the agent never
      sees), its observer writing the cassette. The source is the endpoint's or the scenario's,
      with ``"record": PATH``.
    - neither: the scenario's shared scripted server, or the configured endpoint.
    """
    from baton.testing import CassettePlayer, ScriptedModelServer

    if replay is not None:
        player = CassettePlayer.load(replay, timing=replay_timing)
        server = ScriptedModelServer.replaying(player).start()
        source = {"kind": "cassette", "cassette": str(replay), "timing": replay_timing}
        redactor.add(scripted.key)
        endpoint = pointed_at(settings, os.environ, server.base_url, scripted.key, source)
        return RunModel(endpoint, player=player, server=server)
    endpoint = scripted.endpoint(entry, settings, scenario)
    if scenario is not None:
        redactor.add(scripted.key)
    if record is None:
        return RunModel(endpoint)
    from baton.cassettes import CassetteRecorder
    from baton.sandbox import ModelProxy, ModelUpstream

    if scenario is not None:
        url, key = scripted._server(scenario).base_url, scripted.key
    else:
        url, key = _real_endpoint(entry, settings, endpoint.parent)
    if key:
        redactor.add(key)
    recorder = CassetteRecorder(record, redactor=redactor, agent=entry.name, endpoint=_without_secrets(url))
    proxy = await ModelProxy(ModelUpstream(url, key), tcp=("127.0.0.1", 0), observer=recorder).start()
    redactor.add(proxy.placeholder)
    host, port = proxy.tcp_address
    source = {**endpoint.source, "record": str(record)}
    proxied = pointed_at(
        endpoint.settings,
        endpoint.parent,
        f"http://{host}:{port}",
        proxy.placeholder,
        source,
        scripted=scenario is not None,
    )
    return RunModel(proxied, recorder=recorder, proxy=proxy)


def _real_endpoint(entry: AgentEntry, settings: Settings, parent: Mapping[str, str]) -> tuple[str, str]:
    """The provider's base URL (without OpenAI's ``/v1``: the agent's requests carry it) and key;
    ``model_credentials_missing`` without a key."""
    from baton.agents.launch import credentials_missing

    url, key = agent_upstream(entry, ModelEndpoint(settings, dict(parent), {}))
    if not key:
        raise credentials_missing("anthropic" if entry.package is None else entry.provider)
    return url, key


def agent_upstream(entry: AgentEntry, model: ModelEndpoint) -> tuple[str, str]:
    """Where the agent's model requests would go on ``model``, and with which key ("" for none):
    what a model proxy in front of the agent forwards to. The base URL is without OpenAI's
    ``/v1`` (the agent's requests carry it); an ``--agent-cmd`` agent's is Anthropic's."""
    from baton.agents.launch import model_endpoint

    provider = "anthropic" if entry.package is None or entry.provider == "none" else entry.provider
    settings, parent = model.settings, model.parent
    if provider == "anthropic":
        url, key = settings.anthropic_base_url, settings.anthropic_api_key
    else:
        url, key = model_endpoint(entry, settings, parent)
    base = (url or _DEFAULT_ENDPOINTS.get(provider, _DEFAULT_ENDPOINTS["openai"])).rstrip("/")
    return (base.removesuffix("/v1") if provider == "openai" else base), key or ""


def cassette_path(value: str, home: Path) -> Path:
    """A cassette named over HTTP: a name or a path inside ``BATON_HOME/cassettes``, nothing else."""
    root = (home / "cassettes").resolve()
    path = (root / value).resolve()
    if not path.is_relative_to(root) or path == root:
        raise UsageError("invalid_argument", f"a cassette over HTTP must be inside {root} (given {value!r})")
    return path
