"""Following a run in the terminal (``baton run``, ``baton resume``): its events, its gates, its parks.

While a gate is open and the terminal is attached (stdin and stdout are TTYs, no ``--json``)
the human is asked here: the command or the diff is shown, then ``y`` (approve), ``n`` (deny),
``e`` (edit the input, then approve), ``a`` (approve and remember the suggested rule for the
rest of the run). A decision made elsewhere (``baton approve``, the HTTP API) answers the gate
too; the question here is then dropped. When the run parks (the grace period passed) the
command waits for the decision and resumes the run in this process; with ``--no-wait`` it exits
4 instead, and ``baton resume RUN`` continues it once the gate is decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from baton.cli._render import LiveView
from baton.errors import BatonError
from baton.runs.spec import EXIT_CODES

if TYPE_CHECKING:
    from baton.gates.ledger import GateRecord
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
    view = LiveView(console)
    asker = TerminalGates(baton, console) if _attached() and not json_output else None
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
            outcome = await handle.wait(through_parks=False)
            if asker is not None:
                await asker.drop()
            if outcome.status != "paused":
                return outcome.exit_code
            gate = outcome.gate_id or "?"
            if no_wait:
                console.print(
                    f"[yellow]⏸ parked[/] run {escape(handle.run_id)} waits for gate {escape(gate)}: "
                    f"decide it (baton approve|deny {escape(gate)}), then baton resume {escape(handle.run_id)}"
                )
                return EXIT_CODES["paused"]
            console.print(f"[yellow]⏸ parked[/] on gate {escape(gate)}: waiting for a decision (the agent is stopped)")
            if asker is not None:
                asker.ask(gate)
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


class TerminalGates:
    """Asks the human at the terminal about each gate of the run, one at a time."""

    def __init__(self, baton: Baton, console: Console) -> None:
        self._baton = baton
        self._console = console
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def ask(self, gate_id: str) -> None:
        if gate_id not in self._tasks:
            self._tasks[gate_id] = asyncio.create_task(self._ask(gate_id), name=f"baton-ask-{gate_id}")

    async def drop(self) -> None:
        """Stop asking (the gate was decided elsewhere, or the run stopped waiting)."""
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    async def _ask(self, gate_id: str) -> None:
        from baton.gates.ledger import GateLedger
        from baton.runs.parking import wake_local

        ledger = GateLedger(self._baton.store)
        gate = await ledger.get(gate_id)
        if gate.status != "pending" or gate.kind != "tool":
            return  # questions and plans: baton answer / baton review-plan
        self._show(gate)
        while True:
            self._console.print("[bold]approve?[/] [y]es / [n]o / [e]dit / [a]lways for this session: ", end="")
            line = (await _read_line()).strip().lower()
            body: dict[str, Any] = {
                "bound_call_id": gate.bound_call_id,
                "bound_input_hash": gate.bound_input_hash,
            }
            if line in ("y", "yes"):
                body["decision"] = "approve"
            elif line in ("a", "always"):
                body.update(decision="approve", remember="session")
            elif line in ("n", "no"):
                body.update(decision="deny", reason="denied at the terminal")
            elif line in ("e", "edit"):
                edited = await self._edit(gate)
                if edited is None:
                    continue
                body.update(decision="approve", updated_input=edited)
            else:
                continue
            try:
                decided = await ledger.decide(gate_id, body, decided_by="terminal")
            except BatonError as exc:
                self._console.print(f"[red]{escape(exc.code)}[/] {escape(exc.message)}")
                return
            wake_local(gate_id, decided)
            rule = (decided.decision or {}).get("remember_rule")
            if rule:
                self._console.print(f"[dim]remembered for this run: {escape(str(rule))}[/]")
            return

    def _show(self, gate: GateRecord) -> None:
        data = gate.input or {}
        self._console.print(f"[yellow]? gate[/] {escape(gate.id)} · {escape(gate.tool_name or 'tool')}")
        if isinstance(data.get("command"), str):
            self._console.print(f"  [bold]$ {escape(data['command'])}[/]")
        elif isinstance(data.get("new_string"), str) or isinstance(data.get("content"), str):
            path = str(data.get("file_path") or data.get("path") or "")
            self._console.print(f"  [bold]{escape(path)}[/]")
            old, new = str(data.get("old_string") or ""), str(data.get("new_string") or data.get("content") or "")
            for line in old.splitlines():
                self._console.print(f"  [red]- {escape(line)}[/]")
            for line in new.splitlines():
                self._console.print(f"  [green]+ {escape(line)}[/]")
        else:
            self._console.print(f"  {escape(json.dumps(data, ensure_ascii=False))}")
        suggested = _suggested_rule(gate)
        if suggested:
            self._console.print(f"  [dim]a = allow {escape(suggested)} for the rest of this run[/]")

    async def _edit(self, gate: GateRecord) -> dict[str, Any] | None:
        data = dict(gate.input or {})
        if isinstance(data.get("command"), str):
            self._console.print("new command: ", end="")
            command = (await _read_line()).strip()
            return {**data, "command": command} if command else None
        self._console.print("new input (one line of JSON): ", end="")
        try:
            edited = json.loads(await _read_line())
        except ValueError:
            self._console.print("[red]not JSON[/]")
            return None
        return edited if isinstance(edited, dict) else None


def _suggested_rule(gate: GateRecord) -> str | None:
    try:
        from baton.gates.ledger import suggested_rule
    except ImportError:
        return None
    rule = suggested_rule(gate)
    return str(rule) if rule else None


async def _read_line() -> str:
    """One line from stdin without a thread (a thread blocked on input would outlive the run)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno()

    def ready() -> None:
        if not done.done():
            done.set_result(sys.stdin.readline())

    loop.add_reader(fd, ready)
    try:
        return await done
    finally:
        loop.remove_reader(fd)
