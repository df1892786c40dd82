"""Following a run in the terminal (``baton run``, ``baton resume``): its events, its gates, its parks.

While a gate is open and the terminal is attached (stdin and stdout are TTYs, no ``--json``)
the human is asked here, whatever its kind (baton.cli._terminal_gates). A decision made
elsewhere (``baton approve``, the HTTP API) answers the gate too; the question here is then
dropped. When the run parks (the grace period passed) the
command waits for the decision and resumes the run in this process; with ``--no-wait`` it exits
4 instead, and ``baton resume RUN`` continues it once the gate is decided.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from baton.cli._render import LiveView
from baton.cli._terminal_gates import TerminalGates
from baton.runs.spec import EXIT_CODES

if TYPE_CHECKING:
    from baton.runs import Baton, RunHandle

__all__ = ["follow_run"]


async def follow_run(
    baton: Baton,
    handle: RunHandle,
    *,
    console: Console,
    json_output: bool,
    no_wait: bool,
    after_log_seq: int = 0,
) -> int:
    """Stream the run's events until it ends (through parks unless ``no_wait``); its exit code."""
    asker = TerminalGates(baton, console) if _attached() and not json_output else None
    view = LiveView(console, gates_asked=asker is not None)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, handle.cancel)
    seen = 0  # the last event shown (a resumed execution streams on after it)
    try:
        while True:
            async for event in baton.events(handle.run_id, after=seen):
                if event["log_seq"] <= after_log_seq:
                    continue  # an earlier execution's (baton resume shows this one's)
                seen = event["seq"]
                if json_output:
                    sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
                    sys.stdout.flush()
                else:
                    view.show(dict(event))
                if asker is not None and event["type"] == "gate.opened":
                    asker.ask(str(event["data"].get("gate_id")))
                elif asker is not None and event["type"] == "gate.resolved":
                    asker.resolved(str(event["data"].get("gate_id")), event["data"].get("decided_by"))
            outcome = await handle.wait(through_parks=False)
            if asker is not None:  # a gate the run parks on and waits for stays asked
                await asker.drop(keep=outcome.gate_id if outcome.status == "paused" and not no_wait else None)
            if outcome.status != "paused":
                return outcome.exit_code
            gate = outcome.gate_id or "?"
            if no_wait:
                console.print(
                    f"[yellow]⏸ parked[/] run {escape(handle.run_id)} waits for gate {escape(gate)}: "
                    f"decide it (baton approve|deny {escape(gate)}), then baton resume {escape(handle.run_id)}"
                )
                return EXIT_CODES["paused"]
            parked = f"[yellow]⏸ parked[/] on gate {escape(gate)}: waiting for a decision (the agent is stopped)"
            if asker is not None:
                asker.notice(parked)
                asker.ask(gate)
            else:
                console.print(parked)
            ended = await handle.continue_parked(outcome)
            if asker is not None:
                await asker.drop()
            if ended is not None:
                return ended.exit_code
            console.print(f"[bold]↻ resumed[/] run {escape(handle.run_id)} after the decision")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _attached() -> bool:
    try:
        return os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
