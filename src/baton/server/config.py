"""The server's configuration: ``BATON_*`` environment > ``baton.toml`` > default.

Command-line flags (``baton serve --host/--port``) come on top. These settings live here, next
to the only code that reads them, until :class:`baton.config.Settings` takes them over.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from baton.config import Settings
from baton.errors import UsageError

__all__ = ["LOCAL_TOKEN_FILE", "ServerConfig", "is_loopback"]

LOCAL_TOKEN_FILE: Final = "api-token"


@dataclass(frozen=True)
class ServerConfig:
    """What ``baton serve`` needs beyond :class:`~baton.config.Settings`."""

    host: str = "127.0.0.1"
    port: int = 8080
    # JWT: PEM or JWKS files; without any, a local token in BATON_HOME is required instead.
    jwt_public_keys: tuple[Path, ...] = ()
    jwt_audience: str = "baton"
    jwt_issuer: str | None = None
    jwt_leeway_seconds: float = 10.0
    # Repositories a run may use; None: any folder on a loopback-only server, none otherwise.
    workspace_roots: tuple[Path, ...] | None = None
    # Git URLs a run may clone (prefixes); None: any on a loopback-only server, none otherwise.
    repository_urls: tuple[str, ...] | None = None
    max_body_bytes: int = 1024 * 1024
    sse_heartbeat_seconds: float = 15.0
    sse_queue_size: int = 1024  # frames waiting for one client
    sse_stall_seconds: float = 5.0  # how long a full queue may wait for its client
    sse_max_per_run: int = 100  # open streams of one run
    sse_max_per_token: int = 20  # open streams of one caller (token sub)
    commands_per_minute: int = 600  # run and task creations and commands of one caller
    decisions_per_minute: int = 600  # gate decisions of one caller
    max_header_bytes: int = 64 * 1024  # a request's line and headers; more is 431 headers_too_large
    sandbox_jwt_audience: str = "baton:sandbox"  # the audience baton agent-server requires
    session_seconds: float = 12 * 3600  # a browser session's life (a JWT's own exp ends it sooner)
    # False (``baton serve --no-execute``): runs are queued for the fleet's workers, none executes here.
    execute: bool = True

    @classmethod
    def load(cls, settings: Settings, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServerConfig:
        env = os.environ if environ is None else environ
        config = replace(cls(), **_from_toml(settings.home / "baton.toml"))
        config = replace(config, **_from_env(env))
        config = replace(config, **{key: value for key, value in overrides.items() if value is not None})
        positive = ("sse_queue_size", "max_body_bytes", "sse_heartbeat_seconds", "sse_max_per_run", "sse_max_per_token")
        for name in (*positive, "commands_per_minute", "decisions_per_minute", "max_header_bytes"):
            if getattr(config, name) <= 0:
                raise UsageError("config_invalid", f"{name} must be greater than 0")
        return config

    @property
    def loopback_only(self) -> bool:
        return is_loopback(self.host)

    def local_token_path(self, settings: Settings) -> Path:
        return settings.home / LOCAL_TOKEN_FILE


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _paths(raw: str | list[str]) -> tuple[Path, ...]:
    items = raw.split(os.pathsep) if isinstance(raw, str) else raw
    return tuple(Path(item).expanduser() for item in items if item)


_SCALARS: Final[dict[str, type]] = {
    "jwt_audience": str,
    "jwt_issuer": str,
    "jwt_leeway_seconds": float,
    "max_body_bytes": int,
    "sse_heartbeat_seconds": float,
    "sse_queue_size": int,
    "sse_stall_seconds": float,
    "sse_max_per_run": int,
    "sse_max_per_token": int,
    "commands_per_minute": int,
    "decisions_per_minute": int,
    "max_header_bytes": int,
    "sandbox_jwt_audience": str,
    "session_seconds": float,
}
_PATH_LISTS: Final = ("jwt_public_keys", "workspace_roots")
_STRING_LISTS: Final = ("repository_urls",)  # comma-separated in the environment


def _strings(raw: str | list[str]) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else raw
    return tuple(str(item).strip() for item in items if str(item).strip())


def _convert(key: str, raw: Any, source: str) -> Any:
    try:
        if key in _PATH_LISTS:
            return _paths(raw)
        if key in _STRING_LISTS:
            return _strings(raw)
        return _SCALARS[key](raw)
    except (TypeError, ValueError) as exc:
        raise UsageError("config_invalid", f"{source}: {key} is not valid: {raw!r}") from exc


def _from_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError("config_invalid", f"cannot read {path}: {exc}") from exc
    known = (*_SCALARS, *_PATH_LISTS, *_STRING_LISTS)
    return {key: _convert(key, raw, str(path)) for key, raw in data.items() if key in known}


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in (*_SCALARS, *_PATH_LISTS, *_STRING_LISTS):
        name = "BATON_" + key.upper()
        if env.get(name):
            values[key] = _convert(key, env[name], name)
    return values
