"""The gates of a run asked at the terminal that runs it (``baton run``, ``baton resume``).

Every kind is asked, one gate at a time, and decided through the same :class:`~baton.gates.handles.Gate`
operations as ``baton approve|deny|answer|review-plan|continue`` (``decided_by: "terminal"``):

- ``tool``: the command (or the diff), then ``y`` approve, ``n`` deny, ``e`` edit (a new command,
  or the input as one line of JSON) then approve, ``a`` (always) approve and allow the suggested
  rule for the rest of this run (offered when there is one); an edit the run's agent cannot
  apply is refused (``edit_not_supported``: the agent would run what it proposed) and the gate
  is asked again without ``e``;
- ``question``: each question with its numbered options; the answer is the option number(s)
  (several, separated by commas or spaces, for a multi-select question) or, where the question
  allows it, the user's own text;
- ``plan_review``: the plan, then ``a`` approve, ``r`` reject (with feedback for the agent),
  ``e`` edit it in ``$VISUAL``/``$EDITOR`` (default ``vi``) and approve the edited plan;
- ``resource_limit``: what was reached, then ``c`` continue (with a new budget, e.g.
  ``usd=2 turns=20 seconds=600``; empty keeps it) or ``s`` stop (a denial: the run ends
  ``budget_exhausted``).

A refusal (``answer_invalid``, a gate decided elsewhere meanwhile) is printed; a refused answer
or plan edit is asked again, anything else ends the question for that gate. A decision made
elsewhere that the run takes (``gate.resolved``) ends the question at once. A line printed while
a question waits (:meth:`TerminalGates.notice`: the run parks) goes above it, and the question
is asked again below.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.gates.handles import Gate
    from baton.gates.ledger import GateRecord
    from baton.runs import Baton

__all__ = ["TerminalGates", "parse_budget", "parse_selection"]

_RETRY_CODES = frozenset({"answer_invalid", "plan_edit_invalid", "invalid_argument"})


class TerminalGates:
    """Asks the human at the terminal about each gate of the run, one at a time."""

    def __init__(self, baton: Baton, console: Console) -> None:
        self._baton = baton
        self._console = console
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._terminal = asyncio.Lock()  # one gate at a time on the terminal
        self._prompting: str | None = None  # the question waiting for a line, if any
        self._edits_refused: set[str] = set()  # runs whose agent refused an edit: `e` is not offered

    def ask(self, gate_id: str) -> None:
        task = self._tasks.get(gate_id)
        if task is None or task.done():
            self._tasks[gate_id] = asyncio.create_task(self._ask(gate_id), name=f"baton-ask-{gate_id}")

    def notice(self, markup: str) -> None:
        """Print a line; while a question waits for its answer, above it, the question again below."""
        if self._prompting is None:
            self._console.print(markup)
            return
        self._console.print()
        self._console.print(markup)
        self._console.print(self._prompting, end="")

    def resolved(self, gate_id: str, decided_by: object) -> None:
        """The run took a decision for ``gate_id``: one made elsewhere ends the question here (its
        prompt would otherwise take the next line typed for another gate)."""
        task = self._tasks.get(gate_id)
        if task is not None and not task.done() and decided_by != "terminal":
            task.cancel()
            self._console.print(f"\n[dim]gate {escape(gate_id)} was decided by {escape(str(decided_by))}[/]")

    async def drop(self, keep: str | None = None) -> None:
        """Stop asking (the gate was decided elsewhere, or the run stopped waiting); ``keep``: a
        gate the run now waits for parked, still asked."""
        dropped = {gate_id: task for gate_id, task in self._tasks.items() if gate_id != keep}
        for task in dropped.values():
            task.cancel()
        for task in dropped.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = {gate_id: task for gate_id, task in self._tasks.items() if gate_id == keep}

    async def _ask(self, gate_id: str) -> None:
        from baton.gates.handles import Gate
        from baton.gates.ledger import GateLedger

        ledger = GateLedger(self._baton.store)
        async with self._terminal:
            record = await ledger.get(gate_id)
            if record.status != "pending":
                return  # decided elsewhere while another gate was asked
            gate = Gate(ledger, record, decided_by="terminal")
            shows: dict[str, Callable[[GateRecord], None]] = {
                "tool": self._show_tool,
                "plan_review": self._show_plan,
                "resource_limit": self._show_budget,
            }
            asks: dict[str, Callable[[Gate], Awaitable[GateRecord | None]]] = {
                "tool": self._tool,
                "question": self._question,
                "plan_review": self._plan,
                "resource_limit": self._budget,
            }
            if record.kind in shows:
                shows[record.kind](record)
            await self._decide(gate, asks[record.kind])

    async def _decide(self, gate: Gate, ask: Callable[[Gate], Awaitable[GateRecord | None]]) -> None:
        from baton.runs.parking import wake_local

        while True:
            try:
                decided = await ask(gate)
            except BatonError as exc:
                self._console.print(f"[red]{escape(exc.code)}[/] {escape(exc.message)}")
                if exc.code in _RETRY_CODES:
                    continue
                return
            if decided is None:
                continue  # nothing usable was typed: ask again
            wake_local(gate.id, decided)
            rule = (decided.decision or {}).get("remember_rule")
            if rule:
                self._console.print(f"[dim]remembered for this run: {escape(str(rule))}[/]")
            return

    # -- tool ------------------------------------------------------------------------------

    async def _tool(self, gate: Gate) -> GateRecord | None:
        from baton.gates.ledger import suggested_rule
        from baton.runs.setup_gate import SETUP_TOOL

        record = gate.record
        always = suggested_rule(record) is not None
        editable = gate.run_id not in self._edits_refused and record.tool_name != SETUP_TOOL  # a setup runs as shown
        keys = "\\[y]es / \\[n]o" + (" / \\[e]dit" if editable else "") + (" / \\[a]lways" if always else "")
        line = (await self._prompt(f"[bold]approve?[/] {keys}: ")).lower()
        if line in ("y", "yes"):
            return await gate.approve()
        if always and line in ("a", "always"):
            return await gate.approve(remember="session")
        if line in ("n", "no"):
            return await gate.deny(reason="denied at the terminal")
        if line in ("e", "edit") and editable:
            edited = await self._edit_input(record)
            return None if edited is None else await self._approve_edited(gate, edited)
        return None

    async def _approve_edited(self, gate: Gate, edited: dict[str, Any]) -> GateRecord | None:
        try:
            return await gate.approve(updated_input=edited)
        except BatonError as exc:
            if exc.code != "edit_not_supported":
                raise
            self._edits_refused.add(gate.run_id)
            self._console.print(f"[red]{escape(exc.code)}[/] {escape(exc.message)}")
            return None  # asked again, without edit

    def _show_tool(self, gate: GateRecord) -> None:
        from baton.gates.ledger import suggested_rule
        from baton.runs.setup_gate import SETUP_TOOL

        data = gate.input or {}
        self._console.print(f"[yellow]? gate[/] {escape(gate.id)} · {escape(gate.tool_name or 'tool')}")
        if gate.tool_name == SETUP_TOOL:  # the repository's .baton/setup: the whole script, verbatim
            self._console.print(f"  [bold]{escape(gate.summary or '')}[/]")
            self._console.print(f"  [dim]{escape(str(data.get('path')))} · sha256 {escape(str(data.get('sha256')))}[/]")
            for line in str(data.get("script") or "").splitlines():
                self._console.print(f"  [cyan]│[/] {escape(line)}")
        elif isinstance(data.get("command"), str):
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
        suggested = suggested_rule(gate)
        if suggested:
            self._console.print(f"  [dim]a (always) = allow {escape(suggested)} for the rest of this run[/]")

    async def _edit_input(self, gate: GateRecord) -> dict[str, Any] | None:
        data = dict(gate.input or {})
        if isinstance(data.get("command"), str):
            command = await self._prompt("new command: ")
            return {**data, "command": command} if command else None
        try:
            edited = json.loads(await self._prompt("new input (one line of JSON): "))
        except ValueError:
            self._console.print("[red]not JSON[/]")
            return None
        return edited if isinstance(edited, dict) else None

    # -- question --------------------------------------------------------------------------

    async def _question(self, gate: Gate) -> GateRecord | None:
        record = gate.record
        self._console.print(f"[yellow]? question[/] {escape(record.id)} · {escape(record.summary)}")
        answers: list[dict[str, Any]] = []
        for question in record.questions or []:
            header = str(question.get("header") or question.get("question") or "")
            options = [str(option.get("label")) for option in question.get("options") or []]
            multi = bool(question.get("multiSelect"))
            free = bool(question.get("allowFreeText"))
            self._console.print(f"  [bold]{escape(header)}[/]: {escape(str(question.get('question') or ''))}")
            for number, option in enumerate(question.get("options") or [], 1):
                described = f" — {option['description']}" if option.get("description") else ""
                self._console.print(f"    {number}. {escape(str(option.get('label')))}{escape(described)}")
            hint = "number(s), comma-separated" if multi else "a number"
            if free:
                hint += ", or your own answer"
            while True:
                selected = parse_selection(await self._prompt(f"  answer ({hint}): "), options, multi=multi, free=free)
                if selected:
                    break
                self._console.print("  [red]pick an offered option[/]")
            answers.append({"header": header, "selected": selected})
        return await gate.answer(answers)

    # -- plan review -----------------------------------------------------------------------

    def _show_plan(self, record: GateRecord) -> None:
        self._console.print(f"[yellow]? plan review[/] {escape(record.id)} · {escape(record.summary)}")
        for line in (record.plan or "").splitlines():
            self._console.print(f"  │ {escape(line)}")

    async def _plan(self, gate: Gate) -> GateRecord | None:
        record = gate.record
        line = (await self._prompt("[bold]plan?[/] \\[a]pprove / \\[r]eject with feedback / \\[e]dit: ")).lower()
        if line in ("a", "approve", "y", "yes"):
            return await gate.review_plan("approve")
        if line in ("r", "reject", "n", "no"):
            feedback = await self._prompt("feedback for the agent (empty: none): ")
            return await gate.review_plan("reject", reason=feedback or None)
        if line in ("e", "edit"):
            edited = await self._edit_in_editor(record.plan or "")
            if edited is None:
                self._console.print("[dim]the plan is unchanged: approve it, or edit it again[/]")
                return None
            return await gate.review_plan("edit", edited_plan=edited)
        return None

    async def _edit_in_editor(self, text: str) -> str | None:
        """``text`` edited in the user's editor; ``None`` when it came back unchanged or empty."""
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        with tempfile.TemporaryDirectory(prefix="baton-plan-") as folder:
            path = Path(folder) / "plan.md"
            path.write_text(text)
            try:
                process = await asyncio.create_subprocess_exec(*editor, str(path))
            except OSError as exc:
                self._console.print(f"[red]cannot start the editor {escape(editor[0])}[/]: {escape(str(exc))}")
                return None
            if await process.wait() != 0:
                self._console.print(f"[red]the editor exited with {process.returncode}[/]")
                return None
            edited = path.read_text()
        return edited if edited.strip() and edited != text else None

    # -- budget ----------------------------------------------------------------------------

    def _show_budget(self, record: GateRecord) -> None:
        data = record.input or {}
        budget, spent = json.dumps(data.get("budget") or {}), json.dumps(data.get("spent") or {})
        self._console.print(f"[yellow]? budget[/] {escape(record.id)} · {escape(record.summary)}")
        self._console.print(f"  budget {escape(budget)} · spent {escape(spent)}")

    async def _budget(self, gate: Gate) -> GateRecord | None:
        line = (await self._prompt("[bold]continue?[/] \\[c]ontinue / \\[s]top: ")).lower()
        if line in ("s", "stop", "n", "no"):
            return await gate.deny(reason="stopped at the terminal")
        if line not in ("c", "continue", "y", "yes"):
            return None
        raw = await self._prompt("new budget, e.g. usd=2 turns=20 seconds=600 (empty: keep it): ")
        budget = parse_budget(raw)
        turns = budget.get("turns")
        return await gate.continue_run(
            budget_usd=budget.get("usd"),
            max_turns=None if turns is None else int(turns),
            max_seconds=budget.get("seconds"),
        )

    async def _prompt(self, text: str) -> str:
        self._console.print(text, end="")
        self._prompting = text
        try:
            return (await _read_line()).strip()
        finally:
            self._prompting = None


def parse_selection(line: str, options: list[str], *, multi: bool, free: bool) -> list[str]:
    """The labels an answer typed at the terminal selects: option numbers (several for a
    multi-select), an option's label, or (``free``) any other text itself; ``[]`` when it fits
    nothing (numbers naming no option included)."""
    line = line.strip()
    if not line:
        return []
    parts = [part for part in re.split(r"[,\s]+", line) if part]
    if parts and all(part.isdigit() for part in parts):
        numbers = [int(part) for part in parts]
        if all(1 <= number <= len(options) for number in numbers) and (multi or len(numbers) == 1):
            return list(dict.fromkeys(options[number - 1] for number in numbers))
        return []  # numbers that name no option (or several for a single choice): asked again
    by_label = {option.lower(): option for option in options}
    if line.lower() in by_label:
        return [by_label[line.lower()]]
    return [line] if free else []


def parse_budget(line: str) -> dict[str, float]:
    """``usd=2 turns=20 seconds=600`` (any of them, in any order) as ``{name: value}``;
    ``invalid_argument`` for anything else (the budget's own checks come with the decision)."""
    from baton.errors import UsageError

    budget: dict[str, float] = {}
    for part in line.replace(",", " ").split():
        name, sep, value = part.partition("=")
        if not sep or name not in ("usd", "turns", "seconds"):
            raise UsageError("invalid_argument", f"a budget is usd=X turns=N seconds=S, not {part!r}")
        try:
            budget[name] = float(value)
        except ValueError:
            raise UsageError("invalid_argument", f"{name}: not a number: {value!r}") from None
        if name == "turns" and not budget[name].is_integer():
            raise UsageError("invalid_argument", f"turns: a whole number, not {value!r}")
    return budget


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
