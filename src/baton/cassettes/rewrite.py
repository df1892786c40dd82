"""A recorded answer made fit for the replaying run: its pieces regrouped, its paths rewritten.

A streamed answer is cut into server-sent events (each timed by the piece it ended in), and
consecutive deltas of one block are merged into one event before the paths are rewritten: the
real APIs cut a tool's JSON input anywhere, a path included (Anthropic ``input_json_delta`` and
``text_delta`` per ``index``; Responses ``response.output_text.delta`` and
``response.function_call_arguments.delta`` per ``item_id``). Then every occurrence of the
recorded run's workspace and agent home becomes the replaying run's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["replay_events"]

_ANTHROPIC_DELTAS = {"text_delta": "text", "input_json_delta": "partial_json"}
_RESPONSES_DELTAS = frozenset({"response.output_text.delta", "response.function_call_arguments.delta"})


def replay_events(chunks: Iterable[tuple[float, bytes]], pairs: list[tuple[str, str]]) -> list[tuple[float, bytes]]:
    """(time, event) for a streamed answer's pieces, deltas merged, ``pairs`` (recorded, replaying) replaced."""
    events: list[tuple[float, bytes]] = []
    buffer = b""
    at = 0.0
    for at, data in chunks:
        buffer += data
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            events.append((at, event + b"\n\n"))
    if buffer:
        events.append((at, buffer))
    merged = _merged(events)
    return [(at, _replaced(event, pairs)) for at, event in merged]


def _replaced(data: bytes, pairs: list[tuple[str, str]]) -> bytes:
    for recorded, replaying in pairs:
        data = data.replace(recorded.encode(), replaying.encode())
    return data


def _merged(events: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    out: list[tuple[float, bytes]] = []
    pending: tuple[float, str, str, dict[str, Any], str] | None = None  # at, event name, key, data, field
    for at, raw in events:
        parsed = _parse(raw)
        delta = _delta_of(parsed) if parsed is not None else None
        if pending is not None and delta is not None and delta[:2] == (pending[1], pending[2]):
            assert parsed is not None
            _append(pending[3], delta[2], _field_value(parsed[1], delta[2]))
            pending = (at, pending[1], pending[2], pending[3], pending[4])
            continue
        if pending is not None:
            out.append((pending[0], _event(pending[1], pending[3])))
            pending = None
        if delta is not None and parsed is not None:
            pending = (at, delta[0], delta[1], parsed[1], delta[2])
        else:
            out.append((at, raw))
    if pending is not None:
        out.append((pending[0], _event(pending[1], pending[3])))
    return out


def _parse(raw: bytes) -> tuple[str, dict[str, Any]] | None:
    name, data = "", None
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            if data is not None:
                return None  # multi-line data: left as it is
            data = line[5:].strip()
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return (name, value) if isinstance(value, dict) else None


def _delta_of(parsed: tuple[str, dict[str, Any]]) -> tuple[str, str, str] | None:
    """(event name, the block it extends, the path of its text) for a mergeable delta."""
    name, data = parsed
    kind = data.get("type")
    if kind == "content_block_delta" and isinstance(data.get("delta"), dict):
        field = _ANTHROPIC_DELTAS.get(str(data["delta"].get("type")))
        return (name, f"{data.get('index')}/{data['delta'].get('type')}", f"delta.{field}") if field else None
    if kind in _RESPONSES_DELTAS and isinstance(data.get("delta"), str):
        return (name, f"{kind}/{data.get('item_id')}/{data.get('output_index')}/{data.get('content_index')}", "delta")
    return None


def _field_value(data: dict[str, Any], path: str) -> str:
    value: Any = data
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, str) else ""


def _append(data: dict[str, Any], path: str, more: str) -> None:
    *parents, last = path.split(".")
    target = data
    for part in parents:
        target = target[part]
    target[last] = str(target.get(last) or "") + more


def _event(name: str, data: dict[str, Any]) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
