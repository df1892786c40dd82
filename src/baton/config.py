"""Configuration: command-line flag > environment (``BATON_*``) > ``baton.toml`` > default."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from baton.errors import UsageError

__all__ = [
    "AGENTS_DIR",
    "DEFAULT_ENV_PASSTHROUGH",
    "MCP_TRANSPORTS",
    "VERSION",
    "WEBHOOK_EVENTS",
    "WORKSPACE_KINDS",
    "McpServerConfig",
    "Settings",
    "Webhook",
    "check_mcp_name",
    "check_workspace_kind",
    "mcp_server_of",
    "parse_duration",
    "webhook_of",
]

VERSION: Final = "0.1.0"  # baton's version (``baton.__version__``)
AGENTS_DIR: Final = Path(os.environ.get("BATON_AGENTS_DIR") or Path(__file__).resolve().parents[2] / "agents")
"""The npm prefix ``make setup`` installs pinned agents into (``BATON_AGENTS_DIR`` elsewhere)."""

DEFAULT_ENV_PASSTHROUGH: tuple[str, ...] = (
    "CLAUDE_CODE_MAX_RETRIES",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


WEBHOOK_EVENTS: tuple[str, ...] = ("gate.opened", "gate.resolved", "run.finished", "run.failed")
WEBHOOK_SECRET_MIN: Final = 16  # characters of a webhook secret at least (it keys HMAC-SHA256)


@dataclass(frozen=True)
class Webhook:
    """One ``[[notify.webhooks]]`` entry: where events are POSTed, the HMAC key, which events."""

    url: str
    secret: str = field(repr=False)
    events: tuple[str, ...] = WEBHOOK_EVENTS


MCP_TRANSPORTS: tuple[str, ...] = ("stdio", "http", "sse")


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server a run may use (docs/agents.md "MCP servers"): a command baton starts
    (``stdio``) or a URL baton reaches (``http``: streamable HTTP, ``sse``), with its own
    environment or headers (secrets: redacted from the log by value, never the agent's)."""

    name: str
    transport: str = "stdio"
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_seconds: float = 60.0  # a tools/call not answered in this long is an error result
    source: str = "run"  # "config" (baton.toml [mcp.NAME]), "run" (--mcp NAME=…), "repository"

    def describe(self) -> dict[str, Any]:
        """What the log says of the server: never its environment's or headers' values."""
        body: dict[str, Any] = {"name": self.name, "transport": self.transport, "source": self.source}
        if self.command:
            body["command"] = list(self.command)
        if self.url is not None:
            body["url"] = self.url
        if self.env:
            body["env"] = sorted(self.env)
        if self.headers:
            body["headers"] = sorted(self.headers)
        return body

    def secrets(self) -> tuple[str, ...]:
        """The values the log redacts."""
        return tuple(value for value in (*self.env.values(), *self.headers.values()) if value)


def _default_home() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "baton"


@dataclass(frozen=True)
class Settings:
    """Everything configurable; build it with :meth:`load`."""

    home: Path = field(default_factory=_default_home)
    database_url: str | None = None
    gate_grace_seconds: float = 30.0  # a gate waits in-process this long, then the run parks
    gate_expiry_seconds: float = 86400.0  # a gate not decided in this long is denied (reason ``timeout``)
    agent_env_passthrough: tuple[str, ...] = DEFAULT_ENV_PASSTHROUGH
    claude_binary: Path | None = None
    anthropic_base_url: str | None = None
    anthropic_api_key: str | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    model_max_retries: int | None = None  # subprocess agents' model API retries; None: the agent's own
    agent_start_timeout_seconds: float = 60.0
    inbox_poll_seconds: float = 0.02  # how often the inboxes are read when no wake-up can arrive (docs/runs.md)
    interactive_idle_seconds: float = 1800.0  # an interactive run with no message for this long ends
    # Runs executing at once in one process (more wait ``queued``): ~250 MB and much of a core
    # each, so 2 on a 2-core machine (docs/runs.md "Concurrency").
    concurrency: int = 2
    # Where agents run (docs/sandbox.md): "bwrap" (the filesystem sandbox), "none" (contained
    # only), None: bwrap where bubblewrap works. Extra paths every run's sandbox binds.
    sandbox: str | None = None
    sandbox_mount_ro: tuple[Path, ...] = ()
    sandbox_mount_rw: tuple[Path, ...] = ()
    sandbox_allow_net: tuple[str, ...] = ()  # hosts every sandboxed agent may reach (HOST[:PORT], *.DOMAIN)
    # PEM certificates the model proxy trusts for the model endpoint (None: the system's)
    model_ca_bundle: Path | None = None
    # Where a run works (docs/workspaces.md): "worktree", "clone", "in-place"; None: a worktree
    # for a local git repository, a clone for a URL or a bare repository, else in place.
    workspace: str | None = None
    # Ended runs' workspaces older than this are removed by ``baton gc`` (None: only when asked).
    workspace_retention_seconds: float | None = None
    # Ended runs older than this are removed entirely by ``baton gc --runs`` (the ``[runs]`` table's
    # ``retention``; None: only with ``--older-than``).
    run_retention_seconds: float | None = None
    # Repositories (paths or URLs) whose ``.baton/setup`` runs without ``--setup``.
    workspace_trusted: tuple[str, ...] = ()
    # What happens to the ``.baton/setup`` of a repository not trusted: "skip" (with a hint) or
    # "ask" (a gate that shows the script; approving runs exactly that script).
    workspace_untrusted_setup: str = "skip"
    # The result as a branch (docs/workspaces.md "Results"), the ``[result]`` table: the commit's
    # author ("Name <email>"); push the branch when made (None: for clones only); a shell command
    # run after the push (a pull request); a branch at the end of in-place runs too.
    result_author: str = "baton <baton@localhost>"
    result_push: bool | None = None
    result_on_branch: str | None = None
    result_branch_in_place: bool = False
    # Webhooks (docs/web.md "Webhooks"), the ``[notify]`` table: the endpoints, and the first
    # retry's delay (doubling up to ``notify_max_retry_seconds``, for ``notify_give_up_seconds``).
    notify_webhooks: tuple[Webhook, ...] = ()
    notify_retry_seconds: float = 5.0
    notify_max_retry_seconds: float = 600.0
    notify_give_up_seconds: float = 3600.0
    notify_poll_seconds: float = 0.5  # how often the store is read for events and due deliveries
    # The fleet (docs/fleet.md), the ``[fleet]`` table: runs executing at once across every worker
    # (None: no limit), on one worker, of one owner (None: no per-owner limit), and how often a
    # worker polls the queue (dispatch latency against idle CPU).
    fleet_concurrency: int | None = None
    fleet_worker_concurrency: int = 2
    fleet_owner_concurrency: int | None = None
    fleet_poll_seconds: float = 0.1
    # MCP servers a run may name (``--mcp NAME``; over HTTP only these), the ``[mcp.NAME]`` tables.
    mcp_servers: tuple[McpServerConfig, ...] = ()

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'baton.db'}"

    def run_dir(self, run_id: str) -> Path:
        return self.home / "runs" / run_id

    def workspace_dir(self, run_id: str) -> Path:
        """Where a worktree or clone run works (docs/workspaces.md)."""
        return self.home / "workspaces" / run_id

    @classmethod
    def load(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``baton.toml`` under ``BATON_HOME``, then the environment, then ``overrides``."""
        env = dict(os.environ if environ is None else environ)
        home = Path(env["BATON_HOME"]) if env.get("BATON_HOME") else _default_home()
        if "home" in overrides and overrides["home"] is not None:
            home = Path(overrides["home"])
        # Absolute: agents start in their workspace, where a relative home names nothing.
        home = home.expanduser().absolute()
        overrides = {**overrides, "home": home}
        settings = cls(home=home)
        settings = replace(settings, **_from_toml(home / "baton.toml"))
        settings = replace(settings, **_from_env(env))
        settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
        return settings


_TOML_KEYS = {
    "database_url": str,
    "gate_grace_seconds": float,
    "gate_expiry_seconds": float,
    "agent_env_passthrough": tuple,
    "claude_binary": Path,
    "anthropic_base_url": str,
    "anthropic_api_key": str,
    "openai_base_url": str,
    "openai_api_key": str,
    "model_max_retries": int,
    "agent_start_timeout_seconds": float,
    "inbox_poll_seconds": float,
    "interactive_idle_seconds": float,
    "concurrency": int,
    "model_ca_bundle": Path,
}


def _from_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError("config_invalid", f"cannot read {path}: {exc}") from exc
    values: dict[str, Any] = _sandbox_from_toml(path, data.pop("sandbox", None))
    values.update(_workspace_from_toml(path, data.pop("workspace", None)))
    values.update(_result_from_toml(path, data.pop("result", None)))
    values.update(_runs_from_toml(path, data.pop("runs", None)))
    values.update(_notify_from_toml(path, data.pop("notify", None)))
    values.update(_fleet_from_toml(path, data.pop("fleet", None)))
    values.update(_mcp_from_toml(path, data.pop("mcp", None)))
    for key, raw in data.items():
        kind = _TOML_KEYS.get(key)
        if kind is None:
            continue
        try:
            values[key] = kind(raw)
        except (TypeError, ValueError) as exc:
            raise UsageError("config_invalid", f"{path}: {key} is not a valid {kind.__name__}") from exc
    return values


def _sandbox_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """``sandbox = "bwrap"``, or a table ``[sandbox]`` with ``mode``, ``mount_ro``, ``mount_rw``, ``allow_net``."""
    if raw is None:
        return {}
    table = {"mode": raw} if isinstance(raw, str) else raw
    if not isinstance(table, dict):
        raise UsageError("config_invalid", f'{path}: sandbox is a mode ("bwrap", "none") or a table')
    values: dict[str, Any] = {}
    if table.get("mode") is not None:
        values["sandbox"] = str(table["mode"])
    for key in ("mount_ro", "mount_rw"):
        paths = table.get(key) or []
        if not isinstance(paths, list) or not all(isinstance(item, str) for item in paths):
            raise UsageError("config_invalid", f"{path}: sandbox.{key} is a list of paths")
        values[f"sandbox_{key}"] = tuple(Path(item) for item in paths)
    hosts = table.get("allow_net") or []
    if not isinstance(hosts, list) or not all(isinstance(item, str) for item in hosts):
        raise UsageError("config_invalid", f"{path}: sandbox.allow_net is a list of hosts (HOST[:PORT], *.DOMAIN)")
    values["sandbox_allow_net"] = tuple(hosts)
    return values


def _workspace_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """``workspace = "worktree"``, or a table ``[workspace]`` with ``kind``, ``retention``
    (``"7d"``, ``"12h"``, seconds), ``trusted`` (repositories whose ``.baton/setup`` runs) and
    ``untrusted_setup`` (``"skip"`` or ``"ask"``: the others' ``.baton/setup``)."""
    if raw is None:
        return {}
    table = {"kind": raw} if isinstance(raw, str) else raw
    if not isinstance(table, dict):
        raise UsageError("config_invalid", f'{path}: workspace is a kind ("worktree", "clone", "in-place") or a table')
    values: dict[str, Any] = {}
    if table.get("kind") is not None:
        values["workspace"] = check_workspace_kind(str(table["kind"]), f"{path}: workspace.kind")
    if table.get("retention") is not None:
        values["workspace_retention_seconds"] = parse_duration(str(table["retention"]), f"{path}: workspace.retention")
    trusted = table.get("trusted") or []
    if not isinstance(trusted, list) or not all(isinstance(item, str) for item in trusted):
        raise UsageError("config_invalid", f"{path}: workspace.trusted is a list of repositories")
    if trusted:
        values["workspace_trusted"] = tuple(trusted)
    untrusted = table.get("untrusted_setup")
    if untrusted is not None:
        if untrusted not in ("skip", "ask"):
            message = f'{path}: workspace.untrusted_setup is "skip" or "ask", not {untrusted!r}'
            raise UsageError("config_invalid", message)
        values["workspace_untrusted_setup"] = untrusted
    return values


def _runs_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """The table ``[runs]``: ``retention`` (``"30d"``), how long ``baton gc --runs`` keeps an ended run."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError("config_invalid", f'{path}: runs is a table ([runs] retention = "30d")')
    if raw.get("retention") is None:
        return {}
    return {"run_retention_seconds": parse_duration(str(raw["retention"]), f"{path}: runs.retention")}


_MCP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def check_mcp_name(name: str, source: str) -> str:
    """``name`` if it can name an MCP server (letters, digits, ``_``, ``-``; no ``__``), else an error."""
    if not _MCP_NAME.match(name) or "__" in name:
        code = "invalid_argument" if source.startswith("--") else "config_invalid"
        raise UsageError(code, f"{source}: {name!r} is not an MCP server name (letters, digits, _ and -)")
    return name


def mcp_server_of(name: str, table: Any, source: str, *, origin: str = "config") -> McpServerConfig:
    """A ``[mcp.NAME]`` table: ``command = [...]`` or ``url = "…"`` (``transport = "sse"`` for an
    SSE server), ``env``, ``headers`` (tables of strings) and ``timeout_seconds``."""
    where = f"{source}: mcp.{name}"
    check_mcp_name(name, where)
    if not isinstance(table, dict):
        raise UsageError("config_invalid", f"{where} is a table ([mcp.{name}])")
    known = {"command", "url", "transport", "env", "headers", "timeout_seconds"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError("config_invalid", f"{where}.{unknown[0]} is not a setting ({', '.join(sorted(known))})")
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise UsageError("config_invalid", f"{where} needs one of command (a list) or url")
    if command is not None and (
        not isinstance(command, list) or not command or not all(isinstance(item, str) for item in command)
    ):
        raise UsageError("config_invalid", f"{where}.command is a non-empty list of strings")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise UsageError("config_invalid", f"{where}.url is an http:// or https:// URL")
    transport = table.get("transport") or ("stdio" if command is not None else "http")
    if transport not in MCP_TRANSPORTS or (transport == "stdio") != (command is not None):
        raise UsageError("config_invalid", f"{where}.transport is stdio for a command, http or sse for a url")
    mappings: dict[str, dict[str, str]] = {}
    for key in ("env", "headers"):
        value = table.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise UsageError("config_invalid", f"{where}.{key} is a table of strings")
        mappings[key] = dict(value)
    if mappings["env"] and command is None:
        raise UsageError("config_invalid", f"{where}.env is for a command; a url takes headers")
    timeout = table.get("timeout_seconds", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise UsageError("config_invalid", f"{where}.timeout_seconds is a positive number of seconds")
    return McpServerConfig(
        name=name,
        transport=str(transport),
        command=tuple(command or ()),
        url=url,
        env=mappings["env"],
        headers=mappings["headers"],
        timeout_seconds=float(timeout),
        source=origin,
    )


def _mcp_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """The tables ``[mcp.NAME]`` (:func:`mcp_server_of`)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError("config_invalid", f"{path}: mcp is a table of servers ([mcp.NAME])")
    return {"mcp_servers": tuple(mcp_server_of(name, table, str(path)) for name, table in raw.items())}


WORKSPACE_KINDS: tuple[str, ...] = ("worktree", "clone", "in-place")
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def check_workspace_kind(kind: str, source: str = "--workspace") -> str:
    """``kind`` if it is a workspace kind, else ``invalid_argument``/``config_invalid``."""
    if kind not in WORKSPACE_KINDS:
        code = "invalid_argument" if source.startswith("--") else "config_invalid"
        raise UsageError(code, f"{source} must be one of {', '.join(WORKSPACE_KINDS)}, not {kind!r}")
    return kind


def parse_duration(text: str, source: str = "--older-than") -> float:
    """Seconds of ``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"2w"`` or a plain number of seconds."""
    raw = text.strip().lower()
    unit = _DURATION_UNITS.get(raw[-1:]) if raw else None
    number = raw[:-1] if unit is not None else raw
    try:
        seconds = float(number) * (unit or 1.0)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        code = "invalid_argument" if source.startswith("--") else "config_invalid"
        raise UsageError(code, f"{source}: {text!r} is not a duration (e.g. 7d, 12h, 30m)")
    return seconds


_RESULT_KEYS: dict[str, type] = {"author": str, "push": bool, "on_branch": str, "branch_in_place": bool}


def _result_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """The table ``[result]``: ``author``, ``push``, ``on_branch``, ``branch_in_place``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError("config_invalid", f"{path}: result is a table ([result])")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _RESULT_KEYS.get(key)
        if kind is None:
            raise UsageError("config_invalid", f"{path}: result.{key} is not a setting ({', '.join(_RESULT_KEYS)})")
        if not isinstance(value, kind):
            raise UsageError("config_invalid", f"{path}: result.{key} is a {kind.__name__}")
        values[f"result_{key}"] = value
    return values


_FLEET_COUNTS = ("concurrency", "worker_concurrency", "owner_concurrency")


def _fleet_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """The table ``[fleet]``: ``concurrency``, ``worker_concurrency``, ``owner_concurrency`` (positive
    integers) and ``poll_seconds``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError("config_invalid", f"{path}: fleet is a table ([fleet])")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _FLEET_COUNTS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError("config_invalid", f"{path}: fleet.{key} is a positive integer")
            values[f"fleet_{key}"] = value
        elif key == "poll_seconds":
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise UsageError("config_invalid", f"{path}: fleet.poll_seconds is a positive number of seconds")
            values["fleet_poll_seconds"] = float(value)
        else:
            settings = ", ".join((*_FLEET_COUNTS, "poll_seconds"))
            raise UsageError("config_invalid", f"{path}: fleet.{key} is not a setting ({settings})")
    return values


def _fleet_from_env(env: dict[str, str]) -> dict[str, Any]:
    """``BATON_FLEET_CONCURRENCY``, ``BATON_FLEET_WORKER_CONCURRENCY``, ``BATON_FLEET_OWNER_CONCURRENCY``,
    ``BATON_FLEET_POLL_SECONDS``."""
    values: dict[str, Any] = {}
    for key in _FLEET_COUNTS:
        name = f"BATON_FLEET_{key.upper()}"
        if env.get(name):
            try:
                values[f"fleet_{key}"] = int(env[name])
            except ValueError as exc:
                raise UsageError("config_invalid", f"{name} must be an integer") from exc
            if values[f"fleet_{key}"] < 1:
                raise UsageError("config_invalid", f"{name} must be at least 1")
    if env.get("BATON_FLEET_POLL_SECONDS"):
        try:
            values["fleet_poll_seconds"] = float(env["BATON_FLEET_POLL_SECONDS"])
        except ValueError as exc:
            raise UsageError("config_invalid", "BATON_FLEET_POLL_SECONDS must be a number") from exc
        if values["fleet_poll_seconds"] <= 0:
            raise UsageError("config_invalid", "BATON_FLEET_POLL_SECONDS must be positive")
    return values


_NOTIFY_SECONDS = ("retry_seconds", "max_retry_seconds", "give_up_seconds", "poll_seconds")


def _notify_from_toml(path: Path, raw: Any) -> dict[str, Any]:
    """The table ``[notify]``: ``webhooks`` (``[[notify.webhooks]]`` with ``url``, ``secret`` and
    ``events``), ``retry_seconds``, ``max_retry_seconds``, ``give_up_seconds``, ``poll_seconds``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError("config_invalid", f"{path}: notify is a table ([notify])")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "webhooks":
            if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
                raise UsageError("config_invalid", f"{path}: notify.webhooks is a list of tables ([[notify.webhooks]])")
            webhooks = tuple(webhook_of(item, f"{path}: notify.webhooks[{i}]") for i, item in enumerate(value))
            urls = [webhook.url for webhook in webhooks]
            if len(set(urls)) != len(urls):  # a delivery is one per event and URL
                twice = next(url for url in urls if urls.count(url) > 1)
                raise UsageError("webhook_url_invalid", f"{path}: notify.webhooks lists {twice} twice")
            values["notify_webhooks"] = webhooks
        elif key in _NOTIFY_SECONDS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise UsageError("config_invalid", f"{path}: notify.{key} is a positive number of seconds")
            values[f"notify_{key}"] = float(value)
        else:
            settings = ", ".join(("webhooks", *_NOTIFY_SECONDS))
            raise UsageError("config_invalid", f"{path}: notify.{key} is not a setting ({settings})")
    return values


def webhook_of(table: dict[str, Any], source: str) -> Webhook:
    """A webhook from its table; ``webhook_url_invalid``, ``webhook_secret_invalid`` or
    ``webhook_event_unknown`` when it is not one."""
    from urllib.parse import urlsplit

    unknown = set(table) - {"url", "secret", "events"}
    if unknown:
        raise UsageError(
            "config_invalid", f"{source}: {', '.join(sorted(unknown))} is not a setting (url, secret, events)"
        )
    url = table.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("webhook_url_invalid", f"{source}: url must be an http:// or https:// URL, not {url!r}")
    if parts.username or parts.password:
        raise UsageError("webhook_url_invalid", f"{source}: url must not carry credentials (use the secret)")
    secret = table.get("secret")
    if not isinstance(secret, str) or len(secret) < WEBHOOK_SECRET_MIN:
        raise UsageError(
            "webhook_secret_invalid", f"{source}: secret must be a string of at least {WEBHOOK_SECRET_MIN} characters"
        )
    events = table.get("events", list(WEBHOOK_EVENTS))
    if not isinstance(events, list) or not events or not all(isinstance(event, str) for event in events):
        raise UsageError(
            "webhook_event_unknown", f"{source}: events is a non-empty list of {', '.join(WEBHOOK_EVENTS)}"
        )
    wrong = [event for event in events if event not in WEBHOOK_EVENTS]
    if wrong:
        raise UsageError(
            "webhook_event_unknown", f"{source}: {', '.join(wrong)} is not an event ({', '.join(WEBHOOK_EVENTS)})"
        )
    return Webhook(url=str(url), secret=secret, events=tuple(dict.fromkeys(events)))


def _from_env(env: dict[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = _fleet_from_env(env)
    if env.get("BATON_WORKSPACE"):
        values["workspace"] = check_workspace_kind(env["BATON_WORKSPACE"], "BATON_WORKSPACE")
    if env.get("BATON_SANDBOX"):
        values["sandbox"] = env["BATON_SANDBOX"]
    if env.get("BATON_MODEL_CA_BUNDLE"):
        values["model_ca_bundle"] = Path(env["BATON_MODEL_CA_BUNDLE"])
    if env.get("BATON_DATABASE_URL"):
        values["database_url"] = env["BATON_DATABASE_URL"]
    if env.get("BATON_GATE_GRACE_SECONDS"):
        try:
            values["gate_grace_seconds"] = float(env["BATON_GATE_GRACE_SECONDS"])
        except ValueError as exc:
            raise UsageError("config_invalid", "BATON_GATE_GRACE_SECONDS must be a number") from exc
    for name in ("inbox_poll_seconds", "interactive_idle_seconds", "gate_expiry_seconds"):
        variable = "BATON_" + name.upper()
        if env.get(variable):
            try:
                values[name] = float(env[variable])
            except ValueError as exc:
                raise UsageError("config_invalid", f"{variable} must be a number") from exc
    if env.get("BATON_AGENT_ENV_PASSTHROUGH"):
        values["agent_env_passthrough"] = tuple(name for name in env["BATON_AGENT_ENV_PASSTHROUGH"].split(",") if name)
    if env.get("BATON_CLAUDE_BINARY"):
        values["claude_binary"] = Path(env["BATON_CLAUDE_BINARY"])
    if env.get("ANTHROPIC_BASE_URL"):
        values["anthropic_base_url"] = env["ANTHROPIC_BASE_URL"]
    if env.get("ANTHROPIC_API_KEY"):
        values["anthropic_api_key"] = env["ANTHROPIC_API_KEY"]
    if env.get("OPENAI_BASE_URL"):
        values["openai_base_url"] = env["OPENAI_BASE_URL"]
    if env.get("OPENAI_API_KEY"):
        values["openai_api_key"] = env["OPENAI_API_KEY"]
    if env.get("BATON_CONCURRENCY"):
        try:
            values["concurrency"] = int(env["BATON_CONCURRENCY"])
        except ValueError as exc:
            raise UsageError("config_invalid", "BATON_CONCURRENCY must be an integer") from exc
        if values["concurrency"] < 1:
            raise UsageError("config_invalid", "BATON_CONCURRENCY must be at least 1")
    if env.get("BATON_MODEL_MAX_RETRIES"):
        try:
            values["model_max_retries"] = int(env["BATON_MODEL_MAX_RETRIES"])
        except ValueError as exc:
            raise UsageError("config_invalid", "BATON_MODEL_MAX_RETRIES must be an integer") from exc
    return values
