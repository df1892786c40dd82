"""A run's budget ``{usd?, turns?, seconds?}`` and what it has spent: reaching the budget opens a
``resource_limit`` gate instead of ending the run (docs/design.md "Gates, precisely").

What counts:

- **usd**: the agent's own cost report (Claude's ``total_cost_usd``, cumulative over the run,
  a resumed session included). Claude enforces it mid-turn itself (``max_budget_usd``: its turn
  ends with ``error_max_budget_usd``); baton checks it again at the end of every turn. An agent
  whose registry entry says it reports no cost refuses a USD budget (``budget_not_supported``).
- **turns**: counted by baton, one per model turn the agent reports — for Claude a model
  round trip (one request to the model API: its ``num_turns``, less the turn it reports but did
  not start when ``max_turns`` stopped it) — or one per prompt turn for an agent that reports
  none. Claude enforces it mid-turn itself (``max_turns``: what is left of the budget, for each
  prompt of its process; the turn ends with ``error_max_turns`` before another model request);
  baton checks it again at the end of every turn.
- **seconds**: counted by baton, the time of the run's turns (each turn's ``duration_ms``, the
  agent's or baton's own measure) less the time its gates waited for a human (``gate_wait_ms``);
  watched during the turn: baton stops a turn that runs out of it (baton.runs.executor).

A ``continue`` decision may raise the budget (``{"budget": {...}}``: each given field replaces
the old one); :func:`continued_budget` applies it to the run's record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from baton.errors import RefusedError, UsageError

__all__ = [
    "LIMIT_SUBTYPES",
    "Budget",
    "LimitReached",
    "Spend",
    "check_budget",
    "claude_budget_left",
    "claude_turns_left",
    "continued_budget",
    "require_supported",
    "spend_from_log",
]

# Claude's result subtypes that mean "a limit it was given stopped the turn".
LIMIT_SUBTYPES = {"error_max_budget_usd": "usd", "error_max_turns": "turns"}
_FIELDS = ("usd", "turns", "seconds")
_FLAGS = {"usd": "--budget-usd", "turns": "--max-turns", "seconds": "--max-seconds"}
_LEAST_USD = 0.000001


@dataclass(frozen=True)
class Budget:
    usd: float | None = None
    turns: int | None = None
    seconds: float | None = None

    @classmethod
    def from_json(cls, data: Any) -> Budget:
        """``{usd?, turns?, seconds?}``, each a positive number (``invalid_argument`` otherwise)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise UsageError("invalid_argument", "a budget is an object {usd?, turns?, seconds?}")
        unknown = set(data) - set(_FIELDS)
        if unknown:
            raise UsageError("invalid_argument", f"unknown budget fields {sorted(unknown)} (usd, turns, seconds)")
        values = {name: _positive(name, data.get(name)) for name in _FIELDS}
        turns = values["turns"]
        if turns is not None and turns != int(turns):
            raise UsageError(
                "invalid_argument",
                "budget.turns (--max-turns) must be a whole number",
                details={"field": "budget.turns"},
            )
        return cls(values["usd"], None if turns is None else int(turns), values["seconds"])

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS if getattr(self, name) is not None}

    @property
    def empty(self) -> bool:
        return self.usd is None and self.turns is None and self.seconds is None

    def raised(self, new: Budget) -> Budget:
        """This budget with every field ``new`` gives replaced."""
        return Budget(
            new.usd if new.usd is not None else self.usd,
            new.turns if new.turns is not None else self.turns,
            new.seconds if new.seconds is not None else self.seconds,
        )


@dataclass
class Spend:
    """What a run has spent so far (baton's own counters plus the agent's cost report)."""

    usd: float | None = None
    turns: int = 0
    seconds: float = 0.0
    # The agent's token counts summed over the run's turns (each number of its usage objects).
    usage: dict[str, int] = field(default_factory=dict)

    def add_turn(self, usage: Mapping[str, Any] | None, seconds: float) -> None:
        """One prompt turn ended: its ``_baton/usage`` params (or ``{}``) and its wall-clock time."""
        usage = usage or {}
        tokens = usage.get("usage")
        if isinstance(tokens, Mapping):
            for name, count in tokens.items():
                if isinstance(count, int) and not isinstance(count, bool):
                    self.usage[str(name)] = self.usage.get(str(name), 0) + count
        cost = usage.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.usd = float(cost)  # Claude's is cumulative: the latest is the total
        reported = usage.get("num_turns")
        if isinstance(reported, int) and usage.get("subtype") == "error_max_turns":
            reported -= 1  # Claude Code stopped at max_turns counts the turn it did not start
        self.turns += reported if isinstance(reported, int) and reported > 0 else 1
        self.seconds += max(seconds, 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"usd": self.usd, "turns": self.turns, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class LimitReached:
    """The budget fields a turn reached, for the ``resource_limit`` gate."""

    limits: tuple[str, ...]
    budget: Budget
    spent: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        parts = []
        for name in self.limits:
            limit = getattr(self.budget, name)
            used = self.spent.get(name)
            if name == "usd":
                parts.append(f"cost ${_num(used)} of ${_num(limit)}")
            else:
                parts.append(f"{name} {_num(used)} of {_num(limit)}")
        return "Budget reached: " + ", ".join(parts) + ". Continue (optionally with a higher budget)?"

    def gate_input(self) -> dict[str, Any]:
        """What the gate shows (its ``input``): which limits, the budget, what was spent."""
        return {"limits": list(self.limits), "budget": self.budget.to_json(), "spent": self.spent}


def check_budget(
    budget: Budget, spend: Spend, *, subtype: str | None = None, out_of_time: bool = False
) -> LimitReached | None:
    """The limits reached after a turn, or ``None``. ``subtype`` is the agent's result subtype:
    Claude's ``error_max_budget_usd`` / ``error_max_turns`` mean it stopped at a limit itself;
    ``out_of_time``: baton stopped the turn when its seconds budget ran out."""
    reached: list[str] = []
    stopped = LIMIT_SUBTYPES.get(subtype or "")
    if budget.usd is not None and (stopped == "usd" or (spend.usd is not None and spend.usd >= budget.usd)):
        reached.append("usd")
    if budget.turns is not None and (stopped == "turns" or spend.turns >= budget.turns):
        reached.append("turns")
    if budget.seconds is not None and (out_of_time or spend.seconds >= budget.seconds):
        reached.append("seconds")
    if not reached:
        return None
    return LimitReached(tuple(reached), budget, spend.to_json())


def require_supported(budget: Budget, *, agent: str, reports_cost: bool) -> None:
    """A USD budget needs an agent that reports its cost (``budget_not_supported``)."""
    if budget.usd is not None and not reports_cost:
        raise RefusedError(
            "budget_not_supported",
            f"{agent} reports no cost, so a USD budget cannot be enforced",
            details={"agent": agent, "budget": budget.to_json()},
        )


def continued_budget(budget: Budget, decision: Mapping[str, Any] | None) -> Budget:
    """The budget after a ``continue`` decision (``{"decision": "continue", "budget"?: {...}}``)."""
    raw = (decision or {}).get("budget")
    return budget if raw is None else budget.raised(Budget.from_json(raw))


def claude_budget_left(budget_usd: float | None, spent_usd: float | None) -> float | None:
    """Claude's ``max_budget_usd`` for a new process of a run: a resumed session counts only what
    it spends itself (its reported total starts from the transcript's), so it gets what is left."""
    if budget_usd is None:
        return None
    left = budget_usd - (spent_usd or 0.0)
    # Claude Code refuses to start with a budget of 0: with nothing left it gets the smallest
    # one, so it stops after its first response (and baton's check opens the gate again).
    return max(left, _LEAST_USD)


def claude_turns_left(budget_turns: int | None, spent_turns: int) -> int | None:
    """Claude's ``max_turns`` for a new process of a run: the model turns left of the budget, at
    least one (a ``continue`` without a higher budget gives the run one more turn)."""
    if budget_turns is None:
        return None
    return max(budget_turns - spent_turns, 1)


def spend_from_log(entries: Sequence[Mapping[str, Any]]) -> Spend:
    """What a run spent before this execution, from its log: every ``_baton/turn_complete`` is one
    prompt turn; the ``_baton/usage`` before it gives its model turns and cost."""
    spend = Spend()
    usage: Mapping[str, Any] | None = None
    for entry in entries:
        method = entry.get("method")
        params = (entry.get("payload") or {}).get("params") or {}
        if method == "_baton/usage" and entry.get("direction") == "from_agent":
            usage = params
        elif method == "_baton/turn_complete":
            duration = params.get("duration_ms")
            seconds = duration / 1000 if isinstance(duration, int | float) else 0.0
            waited = params.get("gate_wait_ms")  # the turn's time waiting for humans does not count
            seconds -= waited / 1000 if isinstance(waited, int | float) else 0.0
            spend.add_turn(usage or params, max(seconds, 0.0))
            usage = None
    return spend


def _positive(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise UsageError(
            "invalid_argument",
            f"budget.{name} ({_FLAGS[name]}) must be a positive number",
            details={"field": f"budget.{name}"},
        )
    return float(value)


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return str(value)
