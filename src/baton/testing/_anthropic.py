"""The Anthropic Messages API on the wire: reading requests, writing replies and errors.

Everything specific to Anthropic lives here; scenario logic is in ``_selection`` and the
HTTP plumbing in ``_server``, so an OpenAI Responses module can sit beside this one.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

from baton.testing._scenario import Failure, TextBlock, ToolCall
from baton.testing._selection import Conversation, Reply, offered_mcp_tool

__all__ = [
    "MESSAGES_PATH",
    "error_body",
    "message_json",
    "read_conversation",
    "sse_events",
]

MESSAGES_PATH = "/v1/messages"

_CWD = re.compile(r"Primary working directory: *(\S[^\n]*)")
# Claude Code's plan-mode reminder names the file the plan goes to.
_PLAN_FILE = re.compile(r"(?:create your plan at|A plan file already exists at) (/\S+?\.md)")
_OPENCODE_CWD = re.compile(r"<env>\s*\n\s*Working directory: *(\S[^\n]*)")  # OpenCode's environment block
# OpenCode offers lowercase tools with camelCase inputs; a scenario's Claude tools become those.
_OPENCODE_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "Bash": ("bash", {"command": "command", "description": "description"}),
    "Read": ("read", {"file_path": "filePath"}),
    "Write": ("write", {"file_path": "filePath", "content": "content"}),
    "Edit": ("edit", {"file_path": "filePath", "old_string": "oldString", "new_string": "newString"}),
}
_REMINDER = "<system-reminder>"
_CHUNK = 64  # characters per text or JSON delta: replies arrive in pieces, as from the real API

_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def read_conversation(body: dict[str, Any]) -> Conversation:
    """Prompts, tool results after the latest prompt, the working directory, tools offered."""
    prompts: list[str] = []
    groups: list[tuple[str, ...]] = []
    texts: list[str] = [_text_of(body.get("system"))]
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        texts.append(_text_of(content))
        if message.get("role") != "user":
            continue
        prompt, results = _read_user_content(content)
        if prompt:
            prompts.append(prompt)
            groups = []
        elif results:
            groups.append(results)
    found = _CWD.search("\n".join(texts)) or _OPENCODE_CWD.search("\n".join(texts))
    plan_file = _PLAN_FILE.search("\n".join(texts))
    return Conversation(
        offers_tools=bool(body.get("tools")),
        prompts=tuple(prompts),
        result_groups=tuple(groups),
        cwd=found.group(1).strip() if found else None,
        plan_file=plan_file.group(1) if plan_file else None,
    )


def for_offered_tools(reply: Reply, body: dict[str, Any]) -> Reply:
    """The reply with Claude's tools renamed to OpenCode's when the request offers those, and each
    MCP tool ``mcp__SERVER__TOOL`` to the name the request offers it by (OpenCode: ``SERVER_TOOL``)."""
    offered = {tool.get("name") for tool in body.get("tools") or () if isinstance(tool, dict)}
    opencode = "bash" in offered and "Bash" not in offered
    pairs = {(None, str(name)) for name in offered if name}
    content: list[TextBlock | ToolCall] = []
    for block in reply.content:
        found = offered_mcp_tool(block.name, pairs) if isinstance(block, ToolCall) else None
        if isinstance(block, ToolCall) and found is not None:
            block = ToolCall(found[1], block.input)
        elif isinstance(block, ToolCall) and opencode and block.name in _OPENCODE_TOOLS:
            name, keys = _OPENCODE_TOOLS[block.name]
            block = ToolCall(name, {keys[key]: value for key, value in block.input.items() if key in keys})
        content.append(block)
    return dataclasses.replace(reply, content=tuple(content))


def message_json(reply: Reply, *, model: str) -> dict[str, Any]:
    """The non-streaming answer: one ``message`` object."""
    return {
        "id": _message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(block) for block in reply.content],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": dict(reply.usage),
    }


def sse_events(reply: Reply, *, model: str) -> Iterator[bytes]:
    """The streaming answer, one encoded server-sent event at a time."""
    start = {**message_json(reply, model=model), "content": [], "stop_reason": None}
    start["usage"] = {**reply.usage, "output_tokens": 1}
    yield _event("message_start", message=start)
    yield _event("ping")
    for index, block in enumerate(reply.content):
        yield _event("content_block_start", index=index, content_block=_opening(block))
        for delta in _deltas(block):
            yield _event("content_block_delta", index=index, delta=delta)
        yield _event("content_block_stop", index=index)
    delta = {"stop_reason": reply.stop_reason, "stop_sequence": None}
    yield _event("message_delta", delta=delta, usage=dict(reply.usage))
    yield _event("message_stop")


def error_body(failure: Failure) -> tuple[int, dict[str, Any]]:
    """The status and body the provider answers for an injected HTTP failure."""
    status = failure.status or 500
    kind, message = _ERRORS.get(status, _ERRORS[500])
    body = {"type": "error", "error": {"type": kind, "message": failure.message or message}}
    return status, body | {"request_id": f"req_{uuid.uuid4().hex[:24]}"}


def _read_user_content(content: Any) -> tuple[str, tuple[str, ...]]:
    """A user message's own text (system reminders left out) and its tool results."""
    if isinstance(content, str):
        return ("" if content.lstrip().startswith(_REMINDER) else content.strip()), ()
    texts: list[str] = []
    results: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and not str(block.get("text", "")).lstrip().startswith(_REMINDER):
            texts.append(str(block.get("text", "")).strip())
        elif block.get("type") == "tool_result":
            results.append(_text_of(block.get("content")))
    return "\n".join(text for text in texts if text), tuple(results)


def _text_of(content: Any) -> str:
    """All text in a content value: a string, or blocks with ``text`` (nested in results too)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content")))
    return "\n".join(parts)


def _block_json(block: TextBlock | ToolCall) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    return {
        "type": "tool_use",
        "id": f"toolu_{uuid.uuid4().hex[:24]}",
        "name": block.name,
        "input": block.input,
    }


def _opening(block: TextBlock | ToolCall) -> dict[str, Any]:
    """A block as ``content_block_start`` announces it: empty, filled by the deltas."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": ""}
    return {"type": "tool_use", "id": _tool_use_id(), "name": block.name, "input": {}}


def _deltas(block: TextBlock | ToolCall) -> Iterator[dict[str, Any]]:
    if isinstance(block, TextBlock):
        for piece in _pieces(block.text):
            yield {"type": "text_delta", "text": piece}
        return
    yield {"type": "input_json_delta", "partial_json": ""}
    for piece in _pieces(json.dumps(block.input)):
        yield {"type": "input_json_delta", "partial_json": piece}


def _pieces(text: str) -> Iterator[str]:
    for offset in range(0, len(text), _CHUNK):
        yield text[offset : offset + _CHUNK]


def _event(name: str, **fields: Any) -> bytes:
    data = json.dumps({"type": name, **fields}, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()


def _tool_use_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"


def _message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"
