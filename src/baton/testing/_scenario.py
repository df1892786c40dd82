"""Scenarios: ordered model responses read from the YAML files in ``scenarios/``.

A scenario is protocol-neutral: the server turns a chosen ``Step`` into Anthropic Messages
(or, later, OpenAI Responses) wire format. See ``docs/scenarios.md`` for the file format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from baton.errors import UsageError

__all__ = [
    "DEFAULT_USAGE",
    "Failure",
    "Scenario",
    "Step",
    "TextBlock",
    "ToolCall",
    "When",
    "list_scenarios",
    "load_scenario",
    "scenario_file",
    "scenario_text",
]

DEFAULT_USAGE: dict[str, int] = {
    "input_tokens": 100,
    "output_tokens": 20,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_STEP_KEYS = {"text", "tools", "stop_reason", "usage", "delay", "when", "error", "drop", "once"}
_FAILURE_STATUSES = {400, 401, 403, 404, 413, 429, 500, 529}


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class When:
    """Request content that selects a step instead of counting tool results."""

    prompt_contains: str | None = None
    tool_result_contains: str | None = None


@dataclass(frozen=True)
class Failure:
    """An injected failure: an HTTP error with the provider's body, or a dropped connection."""

    status: int | None = None  # None: drop the connection without answering
    message: str | None = None  # None: the provider's usual message for ``status``

    @property
    def drops_connection(self) -> bool:
        return self.status is None


@dataclass(frozen=True)
class Step:
    """One model response (text and tool calls) or one injected failure."""

    content: tuple[TextBlock | ToolCall, ...] = ()
    stop_reason: str | None = None  # None: ``tool_use`` when the step calls tools, else ``end_turn``
    usage: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    when: When | None = None
    failure: Failure | None = None
    once: bool = False  # a failure given once per prompt, then skipped (retries succeed)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    description: str = ""
    usage: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE))
    final_text: str = "Done."

    @classmethod
    def from_yaml(cls, text: str, *, name: str) -> Scenario:
        """Parse a scenario file's text; errors are ``config_invalid``."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UsageError("config_invalid", f"scenario {name!r}: {exc}") from exc
        return cls.from_dict(data, name=name)

    @classmethod
    def from_dict(cls, data: Any, *, name: str) -> Scenario:
        if not isinstance(data, dict):
            raise _invalid(name, "a scenario is a mapping with a 'steps' list")
        raw_steps = data.get("steps")
        if not isinstance(raw_steps, list):
            raise _invalid(name, "'steps' must be a list")
        usage = {**DEFAULT_USAGE, **_usage(name, data.get("usage", {}))}
        steps = tuple(_step(name, index, raw) for index, raw in enumerate(raw_steps))
        return cls(
            name=name,
            steps=steps,
            description=str(data.get("description", "")).strip(),
            usage=usage,
            final_text=str(data.get("final_text", "Done.")),
        )

    def usage_for(self, step: Step | None) -> dict[str, int]:
        return {**self.usage, **(step.usage if step else {})}


def list_scenarios() -> list[str]:
    """Names of the scenarios shipped in ``baton/testing/scenarios``, sorted."""
    folder = resources.files("baton.testing") / "scenarios"
    names = (entry.name.removesuffix(".yaml") for entry in folder.iterdir() if entry.name.endswith(".yaml"))
    return sorted(name for name in names if _NAME.match(name))


def load_scenario(name: str) -> Scenario:
    """The shipped scenario ``name``, or the scenario file at a path (``scenario_file``); an
    unknown name or a missing file is ``invalid_argument``, a file that is not a scenario
    ``config_invalid``. A file is read again at every call (it may have been rewritten)."""
    path = scenario_file(name)
    if path is None:
        return _shipped(name)
    return Scenario.from_yaml(scenario_text(name), name=str(path))


def scenario_file(value: str) -> Path | None:
    """The path ``value`` names when it is a file rather than a shipped scenario's name: it holds a
    ``/`` or ends in ``.yaml`` / ``.yml``; None for a name."""
    if "/" in value or value.endswith((".yaml", ".yml")):
        return Path(value)
    return None


def scenario_text(name: str) -> str:
    """The YAML text of a shipped scenario or of a scenario file (``invalid_argument`` when there is none)."""
    path = scenario_file(name)
    if path is None:
        _check_shipped(name)
        return (resources.files("baton.testing") / "scenarios" / f"{name}.yaml").read_text("utf-8")
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("invalid_argument", f"cannot read the scenario file {path}: {exc}") from exc


def _check_shipped(name: str) -> None:
    if not _NAME.match(name) or name not in list_scenarios():
        known = ", ".join(list_scenarios())
        raise UsageError("invalid_argument", f"unknown scenario {name!r} (known: {known}; or a scenario file's path)")


@cache
def _shipped(name: str) -> Scenario:
    return Scenario.from_yaml(scenario_text(name), name=name)


def _step(name: str, index: int, raw: Any) -> Step:
    where = f"step {index + 1}"
    if not isinstance(raw, dict):
        raise _invalid(name, f"{where} must be a mapping")
    unknown = set(raw) - _STEP_KEYS
    if unknown:
        raise _invalid(name, f"{where}: unknown keys {sorted(unknown)}")
    failure = _failure(name, where, raw)
    if failure and ("text" in raw or "tools" in raw):
        raise _invalid(name, f"{where}: a failure step has no text or tools")
    texts = raw.get("text", [])
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise _invalid(name, f"{where}: 'text' is a string or a list of strings")
    content: list[TextBlock | ToolCall] = [TextBlock(text) for text in texts]
    content += [_tool_call(name, where, call) for call in raw.get("tools", [])]
    if not content and failure is None:
        raise _invalid(name, f"{where}: give text, tools, error or drop")
    return Step(
        content=tuple(content),
        stop_reason=raw.get("stop_reason"),
        usage=_usage(name, raw.get("usage", {})),
        delay=float(raw.get("delay", 0.0)),
        when=_when(name, where, raw.get("when")),
        failure=failure,
        once=bool(raw.get("once", False)),
    )


def _tool_call(name: str, where: str, raw: Any) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise _invalid(name, f"{where}: a tool call is {{name: Tool, input: {{...}}}}")
    tool_input = raw.get("input", {})
    if not isinstance(tool_input, dict):
        raise _invalid(name, f"{where}: the input of {raw['name']} must be a mapping")
    return ToolCall(raw["name"], tool_input)


def _failure(name: str, where: str, raw: dict[str, Any]) -> Failure | None:
    if raw.get("drop"):
        return Failure(status=None)
    error = raw.get("error")
    if error is None:
        return None
    if isinstance(error, int):
        error = {"status": error}
    if not isinstance(error, dict) or error.get("status") not in _FAILURE_STATUSES:
        raise _invalid(name, f"{where}: 'error' is one of {sorted(_FAILURE_STATUSES)} or {{status, message}}")
    message = error.get("message")
    return Failure(status=int(error["status"]), message=None if message is None else str(message))


def _when(name: str, where: str, raw: Any) -> When | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw or set(raw) - {"prompt_contains", "tool_result_contains"}:
        raise _invalid(name, f"{where}: 'when' has prompt_contains and/or tool_result_contains")
    return When(raw.get("prompt_contains"), raw.get("tool_result_contains"))


def _usage(name: str, raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict) or not all(isinstance(v, int) for v in raw.values()):
        raise _invalid(name, "'usage' maps token counters to integers")
    return {str(key): value for key, value in raw.items()}


def _invalid(name: str, message: str) -> UsageError:
    return UsageError("config_invalid", f"scenario {name!r}: {message}")
