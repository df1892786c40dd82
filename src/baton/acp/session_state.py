"""What the host knows of the agent's session beyond the log: the state its updates describe.

Every update is in the log already (the tap); :class:`AgentSession` keeps the *latest* value of
the session-level ones so the host can act on them:

- ``session_info_update``: ``title``, ``updated_at`` (a field set to null is cleared);
- ``config_option_update`` (and a session's ``configOptions`` from ``session/new``, ``load`` or
  ``resume``, or a ``session/set_config_option`` answer): the full list, options of kind
  ``select`` and ``boolean``; :meth:`AgentSession.option_value` checks a value against its option
  before it is sent (:func:`baton.acp.sessions.set_config_option`);
- ``available_commands_update``: the agent's slash commands;
- ``current_mode_update``: the mode id;
- ``usage_update``: ``used`` and ``size`` (tokens in the context window, its size) and the
  cumulative ``cost`` of the session, as the latest one said (one that came after its turn
  ended included: see :func:`baton.acp.replay.is_after_turn`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from baton.errors import UsageError

__all__ = ["AgentSession", "usd_cost"]


def usd_cost(usage_update: dict[str, Any] | None) -> float | None:
    """A ``usage_update``'s cumulative cost when its currency is USD, else None."""
    cost = (usage_update or {}).get("cost")
    amount = cost.get("amount") if isinstance(cost, dict) and cost.get("currency") == "USD" else None
    if isinstance(amount, int | float) and not isinstance(amount, bool):
        return float(amount)
    return None


@dataclass
class AgentSession:
    """The latest session-level state one agent session reported (wire names, camelCase)."""

    title: str | None = None
    updated_at: str | None = None
    mode: str | None = None
    config_options: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None  # the latest usage_update: used, size, cost?
    late_updates: int = 0  # updates that came after their turn had ended

    def apply(self, update: dict[str, Any]) -> None:
        """Take one ``session/update``'s ``update`` object (``sessionUpdate`` names its kind)."""
        kind = update.get("sessionUpdate")
        if kind == "session_info_update":
            if "title" in update:
                self.title = update["title"]
            if "updatedAt" in update:
                self.updated_at = update["updatedAt"]
        elif kind == "config_option_update":
            self.take_config_options(update.get("configOptions"))
        elif kind == "available_commands_update":
            commands = update.get("availableCommands")
            self.commands = [c for c in commands if isinstance(c, dict)] if isinstance(commands, list) else []
        elif kind == "current_mode_update":
            self.mode = update.get("currentModeId") or self.mode
        elif kind == "usage_update":
            self.usage = {key: update[key] for key in ("used", "size", "cost") if key in update}

    def take_config_options(self, options: Any) -> None:
        """The full list of config options (a response's ``configOptions`` or an update's)."""
        if isinstance(options, list):
            self.config_options = [option for option in options if isinstance(option, dict)]

    def take_response(self, response: Any) -> None:
        """What a ``session/new``, ``load`` or ``resume`` answer says of the session."""
        options = getattr(response, "config_options", None)
        if options:
            self.take_config_options([o.model_dump(by_alias=True, exclude_none=True) for o in options])
        modes = getattr(response, "modes", None)
        if modes is not None:
            self.mode = modes.current_mode_id

    @property
    def cost_usd(self) -> float | None:
        return usd_cost(self.usage)

    def option(self, option_id: str) -> dict[str, Any] | None:
        return next((option for option in self.config_options if option.get("id") == option_id), None)

    def option_value(self, option_id: str, value: str | bool) -> str | bool:
        """``value`` if the session offers ``option_id`` and the value fits it (a boolean for a
        ``boolean`` option, one of the choices of a ``select``), else ``invalid_argument``."""
        option = self.option(option_id)
        if option is None:
            offered = ", ".join(str(o.get("id")) for o in self.config_options) or "none"
            raise UsageError("invalid_argument", f"the agent offers no config option {option_id} (offered: {offered})")
        if option.get("type") == "boolean":
            if not isinstance(value, bool):
                raise UsageError("invalid_argument", f"config option {option_id} is a boolean, not {value!r}")
            return value
        choices = _choices(option.get("options"))
        if isinstance(value, bool) or value not in choices:
            raise UsageError(
                "invalid_argument", f"config option {option_id} takes one of {', '.join(choices)}, not {value!r}"
            )
        return value


def _choices(options: Any) -> list[str]:
    """A select option's values (plain, or in groups)."""
    found: list[str] = []
    for entry in options if isinstance(options, list) else ():
        if not isinstance(entry, dict):
            continue
        if "group" in entry:
            found.extend(_choices(entry.get("options")))
        elif isinstance(entry.get("value"), str):
            found.append(entry["value"])
    return found
