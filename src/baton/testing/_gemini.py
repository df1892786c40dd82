"""The Gemini API on the wire, as Gemini CLI uses it: reading requests, writing replies.

``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` streamed as server-sent events
(``data: {"candidates": [{"content": {"role": "model", "parts": [...]}, "finishReason"}],
"usageMetadata"}``), and ``…:generateContent`` answered with one such object. Scenarios name
Claude's tools; here they become Gemini CLI's (docs/scenarios.md):

- ``Bash {command}`` → ``run_shell_command {command, description}``;
- ``Read {file_path}`` → ``read_file {file_path}``;
- ``Write {file_path, content}`` → ``write_file {file_path, content}``;
- ``Edit {file_path, old_string, new_string}`` → ``replace {file_path, old_string, new_string}``;
- an MCP tool ``mcp__SERVER__TOOL`` → the name the request declares it by;
- any other name is sent as a function call of that name with the input as arguments.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from typing import Any

from baton.testing._scenario import Failure, TextBlock, ToolCall
from baton.testing._selection import Conversation, Reply, offered_mcp_tool

__all__ = [
    "MODELS_PREFIX",
    "error_body",
    "for_offered_tools",
    "is_gemini_path",
    "read_conversation",
    "response_json",
    "sse_events",
]

MODELS_PREFIX = "/v1beta/models/"

# Gemini CLI's session context lists the workspace: "- **Workspace Directories:**\n  - /path".
_CWD = re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(/[^\s]+)")
# User messages Gemini CLI adds (its session context), not typed by a user.
_CONTEXT_MARKERS = ("<session_context>", "This is the Gemini CLI", "<state_snapshot>")
_FINISH = {"end_turn": "STOP", "tool_use": "STOP", "max_tokens": "MAX_TOKENS"}
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Invalid request"),
    401: ("UNAUTHENTICATED", "API key not valid"),
    403: ("PERMISSION_DENIED", "Permission denied"),
    404: ("NOT_FOUND", "Not found"),
    413: ("INVALID_ARGUMENT", "Request too large"),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted"),
    500: ("INTERNAL", "An internal error has occurred"),
    529: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
}


def is_gemini_path(path: str) -> bool:
    return path.startswith(MODELS_PREFIX) and path.endswith((":streamGenerateContent", ":generateContent"))


def read_conversation(body: dict[str, Any]) -> Conversation:
    """Prompts, function responses after the latest prompt (one group per message), the cwd, tools."""
    prompts: list[str] = []
    groups: list[list[str]] = []
    cwd: str | None = None
    for content in body.get("contents") or []:
        if not isinstance(content, dict) or content.get("role") != "user":
            continue
        parts = [part for part in content.get("parts") or [] if isinstance(part, dict)]
        results = [_response_text(part["functionResponse"]) for part in parts if "functionResponse" in part]
        text = "\n".join(str(part["text"]) for part in parts if isinstance(part.get("text"), str))
        if results:
            groups.append(results)
            continue
        found = _CWD.search(text)
        if found and cwd is None:
            cwd = found.group(1)
        if text.strip() and not any(marker in text for marker in _CONTEXT_MARKERS):
            prompts.append(text.strip())
            groups = []
    declared = any(tool.get("functionDeclarations") for tool in body.get("tools") or [] if isinstance(tool, dict))
    return Conversation(
        offers_tools=declared, prompts=tuple(prompts), result_groups=tuple(tuple(g) for g in groups), cwd=cwd
    )


def for_offered_tools(reply: Reply, body: dict[str, Any]) -> Reply:
    """The reply with each MCP tool ``mcp__SERVER__TOOL`` renamed to the name the request declares
    it by."""
    offered = {
        (None, str(declaration.get("name")))
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        for declaration in tool.get("functionDeclarations") or []
        if isinstance(declaration, dict)
    }
    content: list[TextBlock | ToolCall] = []
    for block in reply.content:
        found = offered_mcp_tool(block.name, offered) if isinstance(block, ToolCall) else None
        content.append(ToolCall(found[1], block.input) if isinstance(block, ToolCall) and found else block)
    return dataclasses.replace(reply, content=tuple(content))


def response_json(reply: Reply, model: str) -> dict[str, Any]:
    """The whole answer as one ``GenerateContentResponse``."""
    parts = [_part(block) for block in reply.content]
    return _chunk(parts, reply, model, final=True)


def sse_events(reply: Reply, model: str) -> Iterator[bytes]:
    """The streaming answer: one chunk per text block or call, the last with finishReason and usage."""
    parts = [_part(block) for block in reply.content] or [{"text": ""}]
    for index, part in enumerate(parts):
        chunk = _chunk([part], reply, model, final=index == len(parts) - 1)
        yield b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\r\n\r\n"


def error_body(failure: Failure) -> tuple[int, dict[str, Any]]:
    status = failure.status or 500
    kind, message = _ERRORS.get(status, _ERRORS[500])
    return status, {"error": {"code": status, "message": failure.message or message, "status": kind}}


def _chunk(parts: list[dict[str, Any]], reply: Reply, model: str, *, final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if final:
        candidate["finishReason"] = _FINISH.get(reply.stop_reason, "STOP")
        prompt_tokens = reply.usage.get("input_tokens", 0)
        output_tokens = reply.usage.get("output_tokens", 0)
        chunk["usageMetadata"] = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
            "cachedContentTokenCount": reply.usage.get("cache_read_input_tokens", 0),
        }
    return chunk


def _part(block: TextBlock | ToolCall) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"text": block.text}
    name, args = block.name, dict(block.input)
    if name == "Bash":
        name = "run_shell_command"
        args = {"command": str(args.get("command", "")), "description": str(args.get("description", "run"))}
    elif name == "Read":
        name, args = "read_file", {"file_path": args.get("file_path")}
    elif name == "Write":
        name, args = "write_file", {"file_path": args.get("file_path"), "content": args.get("content", "")}
    elif name == "Edit":
        name = "replace"
        args = {key: args.get(key) for key in ("file_path", "old_string", "new_string")}
    return {"functionCall": {"name": name, "args": args}}


def _response_text(response: Any) -> str:
    if not isinstance(response, dict):
        return ""
    inner = response.get("response")
    if isinstance(inner, dict):
        for key in ("output", "content", "error"):
            if isinstance(inner.get(key), str):
                return str(inner[key])
        return json.dumps(inner)
    return str(inner or "")
