"""What the launch recipes of subprocess agents share: the allow-listed environment, a home of
the agent's own, the run's native setting of the right type, ``node`` for JavaScript agents, the
platform of npm's native binary packages."""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from baton.agents.subprocess import LaunchContext
from baton.errors import AgentError

__all__ = [
    "SYSTEM_VARIABLES",
    "allowed_environment",
    "home_environment",
    "native_setting",
    "node_program",
    "npm_arch",
]

SYSTEM_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")

_Setting = TypeVar("_Setting")


def allowed_environment(parent: Mapping[str, str], passthrough: tuple[str, ...], *names: str) -> dict[str, str]:
    """The variables of ``parent`` an agent may see: the system ones, ``names`` and the configured passthrough."""
    return {name: parent[name] for name in (*SYSTEM_VARIABLES, *names, *passthrough) if name in parent}


def home_environment(home: Path) -> dict[str, str]:
    """``HOME`` and the XDG base directories, all inside ``home`` (the run's agent home), so the
    agent reads and writes no configuration, data, cache or state of the user's."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def native_setting(context: LaunchContext, kind: type[_Setting], agent: str) -> _Setting:
    """The run's native setting, which must be ``agent``'s own configuration type."""
    if not isinstance(context.setting, kind):
        raise TypeError(f"the native setting of {agent} must be a {kind.__name__}")
    return context.setting


def node_program(context: LaunchContext, agent: str) -> str:
    """``node`` on the run's ``PATH`` (``agent_not_installed`` without it)."""
    node = shutil.which("node", path=context.parent.get("PATH"))
    if node is None:
        raise AgentError("agent_not_installed", f"{agent} needs node on PATH")
    return node


def npm_arch() -> str:
    """This machine in the names of npm's platform packages (``x64``, ``arm64``; unknown: ``x64``)."""
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    return machine or "x64"
