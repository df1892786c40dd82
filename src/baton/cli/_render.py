"""The view of a run drawn from its runner events: live (``baton run`` without ``--json``) and
read back (``baton logs RUN --pretty``), line for line the same.

A turn that ends while a gate is open ended because the run parks: the park says so, not a
"turn finished" line. With ``gates_asked=True`` the terminal asks about each gate itself
(baton.cli._terminal_gates), so an opened gate is shown once, by that question. The closing
line counts the run's time from its first event to its last (waiting for humans included).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

__all__ = ["LiveView"]

_OUTPUT_LINES = 12


class LiveView:
    """Prints each runner event as it arrives: text, tool calls, diffs, tests, the end."""

    def __init__(self, console: Console, *, gates_asked: bool = False) -> None:
        self.console = console
        self._gates_asked = gates_asked
        self._open_gates: set[str] = set()
        self._started_at: str | None = None

    def show(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        data = event["data"]
        handler = getattr(self, "_" + kind.replace(".", "_"), None)
        if handler is not None:
            handler(data, event)

    def _setup_started(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self._started_at = self._started_at or event.get("ts")  # the run's time counts its setup
        sources = {"option": "--setup", "approved": "approved at its gate"}
        source = sources.get(str(data.get("source")), "trusted repository")
        self.console.print(f"[bold]⚙ setup[/] [dim]({source})[/] {escape(str(data.get('command')))}", soft_wrap=True)

    def _setup_output(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self.console.print(f"  [dim]│ {escape(str(data.get('text', '')))}[/]", soft_wrap=True)

    def _setup_finished(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        omitted = data.get("output_lines_omitted") or 0
        if omitted:
            self.console.print(f"  [dim]… {omitted} more lines (baton logs {escape(event['run_id'])})[/]")
        took = _seconds(data.get("duration_ms"))
        if data.get("status") == "finished":
            self.console.print(f"  [green]setup ok[/] [dim]({took})[/]")
        else:
            code = data.get("exit_code")
            exited = f"exit {code}" if code is not None else "could not start"
            self.console.print(f"  [red]setup failed[/] ({exited}) [dim]({took})[/]")

    def _setup_skipped(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self.console.print(f"[yellow]⚠ setup skipped:[/] {escape(str(data.get('reason')))}", soft_wrap=True)
        if data.get("hint"):
            self.console.print(f"  [yellow]hint:[/] {escape(str(data['hint']))}", soft_wrap=True)

    def _task_started(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self._started_at = self._started_at or event.get("ts")
        self.console.rule(f"[bold]baton[/] run {escape(event['run_id'])}")
        self.console.print(
            f"[dim]agent {data.get('agent')} · model {data.get('model') or 'default'} · "
            f"mode {data.get('permission_mode')} · {escape(str(data.get('cwd')))}[/]"
        )

    def _message(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        if data.get("malformed"):
            self.console.print(f"[yellow]⚠ malformed line from the agent:[/] {escape(str(data.get('text')))}")
        elif data.get("denied"):
            self.console.print(f"[red]✗ denied[/] {escape(str(data.get('tool')))}: {escape(str(data.get('text')))}")
        elif data.get("role") == "agent":
            self.console.print(f"[cyan]●[/] {escape(str(data.get('text', '')))}")
        else:
            self.console.print(f"[magenta]▶[/] {escape(str(data.get('text', '')))}")

    def _file_read(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        what = data.get("path") or data.get("pattern") or ""
        self.console.print(f"[blue]⤷ {escape(str(data.get('tool')))}[/] {escape(str(what))}")

    def _file_changed(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self.console.print(
            f"[green]✎ {escape(str(data.get('change')))}[/] {escape(str(data.get('path')))} "
            f"[dim]({escape(str(data.get('tool')))})[/]"
        )
        diff = _diff_of(event.get("raw") or {}, data)
        if diff:
            self.console.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))

    def _gate_opened(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self._open_gates.add(str(data.get("gate_id")))
        if self._gates_asked:
            return  # the question at the terminal shows it
        self.console.print(
            f"[yellow]? gate[/] {escape(str(data.get('gate_id')))} ({escape(str(data.get('kind')))}): "
            f"{escape(str(data.get('summary') or ''))}"
        )

    def _gate_resolved(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self._open_gates.discard(str(data.get("gate_id")))
        reason = f" ({escape(str(data['reason']))})" if data.get("reason") else ""
        decision = str(data.get("decision"))
        mark = {"deny": "[red]✗ gate[/]", "superseded": "[dim]↷ gate[/]"}.get(decision, "[green]✓ gate[/]")
        self.console.print(
            f"{mark} {escape(str(data.get('gate_id')))}: {escape(decision)}{reason} "
            f"[dim]by {escape(str(data.get('decided_by') or '?'))}[/]"
        )

    def _command_started(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        edited = (
            f" [dim](edited by {escape(str(data.get('edited_by') or '?'))}; "
            f"proposed: {escape(str(data.get('original_command')))})[/]"
            if data.get("edited")
            else ""
        )
        self.console.print(f"[yellow]$[/] {escape(str(data.get('command')))}{edited}")

    def _command_finished(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        if data.get("denied"):
            return
        status = "[red]failed[/]" if data.get("is_error") else "[green]ok[/]"
        code = data.get("exit_code")
        suffix = f" (exit {code})" if code is not None else ""
        output = str(data.get("output") or "").rstrip()
        lines = output.splitlines()
        shown = lines[-_OUTPUT_LINES:]
        if len(lines) > len(shown):
            self.console.print(f"  [dim]… {len(lines) - len(shown)} more lines[/]")
        for line in shown:
            self.console.print(f"  [dim]{escape(line)}[/]")
        self.console.print(f"  {status}{suffix}")

    def _test_result(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        framework = f" [{data.get('framework')}]" if data.get("framework") else ""
        if data.get("passed"):
            self.console.print(f"[bold green]✔ tests passed[/]{escape(framework)}")
        else:
            self.console.print(f"[bold red]✘ tests failed[/]{escape(framework)}")

    def _branch_created(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self.console.print(
            f"[bold green]⎇ branch[/] {escape(str(data.get('branch')))} [dim]{escape(str(data.get('commit'))[:12])} · "
            f"{data.get('files_changed')} files, +{data.get('insertions')} -{data.get('deletions')}[/]",
            soft_wrap=True,
        )
        for skipped in data.get("skipped") or ():
            self.console.print(
                f"[yellow]  left out:[/] {escape(str(skipped.get('path')))} ({escape(str(skipped.get('reason')))})"
            )

    def _turn_finished(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        if self._open_gates:
            return  # the agent was stopped for a park: the park says so
        self.console.print(f"[dim]turn finished: {escape(str(data.get('stop_reason')))}[/]")

    # The closing line is never cropped: the run id on it is what `baton logs` takes.
    def _task_finished(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        stop = str(data.get("stop_reason"))
        ended = "[bold yellow]■ cancelled[/]" if stop == "cancelled" else f"[bold green]■ finished[/] ({escape(stop)})"
        self.console.print(
            f"{ended} · cost ${_money(data.get('total_cost_usd'))} · {self._took(data, event)} · "
            f"run {escape(event['run_id'])}",
            soft_wrap=True,
        )

    def _took(self, data: dict[str, Any], event: dict[str, Any]) -> str:
        """The run's wall time from its first event shown; the agent's own ``duration_ms`` when
        the view started later (``baton resume`` shows only its execution)."""
        if self._started_at and event.get("ts"):
            try:
                took = datetime.fromisoformat(str(event["ts"])) - datetime.fromisoformat(self._started_at)
            except ValueError:
                return _seconds(data.get("duration_ms"))
            return _seconds(took.total_seconds() * 1000)
        return _seconds(data.get("duration_ms"))

    def _task_failed(self, data: dict[str, Any], event: dict[str, Any]) -> None:
        self.console.print(
            f"[bold red]■ failed[/] {escape(str(data.get('code')))}: {escape(str(data.get('message')))} · "
            f"cost ${_money(data.get('total_cost_usd'))} · run {escape(event['run_id'])}",
            soft_wrap=True,
        )


def _diff_of(raw: dict[str, Any], data: dict[str, Any]) -> str:
    """The diff of an edit: Claude's structured patch in the completing update, else the call's
    ACP diff the projection kept (``data["diff"]``)."""
    update = ((raw.get("params") or {}).get("update")) or {}
    output = update.get("rawOutput")
    lines: list[str] = []
    if isinstance(output, dict) and isinstance(output.get("structuredPatch"), list):
        for hunk in output["structuredPatch"]:
            if isinstance(hunk, dict):
                old = f"-{hunk.get('oldStart')},{hunk.get('oldLines')}"
                new = f"+{hunk.get('newStart')},{hunk.get('newLines')}"
                lines.append(f"@@ {old} {new} @@")
                lines += [str(line) for line in hunk.get("lines") or []]
        if lines:
            return "\n".join(lines)
    diff = data.get("diff")
    if isinstance(diff, dict):
        path = data.get("path")
        lines += [f"--- {path}", f"+++ {path}"]
        lines += [f"-{line}" for line in str(diff.get("old_text") or "").splitlines()]
        lines += [f"+{line}" for line in str(diff.get("new_text") or "").splitlines()]
    return "\n".join(lines)


def _money(value: Any) -> str:
    return f"{float(value):.4f}" if isinstance(value, int | float) else "?"


def _seconds(value: Any) -> str:
    return f"{float(value) / 1000:.1f} s" if isinstance(value, int | float) else "? s"
