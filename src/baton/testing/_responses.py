"""The OpenAI Responses API on the wire, as Codex uses it: reading requests, writing replies.

``POST /v1/responses`` streamed as server-sent events (``response.created``,
``response.output_item.added`` / ``…done``, ``response.output_text.delta``,
``response.completed`` with ``usage``; ``response.failed`` never, errors are HTTP statuses).
Scenarios name Claude's tools; here they become Codex's (docs/scenarios.md):

- ``Bash {command}`` → function call ``exec_command {"cmd": command}``;
- ``Read {file_path}`` → ``exec_command {"cmd": "cat <path>"}`` (Codex reports it as a read);
- ``Write {file_path, content}`` and ``Edit {file_path, old_string, new_string}`` → the
  ``apply_patch`` tool (a freeform custom tool call, or a function call when the request
  offers it as one) with an ``*** Add File`` / ``*** Update File`` patch;
- an MCP tool ``mcp__SERVER__TOOL`` is a function call ``TOOL`` in the namespace ``mcp__SERVER``
  when the request offers it so (Codex's namespace tools);
- any other name is sent as a function call of that name with the input as arguments.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import uuid
from collections.abc import Iterator
from typing import Any

from baton.testing._scenario import Failure, TextBlock, ToolCall
from baton.testing._selection import Conversation, Reply, offered_mcp_tool

__all__ = [
    "RESPONSES_PATH",
    "TOOL_RESULT_LATENCY",
    "answers_a_tool_result",
    "error_body",
    "read_conversation",
    "response_items",
    "sse_events",
]

RESPONSES_PATH = "/v1/responses"
# The least time the server takes to answer a request that ends with a tool's output, as a real
# model would: Codex may send a fast command's completion up to ~100 ms after handing its output
# to the model, and codex-acp drops whatever comes after the turn's end (docs/agents.md).
TOOL_RESULT_LATENCY = 0.3

_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
# User messages Codex adds around the prompt (context, instructions), not typed by a user.
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<INSTRUCTIONS>", "<turn_aborted>")
_RESULT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
# One delta per text block: codex-acp turns every delta into its own agent_message_chunk, and
# one message event per block keeps a scenario's runner events the same as with Claude.
_CHUNK = 1 << 20

_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("invalid_request_error", "Incorrect API key provided"),
    403: ("invalid_request_error", "You are not allowed to use this model"),
    404: ("invalid_request_error", "Not found"),
    413: ("invalid_request_error", "Request too large"),
    429: ("rate_limit_exceeded", "Rate limit reached"),
    500: ("server_error", "The server had an error while processing your request."),
    529: ("server_error", "The engine is currently overloaded, please try again later."),
}


def answers_a_tool_result(body: dict[str, Any]) -> bool:
    """Whether the request's last input item is a tool's output (the model answers a command)."""
    items = body.get("input")
    return (
        isinstance(items, list)
        and bool(items)
        and isinstance(items[-1], dict)
        and items[-1].get("type") in _RESULT_TYPES
    )


def read_conversation(body: dict[str, Any]) -> Conversation:
    """Prompts, tool outputs after the latest prompt (grouped by turn), the cwd, tools offered."""
    prompts: list[str] = []
    groups: list[list[str]] = []
    cwd: str | None = None
    last_was_result = False
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            text = _text_of(item.get("content"))
            found = _CWD.search(text)
            if found:
                cwd = found.group(1).strip()
            if text.strip() and not text.lstrip().startswith(_CONTEXT_PREFIXES):
                prompts.append(text.strip())
                groups = []
            last_was_result = False
        elif kind in _RESULT_TYPES:
            output = _output_text(item.get("output"))
            if last_was_result and groups:
                groups[-1].append(output)
            else:
                groups.append([output])
            last_was_result = True
        elif kind in _CALL_TYPES:
            last_was_result = False
    return Conversation(
        offers_tools=bool(body.get("tools")),
        prompts=tuple(prompts),
        result_groups=tuple(tuple(group) for group in groups),
        cwd=cwd,
    )


def response_items(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items of the reply (messages and tool calls), in order."""
    cwd = read_conversation(body).cwd
    patch_tool = _tool_type(body, "apply_patch")
    offered = _offered(body)
    items: list[dict[str, Any]] = []
    for block in reply.content:
        if isinstance(block, TextBlock):
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                }
            )
        else:
            items.append(_call_item(block, cwd, patch_tool, offered))
    return items


def sse_events(reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
    """The streaming answer, one encoded server-sent event at a time."""
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    model = str(body.get("model") or "gpt-scripted")
    base = {"id": response_id, "object": "response", "model": model}
    yield _event("response.created", response={**base, "status": "in_progress", "output": []})
    items = response_items(reply, body)
    for index, item in enumerate(items):
        if item["type"] == "message":
            yield _event("response.output_item.added", output_index=index, item={**item, "content": []})
            text = item["content"][0]["text"]
            for piece in [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)]:
                yield _event(
                    "response.output_text.delta", item_id=item["id"], output_index=index, content_index=0, delta=piece
                )
        else:
            yield _event("response.output_item.added", output_index=index, item=item)
        yield _event("response.output_item.done", output_index=index, item=item)
    completed = {**base, "status": "completed", "output": items, "usage": _usage(reply.usage)}
    yield _event("response.completed", response=completed)


def error_body(failure: Failure) -> tuple[int, dict[str, Any]]:
    """The status and body OpenAI answers for an injected HTTP failure."""
    status = failure.status or 500
    kind, message = _ERRORS.get(status, _ERRORS[500])
    return status, {"error": {"message": failure.message or message, "type": kind, "param": None, "code": None}}


def _call_item(
    call: ToolCall, cwd: str | None, patch_tool: str | None, offered: set[tuple[str | None, str]]
) -> dict[str, Any]:
    call_id = f"call_{uuid.uuid4().hex[:20]}"
    name, arguments = call.name, dict(call.input)
    patch: str | None = None
    mcp = offered_mcp_tool(name, offered)
    if mcp is not None:
        item = _function_call(call_id, mcp[1], arguments)
        return item if mcp[0] is None else {**item, "namespace": mcp[0]}
    if name == "Bash":
        name, arguments = "exec_command", {"cmd": str(arguments.get("command", ""))}
    elif name == "Read":
        name, arguments = "exec_command", {"cmd": "cat " + shlex.quote(_relative(arguments.get("file_path"), cwd))}
    elif name == "Write":
        lines = str(arguments.get("content", "")).splitlines()
        patch = _patch("Add File", arguments.get("file_path"), cwd, [f"+{line}" for line in lines])
    elif name == "Edit":
        old = [f"-{line}" for line in str(arguments.get("old_string", "")).splitlines()]
        new = [f"+{line}" for line in str(arguments.get("new_string", "")).splitlines()]
        patch = _patch("Update File", arguments.get("file_path"), cwd, ["@@", *old, *new])
    if patch is not None:
        if patch_tool == "function":
            return _function_call(call_id, "apply_patch", {"input": patch})
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{call_id}",
            "status": "completed",
            "call_id": call_id,
            "name": "apply_patch",
            "input": patch,
        }
    return _function_call(call_id, name, arguments)


def _function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def _patch(action: str, path: Any, cwd: str | None, body: list[str]) -> str:
    return "\n".join(["*** Begin Patch", f"*** {action}: {_relative(path, cwd)}", *body, "*** End Patch"]) + "\n"


def _relative(path: Any, cwd: str | None) -> str:
    text = str(path or "")
    if cwd and text.startswith(cwd.rstrip("/") + "/"):
        return posixpath.relpath(text, cwd)
    return text


def _offered(body: dict[str, Any]) -> set[tuple[str | None, str]]:
    """The tools the request offers as (namespace, name): a namespace's own tools under its name."""
    offered: set[tuple[str | None, str]] = set()
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        if tool.get("type") == "namespace":
            inner = [t.get("name") for t in tool.get("tools") or [] if isinstance(t, dict)]
            offered.update((tool["name"], name) for name in inner if isinstance(name, str))
        else:
            offered.add((None, tool["name"]))
    return offered


def _tool_type(body: dict[str, Any], name: str) -> str | None:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") == name:
            return str(tool.get("type"))
    return None


def _usage(usage: dict[str, int]) -> dict[str, Any]:
    input_tokens = usage.get("input_tokens", 0)
    output_tokens = usage.get("output_tokens", 0)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": usage.get("cache_read_input_tokens", 0)},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [block.get("text") for block in content or () if isinstance(block, dict)]
    return "\n".join(part for part in parts if isinstance(part, str))


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _text_of(output)
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or "")
    return ""


def _event(name: str, **fields: Any) -> bytes:
    data = json.dumps({"type": name, **fields}, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()
