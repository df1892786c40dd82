"""The network allow-list (``--allow-net HOST[:PORT]``, config ``sandbox.allow_net``).

An entry is a host name, an IP address (IPv6 in brackets: ``[::1]:8080``) or ``*.domain``
(every name under ``domain``, not ``domain`` itself), with an optional port; without one,
every port of that host is allowed. Names match without regard to case or a trailing dot.
The proxy decides on the name the agent asked for, before any DNS lookup, so an entry
``example.com`` never lets through the address it resolves to under another name.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from baton.errors import UsageError

__all__ = ["AllowList", "NetDecision", "NetRule", "parse_host_port"]

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")


@dataclass(frozen=True)
class NetDecision:
    """One connection the proxy saw, as logged (``_baton/net``): host and port are None when unreadable."""

    host: str | None
    port: int | None
    allowed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "allowed": self.allowed, "reason": self.reason}


@dataclass(frozen=True)
class NetRule:
    host: str  # normalised; "*.example.com" for a wildcard
    port: int | None = None  # None: every port

    @classmethod
    def parse(cls, text: str) -> NetRule:
        wildcard = text.startswith("*.")
        try:
            host, port = parse_host_port(text.removeprefix("*."), default_port=None)
        except UsageError as exc:
            raise UsageError("invalid_argument", f"--allow-net {text!r}: {exc.message}") from exc
        if wildcard and _is_ip(host):
            raise UsageError("invalid_argument", f"--allow-net {text!r}: a wildcard stands for names, not addresses")
        return cls(f"*.{host}" if wildcard else host, port)

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


@dataclass(frozen=True)
class AllowList:
    rules: tuple[NetRule, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        return cls(tuple(NetRule.parse(entry) for entry in entries))

    def decide(self, host: str, port: int) -> NetDecision:
        host = _normalise(host)
        for rule in self.rules:
            if rule.matches(host, port):
                return NetDecision(host, port, True, f"allowed by --allow-net {rule}")
        return NetDecision(host, port, False, f"{_display(host)}:{port} is not on the allow-list (--allow-net)")


def parse_host_port(text: str, *, default_port: int | None) -> tuple[str, int | None]:
    """``host[:port]`` (``[v6]:port``) → normalised host and port; ``invalid_argument`` otherwise."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or not _is_ip(host) or (rest and not rest.startswith(":")):
            raise UsageError("invalid_argument", f"not a [IPv6]:port: {text!r}")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, None
    host = _normalise(host)
    if not host or not (_is_ip(host) or (set(host) <= _NAME_CHARS and ".." not in host and host[0] != ".")):
        raise UsageError("invalid_argument", f"not a host name or address: {text!r}")
    if port_text is None:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError("invalid_argument", f"not a port: {port_text!r}")
    return host, int(port_text)


def _normalise(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return str(ipaddress.ip_address(host)) if _is_ip(host) else host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _display(host: str) -> str:
    return f"[{host}]" if ":" in host else host
