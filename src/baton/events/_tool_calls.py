"""Tool calls → ``file.read``, ``file.changed``, ``command.*`` and ``test.result`` events.

Calls are tracked by ``toolCallId``, so updates may come in any order and may fill in what the
proposal left out (some agents send the input, title or locations only in a later update).
File events are emitted when a call completes successfully; ``command.started`` as soon as the
command is known, ``command.finished`` (and ``test.result``) when the call ends. A permission
request's ``toolCall`` adds its diffs to the call (OpenCode shows a write's diff
only there) and its command, as the host annotated it (Qwen Code sends a command's input only
there). A file a call names two ways (Kilo: absolute, then ``./name``) is one event. A
``command.finished`` output is ``_meta.baton.output`` where an agent's annotation set it.
"""

from __future__ import annotations

import posixpath
from typing import Any

from baton.events.commands import command_string, exit_code_from_text, find_test_runners, judge_test_run

__all__ = ["OUTPUT_LIMIT", "Produced", "ToolCalls", "truncate_output"]

OUTPUT_LIMIT = 64 * 1024  # bytes of UTF-8 in command.finished ``output``
Produced = list[tuple[str, dict[str, Any]]]

_TERMINAL = frozenset({"completed", "failed"})
_READS = frozenset({"read", "search"})
_CHANGES = frozenset({"edit", "delete", "move"})
_DIFF_KINDS = frozenset({"add", "modify", "delete", "move"})
_PATH_KEYS = ("file_path", "path", "notebook_path", "filepath")  # where an edited input names its file


class _Call:
    __slots__ = (
        "change",
        "changes",
        "command",
        "denied",
        "diffs",
        "done",
        "edited",
        "kind",
        "paths",
        "raw_input",
        "started",
        "title",
        "tool",
    )

    def __init__(self) -> None:
        self.kind: str | None = None
        self.title: str | None = None
        self.tool: str | None = None
        self.command: str | None = None
        self.raw_input: dict[str, Any] | None = None
        self.paths: list[str] = []
        self.changes: dict[str, str] = {}
        self.diffs: dict[str, dict[str, Any]] = {}
        self.change: str | None = None  # _meta.baton.change: what the agent's result says
        self.denied = False
        self.started = False
        self.done = False
        self.edited: _Edit | None = None


class _Edit:
    """A human approved the call with another input (``updated_input``): what was proposed, and who."""

    __slots__ = ("by", "command", "input")

    def __init__(self, by: Any, command: str | None, proposed: dict[str, Any] | None) -> None:
        self.by = by if isinstance(by, str) else None
        self.command = command
        self.input = proposed

    def command_fields(self) -> dict[str, Any]:
        return {"edited": True, "edited_by": self.by, "original_command": self.command}

    def input_fields(self) -> dict[str, Any]:
        return {"edited": True, "edited_by": self.by, "original_input": self.input}


class ToolCalls:
    """The open tool calls of one run."""

    __slots__ = ("_calls", "_denied", "cwd")

    def __init__(self, cwd: str | None = None) -> None:
        self.cwd = cwd
        self._calls: dict[str, _Call] = {}
        self._denied: set[str] = set()

    def tool_name(self, tool_call_id: Any) -> str | None:
        call = self._calls.get(tool_call_id) if isinstance(tool_call_id, str) else None
        return call.tool if call is not None else None

    def deny(self, tool_call_id: Any) -> None:
        if isinstance(tool_call_id, str):
            call = self._calls.get(tool_call_id)
            if call is None:
                self._denied.add(tool_call_id)  # the request came before the call
            else:
                call.denied = True

    def edit(
        self, tool_call_id: Any, updated_input: dict[str, Any], *, edited_by: Any, proposed: Any = None
    ) -> Produced:
        """The call was approved with ``updated_input`` (what runs): its events say so from now on,
        and a ``command.started`` already given for the proposed command is given again for the edited one."""
        if not isinstance(tool_call_id, str):
            return []
        call = self._calls.get(tool_call_id)
        if call is None:  # the request came before the call
            call = self._calls[tool_call_id] = _Call()
        elif call.done:
            return []
        if call.edited is None:
            proposed_input = proposed if isinstance(proposed, dict) else call.raw_input
            original = call.command if call.command is not None else _command_of(proposed_input)
            call.edited = _Edit(edited_by, original, proposed_input)
        call.raw_input = updated_input
        command = _command_of(updated_input)
        if command is not None:
            call.command = command
        path = next((updated_input[k] for k in _PATH_KEYS if isinstance(updated_input.get(k), str)), None)
        if path is not None and path not in call.paths:  # another file than the one proposed
            change = next(iter(call.changes.values()), None)
            call.paths = [path]
            call.changes = {path: change} if change is not None else {}
        if call.started and call.kind == "execute":
            return [("command.started", self._started(call, tool_call_id))]
        return []

    def on_request(self, tool_call: dict[str, Any], command: Any = None) -> None:
        """The ``toolCall`` of a permission request: its diffs join the call, and its ``command``
        (the request's ``_meta.baton.command``, as the host annotated it) when none is known yet."""
        call_id = tool_call.get("toolCallId")
        if not isinstance(call_id, str):
            return
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = _Call()
            if call_id in self._denied:
                self._denied.discard(call_id)
                call.denied = True
        elif call.done:
            return
        for item in tool_call.get("content") or ():
            if isinstance(item, dict) and item.get("type") == "diff":
                self._note_diff(call, item, terminal=False)
        if command and call.command is None and call.edited is None:  # Qwen Code's input is only here
            call.command = command_string(command)

    def on_update(self, update: dict[str, Any]) -> Produced:
        """A ``tool_call`` or ``tool_call_update``."""
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return []
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = _Call()
            if call_id in self._denied:
                self._denied.discard(call_id)
                call.denied = True
        elif call.done:
            return []
        status = update.get("status")
        terminal = status in _TERMINAL
        self._merge(call, update, terminal)
        produced: Produced = []
        if call.kind == "execute" and not call.started and (call.command is not None or terminal):
            call.started = True
            produced.append(("command.started", self._started(call, call_id)))
        if terminal:
            call.done = True
            del self._calls[call_id]
            self._finish(call, call_id, update, status == "completed", produced)
        return produced

    def _merge(self, call: _Call, update: dict[str, Any], terminal: bool) -> None:
        kind = update.get("kind")
        if isinstance(kind, str):
            call.kind = kind
        title = update.get("title")
        if isinstance(title, str):
            call.title = title
        raw_input = update.get("rawInput")
        if isinstance(raw_input, dict) and raw_input and call.edited is None:  # an edited input stays what ran
            call.raw_input = raw_input
        locations = update.get("locations")
        if locations:
            for location in locations:
                path = location.get("path") if isinstance(location, dict) else None
                if isinstance(path, str) and path not in call.paths:
                    call.paths.append(path)
        content = update.get("content")
        if content:
            for item in content:
                if isinstance(item, dict) and item.get("type") == "diff":
                    self._note_diff(call, item, terminal)
        meta = update.get("_meta")
        if isinstance(meta, dict):
            baton = meta.get("baton")
            if isinstance(baton, dict):
                tool = baton.get("tool_name")
                if isinstance(tool, str) and tool:
                    call.tool = tool
                change = baton.get("change")
                if change in _DIFF_KINDS:
                    call.change = change
                command = baton.get("command")
                if command and call.command is None:
                    call.command = command_string(command)
            if call.tool is None:
                claude = meta.get("claudeCode")  # claude-agent-acp names its tools here
                if isinstance(claude, dict) and isinstance(claude.get("toolName"), str):
                    call.tool = claude["toolName"]
        if call.command is None and call.raw_input is not None and call.kind == "execute":
            call.command = _command_of(call.raw_input)

    @staticmethod
    def _note_diff(call: _Call, item: dict[str, Any], terminal: bool) -> None:
        path = item.get("path")
        if not isinstance(path, str) or (path in call.changes and not terminal):
            return
        meta = item.get("_meta")
        declared = meta.get("kind") if isinstance(meta, dict) else None
        if declared in _DIFF_KINDS:
            call.changes[path] = declared
        else:
            call.changes[path] = "add" if item.get("oldText") is None else "modify"
        old, new = item.get("oldText"), item.get("newText")
        call.diffs[path] = {
            "old_text": truncate_output(old)[0] if isinstance(old, str) else None,
            "new_text": truncate_output(new)[0] if isinstance(new, str) else "",
        }
        if path not in call.paths:
            call.paths.append(path)

    def _started(self, call: _Call, call_id: str) -> dict[str, Any]:
        data = {"command": self._command(call), "tool": self._tool(call), "tool_call_id": call_id}
        if call.edited is not None:
            data.update(call.edited.command_fields())
        return data

    def _finish(self, call: _Call, call_id: str, update: dict[str, Any], completed: bool, out: Produced) -> None:
        kind = call.kind
        if kind == "execute":
            self._command_finished(call, call_id, update, out)
        elif not completed:
            return
        elif kind in _READS:
            paths = call.paths or ([self.cwd] if kind == "search" and self.cwd else [])
            pattern = call.raw_input.get("pattern") if call.raw_input else None
            for path in paths:
                data = self._paths(path)
                if isinstance(pattern, str):
                    data["pattern"] = pattern
                data["tool"] = self._tool(call)
                data["tool_call_id"] = call_id
                if call.edited is not None:
                    data.update(call.edited.input_fields())
                out.append(("file.read", data))
        elif kind in _CHANGES:
            # One event a file, however the agent spelt its path (Kilo: absolute in the permission
            # request, ``./name`` in its updates): the spellings' change and diff are merged.
            spellings: dict[str, list[str]] = {}
            for path in call.paths:
                spellings.setdefault(self._paths(path)["abs_path"], []).append(path)
            for paths in spellings.values():
                data = self._paths(paths[0])
                if kind != "edit":
                    data["change"] = kind
                else:
                    known = [call.changes[path] for path in paths if path in call.changes]
                    data["change"] = call.change or (known[0] if known else "unknown")
                data["tool"] = self._tool(call)
                data["tool_call_id"] = call_id
                if call.edited is not None:
                    data.update(call.edited.input_fields())
                diffs = [call.diffs[path] for path in paths if path in call.diffs]
                if diffs:
                    data["diff"] = diffs[0]
                out.append(("file.changed", data))

    def _command_finished(self, call: _Call, call_id: str, update: dict[str, Any], out: Produced) -> None:
        command = self._command(call)
        is_error = update.get("status") == "failed"
        output = _output_text(update)
        exit_code = _exit_code(update, output, is_error)
        shown, truncated = truncate_output(output)
        data: dict[str, Any] = {
            "command": command,
            "tool_call_id": call_id,
            "is_error": is_error,
            "denied": call.denied,
        }
        if exit_code is not None:
            data["exit_code"] = exit_code
        data["output"] = shown
        data["output_truncated"] = truncated
        if call.edited is not None:
            data.update(call.edited.command_fields())
        out.append(("command.finished", data))
        runners = find_test_runners(command) if not call.denied else ()
        if runners:
            verdict = judge_test_run(runners, output, is_error=is_error, exit_code=exit_code)
            result: dict[str, Any] = {"command": command, "tool_call_id": call_id, "passed": verdict.passed}
            if verdict.framework is not None:
                result["framework"] = verdict.framework
            if call.edited is not None:
                result.update(call.edited.command_fields())
            out.append(("test.result", result))

    def _command(self, call: _Call) -> str:
        return call.command if call.command is not None else (call.title or "")

    @staticmethod
    def _tool(call: _Call) -> str | None:
        return call.tool or call.title or call.kind

    def _paths(self, path: str) -> dict[str, Any]:
        cwd = self.cwd
        if not path.startswith("/"):
            absolute = posixpath.normpath(posixpath.join(cwd, path)) if cwd else path
        else:
            absolute = posixpath.normpath(path)
        relative = absolute
        if cwd:
            if absolute == cwd:
                relative = "."
            elif absolute.startswith(cwd) and absolute[len(cwd)] == "/":
                relative = absolute[len(cwd) + 1 :]
            elif cwd == "/":
                relative = absolute[1:]
        return {"path": relative, "abs_path": absolute}


def _command_of(raw_input: dict[str, Any] | None) -> str | None:
    command = (raw_input or {}).get("command") or (raw_input or {}).get("cmd")
    return command_string(command) if isinstance(command, str | list) and command else None


def truncate_output(text: str) -> tuple[str, bool]:
    """At most 64 KiB of UTF-8: the first and last 32 KiB with a marker between them."""
    if len(text) <= OUTPUT_LIMIT // 4:
        return text, False
    data = text.encode()
    if len(data) <= OUTPUT_LIMIT:
        return text, False
    half = OUTPUT_LIMIT // 2
    marker = f"\n… [{len(data) - OUTPUT_LIMIT + 64} bytes omitted] …\n".encode()
    tail = OUTPUT_LIMIT - half - 64
    shown = data[:half] + marker + data[len(data) - tail :]
    assert len(shown) <= OUTPUT_LIMIT
    return shown.decode(errors="ignore"), True


def _output_text(update: dict[str, Any]) -> str:
    meta = update.get("_meta")
    baton = meta.get("baton") if isinstance(meta, dict) else None
    if isinstance(baton, dict) and isinstance(baton.get("output"), str):  # the agent's annotation
        return str(baton["output"])
    content = update.get("content")
    if content:
        texts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "content":
                block = item.get("content")
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    texts.append(block["text"])
        if texts:
            return "\n".join(texts)
    raw = update.get("rawOutput")
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        for key in ("formatted_output", "aggregated_output", "output"):
            if isinstance(raw.get(key), str):
                return str(raw[key])
        parts = [raw[key] for key in ("stdout", "stderr") if isinstance(raw.get(key), str) and raw[key]]
        return "\n".join(parts)
    return ""


def _exit_code(update: dict[str, Any], output: str, is_error: bool) -> int | None:
    meta = update.get("_meta")
    baton = meta.get("baton") if isinstance(meta, dict) else None
    if isinstance(baton, dict) and isinstance(baton.get("exit_code"), int):
        return int(baton["exit_code"])
    raw = update.get("rawOutput")
    if isinstance(raw, dict):
        for key in ("exit_code", "exitCode"):
            if isinstance(raw.get(key), int) and not isinstance(raw.get(key), bool):
                return int(raw[key])
    return exit_code_from_text(output) if is_error else None
