"""Which recorded exchange answers a request: by normalized content, position breaking ties.

The normalized form of a request (``normalized_request``) is what is compared. It is the same
for the three providers:

- ``method`` and ``path`` (query included: ``?beta=true``);
- ``tools``: the names of the tools offered (Anthropic and Responses ``tools[].name``, Gemini
  ``functionDeclarations[].name``), in order; their schemas and descriptions are not compared;
- ``conversation``: ``messages`` (Anthropic), ``input`` (Responses) or ``contents`` (Gemini),
  without the agent's environment: ``role`` ``system`` or ``developer`` entries, and user
  messages that are the agent's own context (``<environment_context>``,
  ``<user_instructions>``, ``# AGENTS.md``, ``<INSTRUCTIONS>``, ``<session_context>``,
  ``This is the Gemini CLI``). The system prompt (``system``, ``instructions``,
  ``systemInstruction``) and every other field (``model``, ``metadata``, ``max_tokens`` …) are
  not compared: they carry the date, the OS, the git status and per-session ids.

Inside the conversation, keys that carry ids or cache hints are dropped (``id``,
``tool_use_id``, ``call_id``, ``cache_control``, ``signature``, ``encrypted_content``,
``thoughtSignature``), a string content is the same as one text block, text blocks left empty
are dropped, and in every string, in this order:

1. the run's workspace and agent home become ``<workspace>`` and ``<agent-home>`` (the recorded
   run's paths in the cassette, the replaying run's in the request);
2. ``<system-reminder>…</system-reminder>`` blocks are removed;
3. timestamps (``2026-12-02``, ``2026-12-02T04:05:06.789Z``, ``04:05:06``) become ``<time>``;
4. temporary paths (``/tmp/…``, ``/var/tmp/…``, ``/var/folders/…`` up to a space or quote)
   become ``<tmp>``;
5. tool-use and message ids (``toolu_…``, ``call_…``, ``fc_…``, ``msg_…``) become ``<id>``;
6. the volatile lines of tool outputs (``Wall time:``, ``Chunk ID:``, ``Process Group PGID:``)
   keep their label and lose their value.

Among the unanswered recorded exchanges with the same normalized form, the first by position
answers (Claude Code sends side requests concurrently: content decides, position only breaks
ties). Each recorded exchange answers once. A request with no match is a :class:`Mismatch`
with a unified diff against the first unanswered recorded exchange on the same path.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from baton.cassettes.format import Cassette, CassetteExchange, CassettePaths

__all__ = ["Matcher", "Mismatch", "normalized_request", "offers_tools"]

_DROPPED_KEYS = frozenset(
    {"id", "tool_use_id", "call_id", "cache_control", "signature", "encrypted_content", "thoughtSignature"}
)
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
    "<session_context>",
    "This is the Gemini CLI",
)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b|\b\d{1,2}:\d{2}:\d{2}\b"
)
_TEMP_PATH = re.compile(r"(?:/private)?(?:/tmp|/var/tmp|/var/folders)/[^\s\"'`<>)\]}]*")
_ID = re.compile(r"\b(?:toolu|srvtoolu|call|fc|msg|resp|rs)_[A-Za-z0-9_-]+")
_VOLATILE_LINE = re.compile(r"^(Wall time|Chunk ID|Process Group PGID):[^\n]*", re.MULTILINE)
_DIFF_LINES = 120


def normalized_request(method: str, path: str, body: Any, paths: CassettePaths) -> dict[str, Any]:
    """What matching compares (the rules are in this module's docstring)."""
    known = [(p, name) for p, name in ((paths.workspace, "<workspace>"), (paths.agent_home, "<agent-home>")) if p]
    known.sort(key=lambda pair: -len(pair[0]))
    form: dict[str, Any] = {"method": method.upper(), "path": _text(path, known)}
    if not isinstance(body, dict):
        form["body"] = None if body is None else _text(str(body), known)
        return form
    form["tools"] = _tool_names(body)
    conversation = next((body[key] for key in ("messages", "input", "contents") if key in body), None)
    if isinstance(conversation, str):
        conversation = [{"role": "user", "content": conversation}]
    if isinstance(conversation, list):
        form["conversation"] = [_value(m, known) for m in conversation if not _is_environment(m)]
    return form


def offers_tools(body: Any) -> bool:
    return isinstance(body, dict) and bool(_tool_names(body))


def _tool_names(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or ():
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("functionDeclarations"), list):
            names.extend(str(d.get("name")) for d in tool["functionDeclarations"] if isinstance(d, dict))
        else:
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def _is_environment(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    if message.get("role") in ("system", "developer"):
        return True
    return message.get("role") == "user" and _first_text(message).lstrip().startswith(_CONTEXT_PREFIXES)


def _first_text(message: dict[str, Any]) -> str:
    for key in ("content", "parts"):
        content = message.get(key)
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    return str(block["text"])
    return ""


def _value(value: Any, known: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _text(value, known)
    if isinstance(value, list):
        items = [_value(item, known) for item in value]
        return [item for item in items if not _empty_text(item)]
    if isinstance(value, dict):
        result = {key: _value(item, known) for key, item in value.items() if key not in _DROPPED_KEYS}
        if isinstance(result.get("content"), str) and result.get("role") in ("user", "assistant"):
            text = result["content"]
            result["content"] = [{"type": "text", "text": text}] if text else []
        return result
    return value


def _empty_text(item: Any) -> bool:
    return (
        isinstance(item, dict) and item.get("type") in ("text", "input_text") and not str(item.get("text", "")).strip()
    )


def _text(text: str, known: list[tuple[str, str]]) -> str:
    for path, name in known:
        text = text.replace(path, name)
    text = _REMINDER.sub("", text)
    text = _TIMESTAMP.sub("<time>", text)
    text = _TEMP_PATH.sub("<tmp>", text)
    text = _ID.sub("<id>", text)
    return _VOLATILE_LINE.sub(r"\1: <n>", text)


@dataclass(frozen=True)
class Mismatch:
    """A request no recorded exchange answers."""

    method: str
    path: str
    expected: CassetteExchange | None  # the first unanswered recorded exchange on that path
    diff: str  # unified diff of the normalized forms: ``-`` recorded, ``+`` sent
    side: bool  # the request offers no tools (a title or summary request)

    @property
    def message(self) -> str:
        if self.expected is None:
            head = f"{self.method} {self.path}: the cassette has no unanswered request for this path"
        else:
            head = (
                f"{self.method} {self.path} matches no recorded request; the diff is against recorded request "
                f"#{self.expected.position} (- recorded, + sent, normalized as docs/scenarios.md says)"
            )
        return head if not self.diff else f"{head}\n{self.diff}"


class Matcher:
    """The cassette's exchanges, each answering once; thread-safe."""

    def __init__(self, cassette: Cassette, paths: CassettePaths | None = None) -> None:
        self.cassette = cassette
        self.paths = paths or CassettePaths()
        self._lock = threading.Lock()
        self._forms = [
            normalized_request(e.method, e.path, e.body if e.body_text is None else e.body_text, cassette.paths)
            for e in cassette.exchanges
        ]
        self._keys = [_key(form) for form in self._forms]
        self._answered: set[int] = set()

    def bind(self, paths: CassettePaths) -> None:
        """The replaying run's paths (known once the run has its id)."""
        with self._lock:
            self.paths = paths

    def skip(self, positions: Iterable[int]) -> None:
        """Take exchanges as answered already (by an earlier execution of the replaying run)."""
        with self._lock:
            self._answered.update(p for p in positions if 0 <= p < len(self.cassette.exchanges))

    @property
    def unanswered(self) -> list[CassetteExchange]:
        with self._lock:
            return [e for e in self.cassette.exchanges if e.position not in self._answered]

    def match(self, method: str, path: str, body: Any) -> CassetteExchange | Mismatch:
        with self._lock:
            form = normalized_request(method, path, body, self.paths)
            key = _key(form)
            for index, exchange in enumerate(self.cassette.exchanges):
                if index not in self._answered and self._keys[index] == key:
                    self._answered.add(index)
                    return exchange
            expected = next(
                (
                    e
                    for i, e in enumerate(self.cassette.exchanges)
                    if i not in self._answered
                    and (e.method, e.path) == (method, form["path"])
                    and offers_tools(e.body) == offers_tools(body)
                ),
                None,
            )
            diff = "" if expected is None else _diff(self._forms[expected.position], form)
            return Mismatch(method, path, expected, diff, side=not offers_tools(body))

    def path_pairs(self) -> list[tuple[str, str]]:
        """(recorded path, replaying path) for the workspace and agent home, longest first."""
        return self.cassette.paths.pairs(self.paths)

    def rewrite(self, data: bytes) -> bytes:
        """A recorded response with the recorded run's paths replaced by the replaying run's."""
        for recorded, replaying in self.path_pairs():
            data = data.replace(recorded.encode(), replaying.encode())
        return data


def _key(form: dict[str, Any]) -> str:
    return json.dumps(form, sort_keys=True, ensure_ascii=False)


def _diff(expected: dict[str, Any], actual: dict[str, Any]) -> str:
    lines = difflib.unified_diff(_pretty(expected), _pretty(actual), "recorded", "sent", n=2, lineterm="")
    out: Sequence[str] = list(lines)
    if len(out) > _DIFF_LINES:
        out = [*out[:_DIFF_LINES], f"… {len(out) - _DIFF_LINES} more lines"]
    return "\n".join(out)


def _pretty(form: dict[str, Any]) -> list[str]:
    return json.dumps(form, sort_keys=True, indent=1, ensure_ascii=False).splitlines()
