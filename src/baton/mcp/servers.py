"""A run's ``mcp`` entries → the servers it uses.

An entry is ``NAME`` (a server of baton's configuration, ``[mcp.NAME]`` in baton.toml, or of a
trusted repository's committed ``.baton/policy.toml``), ``NAME=URL`` (a streamable-HTTP
server) or ``NAME=COMMAND ARGS…`` (a stdio server baton starts; shell-quoted).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from baton.config import McpServerConfig, check_mcp_name, mcp_server_of
from baton.errors import UsageError
from baton.gates.repo_policy import POLICY_PATH, read_policy_document

__all__ = ["mcp_entry_is_named", "parse_mcp_entry", "repository_mcp_servers", "resolve_mcp_servers"]


def mcp_entry_is_named(entry: str) -> bool:
    """Whether ``entry`` only names a configured server (no command or URL of its own)."""
    return "=" not in entry


def parse_mcp_entry(entry: str, source: str = "--mcp") -> McpServerConfig | str:
    """A server defined by ``entry`` (``NAME=URL``, ``NAME=COMMAND…``), or the name it refers to."""
    name, sep, value = entry.partition("=")
    name = check_mcp_name(name.strip(), source)
    if not sep:
        return name
    value = value.strip()
    if value.startswith(("http://", "https://")):
        return McpServerConfig(name=name, transport="http", url=value, source="run")
    try:
        command = tuple(shlex.split(value))
    except ValueError as exc:
        raise UsageError("invalid_argument", f"{source} {name}=…: {exc}") from exc
    if not command:
        raise UsageError("invalid_argument", f"{source} {name}= names no command or URL")
    return McpServerConfig(name=name, transport="stdio", command=command, source="run")


def resolve_mcp_servers(
    entries: Sequence[str],
    configured: Iterable[McpServerConfig],
    *,
    source: str = "--mcp",
) -> tuple[McpServerConfig, ...]:
    """The servers of a run's entries, in order; a name twice, or a name no configuration
    defines, is ``invalid_argument``."""
    known = {server.name: server for server in configured}
    servers: list[McpServerConfig] = []
    for entry in entries:
        parsed = parse_mcp_entry(entry, source)
        if isinstance(parsed, str):
            server = known.get(parsed)
            if server is None:
                names = ", ".join(sorted(known)) or "none"
                raise UsageError(
                    "invalid_argument", f"{source} {parsed}: no MCP server of that name is configured ({names})"
                )
            parsed = server
        if any(existing.name == parsed.name for existing in servers):
            raise UsageError("invalid_argument", f"{source}: the MCP server {parsed.name} is named twice")
        servers.append(parsed)
    return tuple(servers)


def repository_mcp_servers(repo: Path) -> tuple[McpServerConfig, ...]:
    """The ``[mcp.NAME]`` servers of ``repo``'s ``.baton/policy.toml`` as committed at HEAD (never
    the working tree). Call it only for a repository the configuration trusts (``[workspace]
    trusted``): a server is a command baton runs."""
    if not (Path(repo) / ".git").exists():
        return ()
    raw = read_policy_document(Path(repo)).get("mcp")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise UsageError("config_invalid", f"{POLICY_PATH}: mcp is a table of servers ([mcp.NAME])")
    return tuple(
        mcp_server_of(name, table, f"{POLICY_PATH} at HEAD", origin="repository") for name, table in raw.items()
    )
