"""A run's conversation, folded from its log: what a resumed agent needs to know.

``rebuild_conversation(entries)`` is pure: the same entries always give the same
conversation. It keeps user turns (``session/prompt`` requests and user chunks), agent text
merged across chunks, tool calls with their input and result matched by ``toolCallId`` from
the updates themselves (``rawInput``, ``rawOutput``, the result's text content), plans and the
latest usage. Replayed history (``_meta.baton.replay``) is skipped, and a compaction
(``_baton/compact_boundary``) starts the conversation over, since the agent's context did too.

The fold is incremental: ``Conversation.apply(entries)`` continues from where the
conversation stopped (``upto_seq``), and ``to_dict``/``from_dict`` store that point, so
resuming a long run folds only the entries logged since the stored state. ``trim`` bounds what
is kept to the newest items a rebuilt context can use (the first user turn and calls still
open always stay), so the stored state of a long run stays small; ``dropped_items`` counts
what it let go.

A call is *interrupted* when nothing ended it: no ``completed``/``failed`` update. A
``_baton/resume`` entry settles the calls it names (the agent was told about them), so a
second resume names only what the second interruption cut short. After a rebuilt-path resume
the next prompt carried the whole rebuilt transcript: the conversation keeps only the prompt
that ``_baton/resume`` names, so transcripts never nest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict, cast

from baton.events.entry import LogEntry

__all__ = ["STATE_VERSION", "TRIM_CALL_CHARS", "Conversation", "Item", "ToolCall", "rebuild_conversation"]

STATE_VERSION: Final = 1
TRIM_CALL_CHARS: Final = 8_000
_ENDED: Final = frozenset({"completed", "failed", "interrupted"})

ItemType = Literal["user", "agent", "tool_call", "plan", "summary"]


class Item(TypedDict):
    """One step of the conversation, in log order."""

    type: ItemType
    text: NotRequired[str]  # user, agent, summary
    call_id: NotRequired[str]  # tool_call
    entries: NotRequired[list[Any]]  # plan


class ToolCall(TypedDict):
    id: str
    tool: str | None  # the agent's tool name (Claude: ``Bash``), else the title
    title: str | None
    kind: str | None
    input: Any
    status: str  # pending, in_progress, completed, failed, interrupted (settled by a resume)
    output: Any  # ``rawOutput``, kept only when the result has no text content
    text: str | None  # the result's text content


def rebuild_conversation(entries: Iterable[LogEntry]) -> Conversation:
    """The conversation of a run's log, from scratch."""
    conversation = Conversation()
    conversation.apply(entries)
    return conversation


class Conversation:
    """The folded conversation; feed it entries in ``seq`` order with :meth:`apply`."""

    __slots__ = (
        "_open",
        "_rebuilt_prompt",
        "agent_session_id",
        "calls",
        "compactions",
        "cwd",
        "dropped_items",
        "items",
        "plan",
        "session_ids",
        "status",
        "task",
        "total_cost_usd",
        "upto_seq",
        "usage",
    )

    def __init__(self) -> None:
        self.upto_seq = 0
        self.items: list[Item] = []
        self.calls: dict[str, ToolCall] = {}
        self.plan: list[Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.total_cost_usd: float | None = None
        self.agent_session_id: str | None = None
        self.session_ids: list[str] = []  # every agent session of the run, oldest first
        self.cwd: str | None = None
        self.status: str | None = None
        self.task: str | None = None  # the prompt ``_baton/run_started`` names
        self.compactions = 0
        self.dropped_items = 0
        # Chunks of the last item while it is still growing (joined once, not per chunk).
        self._open: list[str] | None = None
        # The prompt a rebuilt-path resume named, standing in for the transcript it sent.
        self._rebuilt_prompt: str | None = None

    # -- reading -------------------------------------------------------------------------

    @property
    def interrupted_calls(self) -> list[ToolCall]:
        """Calls that nothing ended, in the order they were proposed."""
        return [call for call in self.calls.values() if call["status"] not in _ENDED]

    @property
    def user_turns(self) -> list[str]:
        self._flush()
        return [item.get("text", "") for item in self.items if item["type"] == "user"]

    def view(self) -> list[Item]:
        """The items, with the last text item complete."""
        self._flush()
        return self.items

    # -- folding -------------------------------------------------------------------------

    def apply(self, entries: Iterable[LogEntry]) -> Conversation:
        """Fold entries with ``seq > upto_seq`` (earlier ones are skipped: applying twice is safe)."""
        upto = self.upto_seq
        agent_chunks = self._agent_chunks()  # the growing agent text, while the last item is one
        for entry in entries:
            seq = entry["seq"]
            if seq <= upto:
                continue
            upto = seq
            method = entry["method"]
            params = entry["payload"].get("params")
            if type(params) is not dict:
                continue
            if method == "session/update":  # most entries: keep this path short
                update = params.get("update")
                if type(update) is not dict or ("_meta" in params and _replayed(params)):
                    continue
                meta = update.get("_meta")
                baton = None
                if meta and type(meta) is dict:
                    baton = meta.get("baton")
                    if type(baton) is dict and baton.get("replay") is True:
                        continue
                kind = update.get("sessionUpdate")
                if kind == "agent_message_chunk":  # most updates: inline
                    content = update.get("content")
                    text = content.get("text") if type(content) is dict else None
                    if not text or type(text) is not str:
                        continue
                    if agent_chunks is not None:
                        agent_chunks.append(text)
                    else:
                        self._text("agent", text, merge=True)
                        agent_chunks = self._open
                    continue
                if kind == "tool_call" or kind == "tool_call_update":  # most other updates
                    self._tool_update(update, baton)
                else:
                    self._update(kind, update)
            elif method == "session/prompt":
                if entry["direction"] == "to_agent" and not _replayed(params):
                    text, self._rebuilt_prompt = self._rebuilt_prompt or _prompt_text(params.get("prompt")), None
                    self._text("user", text, merge=False)
            elif method is not None and method.startswith("_baton/") and not _replayed(params):
                self._notification(method, params)
            else:
                continue
            agent_chunks = self._agent_chunks()
        self.upto_seq = upto
        return self

    def _agent_chunks(self) -> list[str] | None:
        return self._open if self._open is not None and self.items[-1]["type"] == "agent" else None

    def _update(self, kind: Any, update: dict[str, Any]) -> None:
        if kind == "user_message_chunk":
            self._text("user", _content_text(update.get("content")), merge=True)
        elif kind == "plan":
            entries = update.get("entries")
            if isinstance(entries, list):
                self._seal()
                self.plan = entries
                self.items.append({"type": "plan", "entries": entries})

    def _text(self, role: ItemType, text: str, *, merge: bool) -> None:
        if not text:
            return
        if merge and self._open is not None and self.items[-1]["type"] == role:
            self._open.append(text)
            return
        self._seal()
        self.items.append({"type": role, "text": text})
        self._open = [text]

    def _flush(self) -> None:
        """Join the growing item's chunks; it stays open for more."""
        if self._open is not None and len(self._open) > 1:
            joined = "".join(self._open)
            self.items[-1]["text"] = joined
            self._open = [joined]

    def _seal(self) -> None:
        """End the growing item: the next text starts a new one."""
        self._flush()
        self._open = None

    def _tool_update(self, update: dict[str, Any], baton: Any) -> None:
        """Fold a ``tool_call``/``tool_call_update``; ``baton`` is its ``_meta.baton``."""
        call_id = update.get("toolCallId")
        if type(call_id) is not str:
            return
        call = self.calls.get(call_id)
        if call is None:
            if self._open is not None:
                self._seal()
            call = self.calls[call_id] = {
                "id": call_id,
                "tool": None,
                "title": None,
                "kind": None,
                "input": None,
                "status": "pending",
                "output": None,
                "text": None,
            }
            self.items.append({"type": "tool_call", "call_id": call_id})
        if type(baton) is dict:
            tool_name = baton.get("tool_name")
            if type(tool_name) is str:
                call["tool"] = tool_name
        title = update.get("title")
        if type(title) is str:
            call["title"] = title
        kind = update.get("kind")
        if type(kind) is str:
            call["kind"] = kind
        if call["tool"] is None:
            call["tool"] = call["title"]
        raw_input = update.get("rawInput")
        if raw_input is not None:
            call["input"] = raw_input
        if call["status"] in _ENDED:
            return  # a call ends once
        status = update.get("status")
        if type(status) is str:
            call["status"] = status
        raw_output = update.get("rawOutput")
        if raw_output is not None:
            call["output"] = raw_output
        if status == "completed" or status == "failed":
            text = _content_text(update.get("content"))
            if text:
                call["text"] = text
                call["output"] = None  # the text says it; rawOutput would double the state

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "_baton/usage" or method == "_baton/turn_complete":
            if isinstance(params.get("usage"), dict):
                self.usage = params["usage"]
            cost = params.get("total_cost_usd")
            if isinstance(cost, int | float):
                self.total_cost_usd = float(cost)
        elif method == "_baton/compact_boundary":
            self._seal()
            self.items = []
            self.calls = {call_id: call for call_id, call in self.calls.items() if call["status"] not in _ENDED}
            self.compactions += 1
            self.dropped_items = 0
            summary = params.get("summary")
            if isinstance(summary, str) and summary:
                self.items.append({"type": "summary", "text": summary})
            for call_id in self.calls:
                self.items.append({"type": "tool_call", "call_id": call_id})
        elif method == "_baton/resume":
            if params.get("path") == "rebuilt" and isinstance(params.get("prompt"), str):
                self._rebuilt_prompt = params["prompt"]
            for call_id in params.get("interrupted_calls") or ():
                call = self.calls.get(call_id) if isinstance(call_id, str) else None
                if call is not None and call["status"] not in _ENDED:
                    call["status"] = "interrupted"
        elif method == "_baton/agent_session":
            session_id = params.get("agent_session_id")
            if isinstance(session_id, str):
                self.agent_session_id = session_id
                if session_id not in self.session_ids:
                    self.session_ids.append(session_id)
        elif method == "_baton/run_started":
            cwd = params.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
            if isinstance(params.get("prompt"), str):
                self.task = params["prompt"]
        elif method == "_baton/status":
            status = params.get("status")
            if isinstance(status, str):
                self.status = status

    def trim(self, max_chars: int) -> int:
        """Let go of the oldest items beyond about ``max_chars`` of text; returns how many.

        The first user turn, calls still open and the newest item always stay. A tool call
        counts at most ``TRIM_CALL_CHARS`` of input and result (a rebuilt context truncates
        them anyway).
        """
        self._flush()
        items = self.items
        first = 1 if items and items[0]["type"] == "user" else 0
        total = 0
        cut = first
        for index in range(len(items) - 1, first - 1, -1):
            total += self._item_chars(items[index])
            if total > max_chars:
                cut = min(index + 1, len(items) - 1)
                break
        if cut <= first:
            return 0
        kept_open: list[Item] = []
        for item in items[first:cut]:
            call_id = item.get("call_id")
            if call_id is None:
                continue
            if self.calls[call_id]["status"] in _ENDED:
                del self.calls[call_id]
            else:
                kept_open.append(item)
        dropped = cut - first - len(kept_open)
        self.items = items[:first] + kept_open + items[cut:]
        self.dropped_items += dropped
        return dropped

    def _item_chars(self, item: Item) -> int:
        if item["type"] != "tool_call":
            return len(item.get("text", "")) if "text" in item else 40 * len(item.get("entries") or ())
        call = self.calls[item.get("call_id", "")]
        result = call["text"] if call["text"] is not None else str(call["output"] or "")
        return min(len(result), TRIM_CALL_CHARS) + min(len(str(call["input"])), TRIM_CALL_CHARS) + 80

    # -- storing -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready state that :meth:`from_dict` continues from."""
        self._flush()
        return {
            "version": STATE_VERSION,
            "upto_seq": self.upto_seq,
            "items": self.items,
            "calls": self.calls,
            "plan": self.plan,
            "usage": self.usage,
            "total_cost_usd": self.total_cost_usd,
            "agent_session_id": self.agent_session_id,
            "session_ids": self.session_ids,
            "cwd": self.cwd,
            "status": self.status,
            "task": self.task,
            "compactions": self.compactions,
            "dropped_items": self.dropped_items,
            "open_text": self._open is not None,
            "rebuilt_prompt": self._rebuilt_prompt,
        }

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> Conversation:
        """The conversation a stored state describes; ``ValueError`` for another version."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"conversation state version {state.get('version')!r}, expected {STATE_VERSION}")
        conversation = cls()
        conversation.upto_seq = int(state["upto_seq"])
        conversation.items = [cast(Item, dict(item)) for item in state["items"]]
        conversation.calls = {str(call_id): cast(ToolCall, dict(call)) for call_id, call in state["calls"].items()}
        conversation.plan = state.get("plan")
        conversation.usage = state.get("usage")
        conversation.total_cost_usd = state.get("total_cost_usd")
        conversation.agent_session_id = state.get("agent_session_id")
        conversation.session_ids = list(state.get("session_ids") or ())
        conversation.cwd = state.get("cwd")
        conversation.status = state.get("status")
        conversation.task = state.get("task")
        conversation.compactions = int(state.get("compactions") or 0)
        conversation.dropped_items = int(state.get("dropped_items") or 0)
        conversation._rebuilt_prompt = state.get("rebuilt_prompt")
        if state.get("open_text") and conversation.items:
            conversation._open = [conversation.items[-1].get("text", "")]
        return conversation


def _replayed(holder: dict[str, Any]) -> bool:
    meta = holder.get("_meta")
    if not meta or type(meta) is not dict:
        return False
    baton = meta.get("baton")
    return type(baton) is dict and baton.get("replay") is True


def _content_text(content: Any) -> str:
    """The text of an ACP content block, or of a list of ``content`` items."""
    if type(content) is dict:
        if content.get("type") == "content":
            return _content_text(content.get("content"))
        text = content.get("text")
        return text if type(text) is str else ""
    if type(content) is list:
        if len(content) == 1:  # most results: one block
            return _content_text(content[0])
        return "".join([_content_text(item) for item in content])
    return ""


def _prompt_text(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return ""
    parts = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "resource":
            resource = block.get("resource")
            if isinstance(resource, dict) and isinstance(resource.get("text"), str):
                parts.append(resource["text"])
    return "\n".join(parts)
