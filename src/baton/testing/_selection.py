"""Which step answers a request: a pure function of the request, so a resumed session replays.

The protocol module reads a request into a ``Conversation``; ``choose_step`` finds the step:

1. the latest prompt (a user message with text of its own, not only tool results) resets
   the count, so a resume with a continuation prompt starts the scenario over;
2. an *anchor* is the latest thing a ``when`` step matches: a tool result after the prompt
   (``tool_result_contains``), else the prompt itself (``prompt_contains``), else step 1;
3. from the anchor, tool results are counted forward: a step with two tool calls consumes
   two results. Steps with ``when`` are entered only by matching, never by counting.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from baton.testing._scenario import Failure, Scenario, Step, TextBlock, ToolCall

__all__ = [
    "SIDE_REPLY_TEXT",
    "Conversation",
    "Reply",
    "choose_step",
    "offered_mcp_tool",
    "plan_reply",
    "scenario_marker",
]

SIDE_REPLY_TEXT = "Scripted reply."

_MARKER = re.compile(r"\[scenario:([a-z0-9][a-z0-9-]*)\]")
_PLACEHOLDER = re.compile(r"\{(cwd|prompt|last_result|plan_file)\}")


@dataclass(frozen=True)
class Conversation:
    """What step selection needs from a request, whatever the protocol."""

    offers_tools: bool
    prompts: tuple[str, ...] = ()  # every user prompt, oldest first
    result_groups: tuple[tuple[str, ...], ...] = ()  # tool results per message after the latest prompt
    cwd: str | None = None
    plan_file: str | None = None  # Claude Code's plan file, named by its plan-mode reminder

    @property
    def prompt(self) -> str:
        return self.prompts[-1] if self.prompts else ""

    @property
    def last_result(self) -> str:
        return self.result_groups[-1][-1] if self.result_groups and self.result_groups[-1] else ""

    @property
    def result_count(self) -> int:
        return sum(len(group) for group in self.result_groups)


@dataclass(frozen=True)
class Reply:
    """A step made concrete for one request: placeholders filled, usage resolved."""

    content: tuple[TextBlock | ToolCall, ...]
    stop_reason: str
    usage: dict[str, int]
    delay: float = 0.0
    failure: Failure | None = None
    scenario: str | None = None
    step: int | None = None  # index in the scenario; None for the final text or a side reply


def scenario_marker(conversation: Conversation) -> str | None:
    """The scenario named by the latest ``[scenario:NAME]`` marker in any prompt."""
    for prompt in reversed(conversation.prompts):
        found = _MARKER.findall(prompt)
        if found:
            return str(found[-1])
    return None


def choose_step(conversation: Conversation, scenario: Scenario, fired: Collection[int] = ()) -> int | None:
    """The index of the step answering ``conversation``; None once the steps are used up.

    ``fired`` lists ``once`` failures already given for this prompt and result count.
    """
    steps = scenario.steps
    anchor, groups = _anchor(conversation, steps)
    remaining = sum(len(group) for group in groups)
    index = 0 if anchor is None else anchor
    while index < len(steps):
        step = steps[index]
        if step.when is not None and index != anchor:
            index += 1
            continue
        if remaining == 0:
            if not (step.once and index in fired):
                return index
        else:
            remaining = max(remaining - len(step.tool_calls), 0)
        index += 1
    return None


def plan_reply(conversation: Conversation, scenario: Scenario, index: int | None) -> Reply:
    """Step ``index`` of ``scenario`` (None: the final text) made concrete for ``conversation``."""
    if index is None:
        text = _fill(scenario.final_text, conversation)
        return Reply((TextBlock(text),), "end_turn", scenario.usage_for(None), scenario=scenario.name)
    step = scenario.steps[index]
    return Reply(
        content=tuple(_fill_block(block, conversation) for block in step.content),
        stop_reason=step.effective_stop_reason,
        usage=scenario.usage_for(step),
        delay=step.delay,
        failure=step.failure,
        scenario=scenario.name,
        step=index,
    )


def _anchor(conversation: Conversation, steps: tuple[Step, ...]) -> tuple[int | None, tuple[tuple[str, ...], ...]]:
    """The anchored step (None: none) and the result groups that come after the anchor."""
    prompt = conversation.prompt
    groups = conversation.result_groups
    for position in range(len(groups) - 1, -1, -1):
        for index, step in enumerate(steps):
            when = step.when
            if when is None or when.tool_result_contains is None:
                continue
            if when.prompt_contains is not None and when.prompt_contains not in prompt:
                continue
            if any(when.tool_result_contains in result for result in groups[position]):
                return index, groups[position + 1 :]
    for index, step in enumerate(steps):
        when = step.when
        needle = when.prompt_contains if when and when.tool_result_contains is None else None
        if needle is not None and needle in prompt:
            return index, groups
    return None, groups


def _fill_block(block: TextBlock | ToolCall, conversation: Conversation) -> TextBlock | ToolCall:
    if isinstance(block, TextBlock):
        return TextBlock(_fill(block.text, conversation))
    return ToolCall(block.name, _fill_value(block.input, conversation))


def _fill_value(value: Any, conversation: Conversation) -> Any:
    if isinstance(value, str):
        return _fill(value, conversation)
    if isinstance(value, Mapping):
        return {key: _fill_value(item, conversation) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill_value(item, conversation) for item in value]
    return value


def _fill(text: str, conversation: Conversation) -> str:
    values = {
        "cwd": conversation.cwd or ".",
        "prompt": conversation.prompt,
        "last_result": conversation.last_result,
        "plan_file": conversation.plan_file or "plan.md",
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], text)


def offered_mcp_tool(name: str, offered: Collection[tuple[str | None, str]]) -> tuple[str | None, str] | None:
    """How the request offers the MCP tool a scenario names ``mcp__SERVER__TOOL``: as
    ``(namespace, name)`` among ``offered`` (Codex: namespace ``mcp__SERVER``, name ``TOOL``;
    Claude Code: ``mcp__SERVER__TOOL``; OpenCode: ``SERVER_TOOL``; Gemini CLI: ``TOOL`` or
    ``SERVER__TOOL``), or None when it is not offered (the name is then sent as it is)."""
    server, sep, tool = name.removeprefix("mcp__").partition("__")
    if not name.startswith("mcp__") or not sep or not tool:
        return None
    candidates: list[tuple[str | None, str]] = [
        (None, name),
        (f"mcp__{server}", tool),
        (None, f"{server}__{tool}"),
        (None, f"{server}_{tool}"),
        (None, f"mcp_{server}_{tool}"),
        (None, tool),
    ]
    return next((candidate for candidate in candidates if candidate in offered), None)
