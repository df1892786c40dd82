"""Driving ``baton run`` attached to a terminal (a pty): what it shows, and the lines a human types
when a prompt appears."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.cli._baton_cli import BatonCLI, baton_command


@dataclass(frozen=True)
class TerminalSession:
    returncode: int
    shown: str  # everything the terminal showed
    answered: int  # how many of the replies were typed

    def describe(self) -> str:
        return f"exit {self.returncode}, {self.answered} replies typed; the terminal showed:\n{self.shown}"


def run_in_terminal(
    baton: BatonCLI,
    args: Sequence[str],
    replies: Sequence[tuple[str, str | Callable[[], object]]],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> TerminalSession:
    """``baton ARGS`` on a pty; each ``(prompt, reply)`` in turn: once ``prompt`` has been shown
    (after the previous reply), ``reply`` and a newline are typed (a callable reply is called
    instead: a decision from another process, say)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*baton_command(), *args],
        env={**baton.env, "COLUMNS": "200", **(env or {})},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    shown = b""
    seen = 0  # what was shown before the last reply
    answered = 0
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    shown += os.read(controller, 65536)
                except OSError:
                    break
            if answered < len(replies) and replies[answered][0].encode() in shown[seen:]:
                seen = shown.index(replies[answered][0].encode(), seen) + 1
                reply = replies[answered][1]
                if isinstance(reply, str):
                    os.write(controller, reply.encode() + b"\n")
                else:
                    reply()
                answered += 1
        process.wait(timeout=30)
        while select.select([controller], [], [], 0.2)[0]:  # what it showed last
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    return TerminalSession(process.returncode, shown.decode(errors="replace"), answered)
