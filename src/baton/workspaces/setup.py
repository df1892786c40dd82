"""A workspace's setup: ``.baton/setup`` of the base commit, or ``--setup CMD`` (docs/workspaces.md).

The repository's script runs only for a repository the configuration trusts
(``[workspace] trusted``); the command the run's creator gives runs without that. It runs in the
new workspace before the agent starts, inside the run's sandbox when there is one, with
``BATON_PORT_BASE``, ``BATON_WORKSPACE`` and ``BATON_BASE_COMMIT`` in its environment. Its
output is logged as ``_baton/setup`` notes (``status`` ``started``, ``output`` lines, then
``finished`` or ``failed``); a non-zero exit fails the run with ``workspace_setup_failed``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from baton.errors import AgentError, WorkspaceError
from baton.sandbox.network import SandboxNetwork
from baton.sandbox.plan import SandboxPlan
from baton.sandbox.spawn import spawn_contained
from baton.workspaces._git import git

__all__ = ["SETUP_FILE", "SetupStep", "WorkspaceSetup", "read_setup_script", "run_setup", "skipped_hint"]

SETUP_FILE: Final = ".baton/setup"
_OUTPUT_TAIL: Final = 16 * 1024
_LINE_LIMIT: Final = 8 * 1024

Note = Callable[[str, Any], int]


@dataclass(frozen=True)
class SetupStep:
    """What runs before the agent: ``command`` (a shell command line) or ``script`` (the text of
    ``.baton/setup``), in ``cwd``."""

    cwd: Path
    # "option" (--setup), "trusted" (.baton/setup of a trusted repository) or "gate" (of another
    # repository, with [workspace] untrusted_setup = "ask": it runs only once a gate approves it)
    source: str
    command: str | None = None
    script: str | None = None
    env: Mapping[str, str] | None = None

    def argv(self, script_path: Path) -> list[str]:
        if self.command is not None:
            return ["/bin/sh", "-c", self.command]
        assert self.script is not None
        if self.script.startswith("#!"):
            return [str(script_path)]
        return ["/bin/sh", str(script_path)]

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "command": self.command if self.command is not None else SETUP_FILE}

    @property
    def gated(self) -> bool:
        """The script runs only once a human approves it (baton.runs.setup_gate)."""
        return self.source == "gate"

    def sha256(self) -> str:
        """The script's hash, as the gate shows it (the text that runs is exactly what it hashes)."""
        return hashlib.sha256((self.script or self.command or "").encode()).hexdigest()


@dataclass(frozen=True)
class WorkspaceSetup:
    """A new run's setup: the step to run (None: nothing), why a ``.baton/setup`` was skipped,
    and where its script is written (a folder the run's sandbox binds: the agent home)."""

    step: SetupStep | None
    skipped: str | None
    script_dir: Path
    hint: str | None = None  # how to have a skipped .baton/setup run (shown beside the skip)


def skipped_hint(repo: str, config: Path) -> str:
    """What the user can do about a ``.baton/setup`` skipped for an untrusted repository: trust
    the repository in the configuration, or give the run its setup command."""
    return (
        f'to run it, trust the repository: add "{repo}" to trusted under [workspace] in {config}; '
        "or give the run a setup command yourself: --setup CMD"
    )


def read_setup_script(workspace: Path, commit: str | None) -> str | None:
    """``.baton/setup`` as the base commit has it (never the working tree's), byte for byte (its
    hash is the blob's content's: ``git show BASE:.baton/setup | sha256sum``), or None."""
    if commit is None:
        return None
    try:
        return git(["show", f"{commit}:{SETUP_FILE}"], cwd=workspace).decode(errors="replace")
    except WorkspaceError:
        return None


async def run_setup(
    step: SetupStep,
    note: Note,
    *,
    script_dir: Path,
    sandbox: SandboxPlan | None,
    network: SandboxNetwork | None = None,
) -> None:
    """Run ``step`` in the agent's sandbox (and network: the allow-listed hosts), logging its
    output as it comes; ``workspace_setup_failed`` on a non-zero exit."""
    script_path = script_dir / "baton-setup"
    if step.script is not None:
        script_dir.mkdir(parents=True, exist_ok=True)
        script_path.write_text(step.script if step.script.endswith("\n") else step.script + "\n")
        script_path.chmod(0o755)
    argv = step.argv(script_path)
    note("setup", {"status": "started", **step.describe()})
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    env = {**_without_secrets(os.environ), **(step.env or {})}
    try:
        process = await spawn_contained(
            argv,
            plan=sandbox,
            network=network,
            cwd=step.cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except AgentError as exc:
        note("setup", {"status": "failed", "exit_code": None, "output": exc.message, "duration_ms": took()})
        raise WorkspaceError("workspace_setup_failed", f"the setup's sandbox could not start: {exc.message}") from exc
    except OSError as exc:
        note("setup", {"status": "failed", "exit_code": None, "output": str(exc), "duration_ms": took()})
        raise WorkspaceError("workspace_setup_failed", f"the setup could not start: {exc}") from exc
    tail = bytearray()
    assert process.stdout is not None
    try:
        while line := await process.stdout.readline():
            tail.extend(line)
            del tail[: max(0, len(tail) - _OUTPUT_TAIL)]
            note("setup", {"status": "output", "text": line[:_LINE_LIMIT].decode(errors="replace").rstrip("\n")})
        code = await process.wait()
    except asyncio.CancelledError:
        process.kill()
        await process.wait()
        raise
    output = tail.decode(errors="replace")
    if code != 0:
        note("setup", {"status": "failed", "exit_code": code, "output": output, "duration_ms": took()})
        raise WorkspaceError(
            "workspace_setup_failed",
            f"the setup ({step.describe()['command']}) exited {code}: {output.strip()[-2000:]}",
            details={"exit_code": code, "output": output},
        )
    note("setup", {"status": "finished", "exit_code": 0, "duration_ms": took()})


_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def _without_secrets(environment: Mapping[str, str]) -> dict[str, str]:
    """baton's environment less what may hold a secret (model keys, tokens) and baton's own
    settings: the setup runs the repository's code, in the agent's sandbox."""
    return {
        name: value
        for name, value in environment.items()
        if not name.startswith("BATON_") and not any(word in name.upper() for word in _SECRET_WORDS)
    }
