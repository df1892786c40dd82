"""The OpenAI Chat Completions API on the wire, as Qwen Code uses it: reading requests, writing replies.

``POST /v1/chat/completions`` (or ``/chat/completions``) streamed as server-sent events
(``data: {"object": "chat.completion.chunk", "choices": [{"delta": …, "finish_reason"}]}``, the
last chunk with ``usage``, then ``data: [DONE]``), or answered with one ``chat.completion``
object. Scenarios name Claude's tools; here they become the function the request offers for
them (docs/scenarios.md): the first of the candidate names below that is among the request's
``tools``, else the scenario's own name with its input as arguments:

- ``Bash {command}`` → ``run_shell_command {command, description}`` (Qwen Code);
- ``Read {file_path}`` → ``read_file {file_path}``, or ``view {path}`` (Copilot CLI);
- ``Write {file_path, content}`` → ``write_file {file_path, content}``, or ``create {path, file_text}``;
- ``Edit {file_path, old_string, new_string}`` → ``edit`` (Qwen Code; Copilot CLI's takes
  ``{path, old_str, new_str}``) or ``replace``;
- ``Glob`` / ``Grep {pattern, path}`` → ``glob`` / ``grep_search``;

a mapped call keeps only the arguments the offered function declares (``parameters.properties``);
an MCP tool ``mcp__SERVER__TOOL`` becomes the name the request offers it by (``offered_mcp_tool``),
its input unchanged.

A user message's text parts that are the agent's own context (``<system-reminder>`` …) are
not prompts; the working directory is read from the context ("working in the directory: …").
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

from baton.testing._scenario import Failure, TextBlock, ToolCall
from baton.testing._selection import Conversation, Reply, offered_mcp_tool

__all__ = ["CHAT_PATHS", "error_body", "read_conversation", "response_json", "sse_events"]

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")

# The working directory as the agents' system prompts or session context state it.
_CWD = (
    re.compile(r"working in the directory:?\s*(/[^\s'\"`]+)", re.IGNORECASE),
    re.compile(r"current working directory[^\n/]*?(/[^\s'\"`]+)", re.IGNORECASE),
    re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(/[^\s]+)"),
)
# User messages an agent adds itself (its session context, reminders), not typed by a user.
_CONTEXT_MARKERS = ("<session_context>", "This is the Qwen Code", "<system-reminder>", "<state_snapshot>")
_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
# Claude's tool → the functions an agent may offer for it, in order of preference.
_CANDIDATES: dict[str, tuple[str, ...]] = {
    "Bash": ("run_shell_command", "bash", "shell"),
    "Read": ("read_file", "view"),
    "Write": ("write_file", "create"),
    "Edit": ("edit", "replace", "search_replace"),
    "Glob": ("glob",),
    "Grep": ("grep_search", "grep"),
}
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


def _parts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(part["text"]) for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return []


def _text(content: Any) -> str:
    return "\n".join(_parts(content))


def _typed(content: Any) -> str:
    """What a user typed in a user message: its parts that are not the agent's own context."""
    return "\n".join(part for part in _parts(content) if not any(marker in part for marker in _CONTEXT_MARKERS))


def _offered(body: dict[str, Any]) -> dict[str, Any]:
    """The offered functions by name, each with its ``parameters`` schema."""
    names: dict[str, Any] = {}
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names[function["name"]] = function.get("parameters")
    return names


def read_conversation(body: dict[str, Any]) -> Conversation:
    """Prompts, tool results after the latest prompt (one group per assistant message), the cwd, tools."""
    prompts: list[str] = []
    groups: list[list[str]] = []
    cwd: str | None = None
    last_was_result = False
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        text = _text(message.get("content"))
        if role in ("system", "user") and cwd is None:
            for pattern in _CWD:
                found = pattern.search(text)
                if found:
                    cwd = found.group(1).rstrip(".,:;")
                    break
        if role == "user":
            typed = _typed(message.get("content"))
            if typed.strip():
                prompts.append(typed.strip())
                groups = []
            last_was_result = False
        elif role == "tool":
            if last_was_result and groups:
                groups[-1].append(text)
            else:
                groups.append([text])
            last_was_result = True
        elif role == "assistant":
            last_was_result = False
    return Conversation(
        offers_tools=bool(_offered(body)),
        prompts=tuple(prompts),
        result_groups=tuple(tuple(group) for group in groups),
        cwd=cwd,
    )


def _function(block: ToolCall, offered: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    args = dict(block.input)
    mcp = offered_mcp_tool(block.name, {(None, offer) for offer in offered})
    if mcp is not None:  # an MCP tool ``mcp__SERVER__TOOL``, named as the request offers it
        return mcp[1], args
    name = next((candidate for candidate in _CANDIDATES.get(block.name, ()) if candidate in offered), block.name)
    if block.name == "Bash":
        args = {"command": str(args.get("command", "")), "description": str(args.get("description", "run"))}
    elif block.name == "Read":
        args = {"file_path": args.get("file_path")}
    elif block.name == "Write":
        args = {"file_path": args.get("file_path"), "content": args.get("content", "")}
    elif block.name == "Edit":
        args = {key: args.get(key) for key in ("file_path", "old_string", "new_string")}
    elif block.name in ("Glob", "Grep") and name != block.name:
        args = {key: args[key] for key in ("pattern", "path", "glob") if key in args}
    schema = offered.get(name)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and "path" in properties and "file_path" not in properties:
        # Copilot CLI's view / create / edit: {path}, {path, file_text}, {path, old_str, new_str}.
        renames = {"file_path": "path", "content": "file_text", "old_string": "old_str", "new_string": "new_str"}
        args = {renames.get(key, key): value for key, value in args.items()}
    if isinstance(properties, dict) and "paths" in properties and "path" not in properties and "path" in args:
        args["paths"] = args.pop("path")  # Copilot CLI's grep
    if isinstance(properties, dict) and properties and name != block.name:
        # A mapped call keeps only what the function declares (Vibe's bash takes no description).
        args = {key: value for key, value in args.items() if key in properties}
    return name, args


def _tool_calls(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    offered = _offered(body)
    calls = []
    for block in reply.content:
        if isinstance(block, ToolCall):
            name, args = _function(block, offered)
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            )
    return calls


def _usage(reply: Reply) -> dict[str, Any]:
    prompt = reply.usage.get("input_tokens", 0)
    completion = reply.usage.get("output_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": reply.usage.get("cache_read_input_tokens", 0)},
    }


def _finish(reply: Reply, calls: list[dict[str, Any]]) -> str:
    return "tool_calls" if calls else _FINISH.get(reply.stop_reason, "stop")


def response_json(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The whole answer as one ``chat.completion``."""
    calls = _tool_calls(reply, body)
    text = "\n\n".join(block.text for block in reply.content if isinstance(block, TextBlock))
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "gpt-scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply, calls)}],
        "usage": _usage(reply),
    }


def sse_events(reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
    """The streaming answer: the role, one delta per text block, one per tool call, the finish with usage."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": str(body.get("model") or "gpt-scripted"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for block in reply.content:
        if isinstance(block, TextBlock):
            yield chunk({"content": block.text})
    calls = _tool_calls(reply, body)
    for index, call in enumerate(calls):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, _finish(reply, calls), usage=_usage(reply))
    yield b"data: [DONE]\n\n"


def error_body(failure: Failure) -> tuple[int, dict[str, Any]]:
    status = failure.status or 500
    kind, message = _ERRORS.get(status, _ERRORS[500])
    return status, {"error": {"message": failure.message or message, "type": kind, "param": None, "code": None}}
