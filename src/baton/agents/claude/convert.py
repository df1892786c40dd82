"""Claude SDK stream-json messages → ACP ``session/update`` updates (pure, no I/O).

One :class:`ClaudeConverter` per session. :meth:`ClaudeConverter.convert` takes one message
exactly as Claude Code prints it (a parsed JSON line) and returns the ACP updates it carries,
as plain dicts in ACP's JSON wire format (the value of ``params.update``). Every update keeps
the message that caused it in ``_meta.baton.source`` (by reference, never copied).

What becomes what (docs/internals.md "ACP updates produced by baton's Claude adapter"):

- ``assistant`` text / thinking blocks → ``agent_message_chunk`` / ``agent_thought_chunk``;
  ``tool_use`` → ``tool_call`` (``TodoWrite`` → ``plan`` instead), once per ``tool_use_id``
  while the call is open: the adapter may announce a call from its permission hook before the
  stream shows it, and the stream's copy is then not announced again.
- ``user`` ``tool_result`` blocks → ``tool_call_update`` (matched by ``tool_use_id``, so results
  may come in any order); user text → ``user_message_chunk``.
- ``stream_event`` ``text_delta`` / ``thinking_delta`` → chunks at once.
- everything else (``system/*``, ``result``, ``rate_limit_event``, control messages, the other
  stream events) → nothing; the adapter turns ``result`` into ``_baton/usage`` with
  :func:`usage_params`.

**Partial messages.** With partial messages on, Claude prints each text or thinking block
twice: as ``text_delta`` stream events, then whole in an ``assistant`` message with the same
message id. The deltas are emitted as they come; a whole block whose message id streamed a
block of the same type is then matched to the first such streamed block and only the part the
deltas did not cover (normally nothing) is emitted. Tool calls always come from the
``assistant`` message (``input_json_delta`` events are ignored), since only it has the whole
input.
"""

from __future__ import annotations

import re
from typing import Any

from baton.agents.claude._result import is_error_result, stop_reason_for, usage_params
from baton.agents.claude._tools import SHELL_TOOLS, absolute, describe_tool

__all__ = ["ClaudeConverter", "is_error_result", "stop_reason_for", "usage_params"]

_EXIT_CODE = re.compile(r"(?:Error: )?Exit code (-?\d+)")
_PLAN_STATUSES = frozenset({"pending", "in_progress", "completed"})
_TOOL_USE_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_DELTA_KINDS = {
    "text_delta": ("text", "agent_message_chunk"),
    "thinking_delta": ("thinking", "agent_thought_chunk"),
}
# Message ids with streamed blocks still waiting for their whole ``assistant`` copy; older ones
# are dropped (an interrupted message never sends its copy).
_MAX_STREAMED_MESSAGES = 64


class ClaudeConverter:
    """Per-session state: open tool calls by ``tool_use_id`` and streamed blocks by message id."""

    __slots__ = ("_current_message", "_streamed", "_tools", "cwd")

    def __init__(self, cwd: str) -> None:
        self.cwd = absolute(cwd, "/")
        self._tools: dict[str, str] = {}
        # message id → {block index: (block type, text parts)}, in block order
        self._streamed: dict[str, dict[Any, tuple[str, list[str]]]] = {}
        self._current_message: str | None = None

    def convert(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        kind = msg.get("type")
        if kind == "stream_event":
            return self._stream_event(msg)
        if kind == "assistant":
            return self._assistant(msg)
        if kind == "user":
            return self._user(msg)
        return []

    # -- partial messages -------------------------------------------------------------------

    def _stream_event(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        event = msg.get("event")
        if not isinstance(event, dict):
            return []
        event_type = event.get("type")
        if event_type == "content_block_delta":
            delta = event.get("delta")
            if not isinstance(delta, dict):
                return []
            kinds = _DELTA_KINDS.get(delta.get("type"))  # type: ignore[arg-type]
            if kinds is None:
                return []
            block_type, session_update = kinds
            text = delta.get(block_type)
            if not isinstance(text, str) or not text:
                return []
            message_id = msg.get("api_message_id") or self._current_message
            if message_id:
                self._remember_delta(message_id, event.get("index"), block_type, text)
            return [_chunk(session_update, text, msg)]
        if event_type == "message_start":
            message = event.get("message")
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                self._current_message = message["id"]
        return []

    def _remember_delta(self, message_id: str, index: Any, block_type: str, text: str) -> None:
        blocks = self._streamed.get(message_id)
        if blocks is None:
            if len(self._streamed) >= _MAX_STREAMED_MESSAGES:
                del self._streamed[next(iter(self._streamed))]
            blocks = self._streamed[message_id] = {}
        block = blocks.get(index)
        if block is None or block[0] != block_type:
            blocks[index] = (block_type, [text])
        else:
            block[1].append(text)

    def _unstreamed_part(self, message_id: Any, block_type: str, text: str) -> str:
        """The part of a whole block that its stream deltas did not already emit."""
        blocks = self._streamed.get(message_id) if isinstance(message_id, str) else None
        if not blocks:
            return text
        for index, (streamed_type, parts) in blocks.items():
            if streamed_type == block_type:
                del blocks[index]
                if not blocks:
                    del self._streamed[message_id]
                streamed = "".join(parts)
                return text[len(streamed) :] if text.startswith(streamed) else ""
        return text

    # -- whole messages ---------------------------------------------------------------------

    def _assistant(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        message = msg.get("message")
        if not isinstance(message, dict):
            return []
        content = message.get("content")
        if not isinstance(content, list):
            return []
        updates: list[dict[str, Any]] = []
        streamed = self._streamed
        for block in content:
            block_type = block.get("type")
            if block_type == "text" or block_type == "thinking":
                text = block.get(block_type)
                if not isinstance(text, str):
                    continue
                if streamed:
                    text = self._unstreamed_part(message.get("id"), block_type, text)
                if text:
                    kind = "agent_message_chunk" if block_type == "text" else "agent_thought_chunk"
                    updates.append(_chunk(kind, text, msg))
            elif block_type in _TOOL_USE_TYPES:
                update = self._tool_call(block, msg)
                if update is not None:
                    updates.append(update)
        return updates

    def _tool_call(self, block: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any] | None:
        tool_id = block.get("id")
        name = block.get("name")
        name = name if isinstance(name, str) else ""
        tool_input = block.get("input")
        if not isinstance(tool_input, dict):
            tool_input = {}
        if isinstance(tool_id, str):
            if tool_id in self._tools:
                return None  # already announced (the adapter's hook can announce a call first)
            self._tools[tool_id] = name
        if name == "TodoWrite":
            return _plan(tool_input, msg)
        view = describe_tool(name, tool_input, self.cwd)
        meta: dict[str, Any] = {"source": msg, "tool_name": name}
        if view.command is not None:
            meta["command"] = view.command
        parent = msg.get("parent_tool_use_id")
        if parent:
            meta["parent_tool_use_id"] = parent
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_id,
            "title": view.title,
            "kind": view.kind,
            "status": "pending",
            "locations": view.locations,
            "rawInput": tool_input,
            "content": view.content,
            "_meta": {"baton": meta},
        }

    def _user(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        message = msg.get("message")
        if not isinstance(message, dict):
            return []
        content = message.get("content")
        if isinstance(content, str):
            return [_chunk("user_message_chunk", content, msg)] if content else []
        if not isinstance(content, list):
            return []
        results = sum(1 for block in content if block.get("type") == "tool_result")
        # ``tool_use_result`` describes the message's one tool result; with several it is ambiguous
        tool_use_result = msg.get("tool_use_result") if results == 1 else None
        updates: list[dict[str, Any]] = []
        for block in content:
            block_type = block.get("type")
            if block_type == "tool_result":
                update = self._tool_result(block, msg, tool_use_result)
                if update is not None:
                    updates.append(update)
            elif block_type == "text":
                text = block.get("text")
                if isinstance(text, str) and text:
                    updates.append(_chunk("user_message_chunk", text, msg))
        return updates

    def _tool_result(self, block: dict[str, Any], msg: dict[str, Any], tool_use_result: Any) -> dict[str, Any] | None:
        tool_id = block.get("tool_use_id")
        name = self._tools.pop(tool_id, None) if isinstance(tool_id, str) else None
        if name == "TodoWrite":
            return None  # its plan was the whole story
        is_error = block.get("is_error") is True
        raw_content = block.get("content")
        text = _result_text(raw_content)
        meta: dict[str, Any] = {"source": msg, "tool_name": name, "is_error": is_error}
        if name in SHELL_TOOLS:
            exit_code = _exit_code(text, is_error, tool_use_result)
            if exit_code is not None:
                meta["exit_code"] = exit_code
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "content", "content": {"type": "text", "text": text}})
        if name == "Write" and isinstance(tool_use_result, dict) and tool_use_result.get("type") == "update":
            content.append(_overwrite_diff(tool_use_result, self.cwd))
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_id,
            "status": "failed" if is_error else "completed",
            "rawOutput": raw_content if tool_use_result is None else tool_use_result,
            "content": content,
            "_meta": {"baton": meta},
        }


def _chunk(session_update: str, text: str, msg: dict[str, Any]) -> dict[str, Any]:
    return {
        "sessionUpdate": session_update,
        "content": {"type": "text", "text": text},
        "_meta": {"baton": {"source": msg}},
    }


def _plan(tool_input: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
    todos = tool_input.get("todos")
    entries = []
    for todo in todos if isinstance(todos, list) else ():
        if not isinstance(todo, dict):
            continue
        status = todo.get("status")
        entries.append(
            {
                "content": str(todo.get("content", "")),
                "priority": "medium",
                "status": status if status in _PLAN_STATUSES else "pending",
            }
        )
    return {
        "sessionUpdate": "plan",
        "entries": entries,
        "_meta": {"baton": {"source": msg, "tool_name": "TodoWrite"}},
    }


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts)
    return ""


def _exit_code(text: str, is_error: bool, tool_use_result: Any) -> int | None:
    """Claude reports a non-zero exit only in the error text ("Exit code 2\\n…")."""
    if is_error:
        match = _EXIT_CODE.match(text)
        return int(match.group(1)) if match else None
    if isinstance(tool_use_result, dict) and tool_use_result.get("interrupted") is False:
        return 0
    return None


def _overwrite_diff(tool_use_result: dict[str, Any], cwd: str) -> dict[str, Any]:
    """A Write over an existing file: the result knows the old text the proposal could not."""
    path = tool_use_result.get("filePath")
    original = tool_use_result.get("originalFile")
    new = tool_use_result.get("content")
    return {
        "type": "diff",
        "path": absolute(path, cwd) if isinstance(path, str) else "",
        "oldText": original if isinstance(original, str) else "",
        "newText": new if isinstance(new, str) else "",
    }
