"""What a run's branch commit says: the task, the agent's last message, what was left out, the trailer.

::

    <the prompt's first line, at most 72 characters>

    <the whole prompt, when it is longer than that line>

    <the agent's last message>

    Left out (not in the run's snapshots):
    - .env (secret)

    Baton-Run: run_01…
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from baton.events.entry import LogEntry

__all__ = ["TRAILER", "commit_message", "last_agent_message", "left_out", "prompt_of"]

TRAILER: Final = "Baton-Run"
_SUBJECT_MAX: Final = 72
_BODY_MAX: Final = 16 * 1024  # characters of the agent's message kept in the commit
_KEPT_REASONS: Final = frozenset({"ignored"})  # what the user's .gitignore leaves out is not news


def prompt_of(request: Any, entries: Iterable[LogEntry]) -> str:
    """The task as the user gave it: ``runs.request.prompt``, else ``_baton/run_started``'s."""
    if isinstance(request, dict) and isinstance(request.get("prompt"), str):
        return str(request["prompt"])
    for entry in entries:
        if entry["method"] == "_baton/run_started":
            prompt = (entry["payload"].get("params") or {}).get("prompt")
            if isinstance(prompt, str):
                return prompt
    return ""


def last_agent_message(entries: Iterable[LogEntry]) -> str:
    """The agent's last answer: the ``result`` of the last ending ``_baton/status`` or turn's
    ``_baton/usage``, else the agent's text since the last prompt."""
    result: str | None = None
    chunks: list[str] = []
    for entry in entries:
        method = entry["method"]
        params = entry["payload"].get("params")
        params = params if isinstance(params, dict) else {}
        if method == "session/prompt" and entry["direction"] == "to_agent" and "prompt" in params:
            chunks, result = [], None
        elif method == "session/update":
            update = params.get("update")
            if isinstance(update, dict) and update.get("sessionUpdate") == "agent_message_chunk":
                content = update.get("content")
                text = content.get("text") if isinstance(content, dict) else None
                if isinstance(text, str):
                    chunks.append(text)
        elif method in ("_baton/usage", "_baton/status") and isinstance(params.get("result"), str):
            result = params["result"]
    return result if result else "".join(chunks)


def left_out(snapshots: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The files the snapshots skipped (secrets, too large …; not what ``.gitignore`` ignores),
    each once, with the last reason given."""
    found: dict[str, str] = {}
    for snapshot in snapshots:
        for skipped in snapshot.get("skipped") or ():
            if isinstance(skipped, dict) and skipped.get("reason") not in _KEPT_REASONS:
                found[str(skipped.get("path"))] = str(skipped.get("reason"))
    return [{"path": path, "reason": reason} for path, reason in sorted(found.items())]


def commit_message(prompt: str, last_message: str, skipped: Sequence[dict[str, str]], run_id: str) -> str:
    text = prompt.strip()
    first = text.splitlines()[0].strip() if text else ""
    subject = first if len(first) <= _SUBJECT_MAX else first[: _SUBJECT_MAX - 1].rstrip() + "…"
    parts = [subject or f"baton run {run_id}"]
    if text and text != subject:
        parts.append(text)
    answer = last_message.strip()
    if answer:
        parts.append(answer if len(answer) <= _BODY_MAX else answer[:_BODY_MAX] + "\n[…]")
    if skipped:
        lines = [f"- {item['path']} ({item['reason']})" for item in skipped]
        parts.append("Left out (not in the run's snapshots):\n" + "\n".join(lines))
    parts.append(f"{TRAILER}: {run_id}")
    return "\n\n".join(parts) + "\n"
