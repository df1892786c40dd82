"""Starting a process inside a run's sandbox: the one way an agent or a setup step is spawned.

:func:`spawn_contained` wraps the command line in the plan's bubblewrap (or ``setpriv`` where
nothing can contain), and when the plan isolates the network serves the sandbox's proxies in
its namespace before the command runs (:mod:`baton.sandbox.netns`). Spawn from the event
loop's thread: bubblewrap's death signal follows the spawning thread (docs/sandbox.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baton.sandbox.bwrap import containment
from baton.sandbox.netns import open_door
from baton.sandbox.network import SandboxNetwork, proxy_environment
from baton.sandbox.plan import SandboxPlan

__all__ = ["spawn_contained"]


async def spawn_contained(
    argv: Sequence[str],
    *,
    plan: SandboxPlan | None,
    network: SandboxNetwork | None,
    cwd: Path,
    env: Mapping[str, str],
    **options: Any,
) -> asyncio.subprocess.Process:
    """``argv`` started in ``plan`` (None: contained only) in a session of its own; when the plan
    isolates the network, ``network`` serves it (without one the sandbox has no network at all)
    and the environment names the allow-list proxy. A network that cannot be made kills the
    process and raises (``sandbox_network_failed``, ``agent_exited``, ``agent_start_timeout``);
    ``OSError`` when the command cannot start."""
    plan = plan or SandboxPlan("none", containment())
    served = network if plan.network.isolated else None
    door = open_door() if served is not None else None
    environment = {**env, **proxy_environment()} if served is not None else dict(env)
    process: asyncio.subprocess.Process | None = None
    try:
        async with served.serving(door) if served is not None and door is not None else contextlib.nullcontext():
            process = await asyncio.create_subprocess_exec(
                *plan.wrap(
                    door.command(argv) if door is not None else argv,
                    cwd,
                    door=door.bwrap_args() if door is not None else (),
                ),
                cwd=cwd,
                env=environment,
                start_new_session=True,
                pass_fds=door.pass_fds if door is not None else (),
                **options,
            )
    except BaseException:
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # its own session: the group is its pid
        if door is not None:
            door.close()  # after the kill: a bubblewrap let go would run its command
        raise
    return process
