"""Subprocess ACP agents: baton spawns the agent itself and speaks ACP over its stdio.

The child gets its own session (so it and everything it starts can be killed as a group), an
environment built only from an allow-list (the registry's recipe, plus ``BATON_RUN_ID`` and what
the executor adds: the run's ``TRACEPARENT`` when traces are exported), the
workspace as its cwd, pipes for stdin and stdout, and its stderr drained into the log as
bounded ``_baton/console`` entries (see :mod:`baton.agents.line_transport`).

Shutdown (``aclose``): close stdin, give the agent a moment, SIGTERM its process group, then
SIGKILL it, then every process that still carries the run's ``BATON_RUN_ID`` (an agent's
tools may run in sessions of their own, inside a sandbox).

The agent runs contained (:mod:`baton.sandbox`): ``bwrap --unshare-pid --die-with-parent``,
spawned from the event loop's thread, so when baton dies for any reason the kernel ends the
agent and everything it started (ACP agents do not exit when their stdin closes). The command's
``sandbox`` plan adds the filesystem sandbox; without one the agent is contained only. Where
bubblewrap cannot contain, the agent gets SIGKILL from the kernel through ``setpriv
--pdeathsig KILL`` (util-linux) and its tools are found by ``BATON_RUN_ID`` on the next
cleanup; in both cases the signal is set in the child before it execs the agent: a baton
killed in the few milliseconds between the spawn and that point leaves the agent running (the
next ``baton`` that resumes or adopts the run kills what carries its ``BATON_RUN_ID``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.acp.transport import Transport
from baton.agents.line_transport import LineTransport, stream_limit
from baton.agents.processes import RUN_ID_VARIABLE, kill_process_group, kill_run_processes
from baton.errors import AgentError
from baton.sandbox.network import SandboxNetwork
from baton.sandbox.plan import SandboxPlan
from baton.sandbox.spawn import spawn_contained

__all__ = ["AgentCommand", "ExitReport", "LaunchContext", "SubprocessAgent"]

_STDIN_GRACE = 0.3  # seconds an agent gets to exit on its own once stdin is closed
_TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL


@dataclass(frozen=True)
class LaunchContext:
    """What a registry entry needs to build one run's command: the run, the model endpoint, the setting."""

    run_id: str
    workspace: Path
    agent_home: Path
    model: str | None
    base_url: str | None
    api_key: str
    passthrough: tuple[str, ...]
    parent: Mapping[str, str]
    setting: object  # the chosen NativeSetting's agent-specific config
    max_retries: int | None = None  # model API retries; None: the agent's default
    sandboxed: bool = False  # the filesystem is confined (the user's home is not there)
    # The repository's instructions for the agent (baton.workspaces.instructions), handed over
    # through its system-prompt channel; None: none are given.
    instructions: str | None = None


@dataclass(frozen=True)
class AgentCommand:
    """Everything needed to start one agent process for one run."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    run_id: str
    session_meta: Mapping[str, Any] | None = None  # ``_meta`` of ``session/new`` (claude-acp: settingSources)
    session_mode: str | None = None  # set with ``session/set_mode`` right after ``session/new``
    sandbox: SandboxPlan | None = None  # the run's sandbox; None: contained only
    network: SandboxNetwork | None = None  # the sandbox's own network (baton serves its proxies)


@dataclass(frozen=True)
class ExitReport:
    """How an agent process ended: its exit status (None: still running) and last stderr lines."""

    returncode: int | None
    stderr_tail: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.returncode is None:
            status = "the agent closed its output"
        elif self.returncode < 0:
            status = f"the agent was killed by signal {-self.returncode}"
        else:
            status = f"the agent exited with status {self.returncode}"
        if self.stderr_tail:
            return status + "; last stderr lines:\n" + "\n".join(self.stderr_tail[-10:])
        return status + " (nothing on stderr)"


class SubprocessAgent:
    """An :class:`~baton.agents.base.AgentProcess` that is a child process speaking ACP on stdio."""

    def __init__(self, name: str, command: AgentCommand) -> None:
        self.name = name
        self.command = command
        self.process: asyncio.subprocess.Process | None = None
        self._transport: LineTransport | None = None
        self._closed = False

    @property
    def sandbox(self) -> SandboxPlan | None:
        return self.command.sandbox

    @property
    def network(self) -> SandboxNetwork | None:
        return self.command.network

    async def start(self, *, environment: Mapping[str, str] | None = None) -> Transport:
        if self.process is not None or self._closed:
            raise RuntimeError("an agent process starts once")
        command = self.command
        env = {**command.env, **(environment or {})}
        env[RUN_ID_VARIABLE] = command.run_id
        try:
            self.process = await spawn_contained(
                command.argv,
                plan=command.sandbox,
                network=command.network,
                cwd=command.cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=stream_limit(),
            )
        except OSError as exc:
            raise AgentError(
                "agent_not_installed", f"cannot start {self.name} ({command.argv[0]}): {exc.strerror or exc}"
            ) from exc
        process = self.process
        assert process.stdout is not None and process.stdin is not None
        self._transport = LineTransport(process.stdout, process.stdin, process.stderr)
        return self._transport

    async def exit_report(self, wait: float = 2.0) -> ExitReport:
        """The exit status (waiting up to ``wait`` seconds for it) and the last stderr lines."""
        process = self.process
        returncode = None
        if process is not None:
            with contextlib.suppress(TimeoutError):
                returncode = await asyncio.wait_for(process.wait(), wait)
        tail = list(self._transport.stderr_tail) if self._transport is not None else []
        return ExitReport(returncode, tail)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        process = self.process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                with contextlib.suppress(Exception):
                    process.stdin.close()
            if not await _exited(process, _STDIN_GRACE):
                kill_process_group(process.pid, signal.SIGTERM)
                if not await _exited(process, _TERM_GRACE):
                    kill_process_group(process.pid, signal.SIGKILL)
                    await _exited(process, 5.0)
        if process is not None:
            kill_process_group(process.pid, signal.SIGKILL)  # tools left in the agent's group
        await asyncio.to_thread(kill_run_processes, self.command.run_id)
        if self._transport is not None:
            await self._transport.close()
        if self.command.network is not None:
            await self.command.network.aclose()


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), seconds)
    except TimeoutError:
        return False
    return True
