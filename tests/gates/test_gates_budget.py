"""baton.gates.budget: budgets, what a run spent, and when a resource_limit gate opens."""

from __future__ import annotations

from typing import Any

import pytest

from baton.errors import RefusedError, UsageError
from baton.gates.budget import (
    Budget,
    Spend,
    check_budget,
    claude_budget_left,
    claude_turns_left,
    continued_budget,
    require_supported,
    spend_from_log,
)


def test_a_budget_reads_and_writes_its_json() -> None:
    budget = Budget.from_json({"usd": 2, "turns": 5, "seconds": 90.5})
    assert budget == Budget(2.0, 5, 90.5) and budget.to_json() == {"usd": 2.0, "turns": 5, "seconds": 90.5}
    assert Budget.from_json(None).empty and Budget.from_json({}).to_json() == {}


@pytest.mark.parametrize(
    "raw",
    [{"usd": 0}, {"usd": -1}, {"turns": 1.5}, {"seconds": "10"}, {"usd": True}, {"usd": float("inf")}, {"cost": 1}, 3],
)
def test_a_bad_budget_is_invalid_argument(raw: Any) -> None:
    with pytest.raises(UsageError) as caught:
        Budget.from_json(raw)
    assert caught.value.code == "invalid_argument"


def test_usd_is_reached_by_the_cost_report_or_by_claudes_own_stop() -> None:
    budget = Budget(usd=0.5)
    spend = Spend()
    spend.add_turn({"total_cost_usd": 0.3, "num_turns": 2}, 1.0)
    assert check_budget(budget, spend) is None
    stopped = check_budget(budget, spend, subtype="error_max_budget_usd")  # Claude stopped mid-turn
    assert stopped is not None and stopped.limits == ("usd",)
    spend.add_turn({"total_cost_usd": 0.5}, 1.0)
    reached = check_budget(budget, spend)
    assert reached is not None and reached.limits == ("usd",)
    assert reached.summary == "Budget reached: cost $0.5 of $0.5. Continue (optionally with a higher budget)?"
    assert reached.gate_input() == {
        "limits": ["usd"],
        "budget": {"usd": 0.5},
        "spent": {"usd": 0.5, "turns": 3, "seconds": 2.0},
    }


def test_turns_count_the_agents_model_turns_or_one_per_prompt() -> None:
    spend = Spend()
    spend.add_turn({"num_turns": 3}, 0.0)
    spend.add_turn(None, 0.0)  # an agent that reports nothing: one turn
    assert spend.turns == 4
    assert check_budget(Budget(turns=5), spend) is None
    reached = check_budget(Budget(turns=4, usd=10), spend)
    assert reached is not None and reached.limits == ("turns",)
    assert check_budget(Budget(turns=50), spend, subtype="error_max_turns") is not None


def test_claude_stopped_at_max_turns_counts_only_the_turns_it_made() -> None:
    spend = Spend()  # Claude Code given max_turns 2 reports num_turns 3: the one it did not start
    spend.add_turn({"num_turns": 3, "subtype": "error_max_turns", "usage": {"input_tokens": 200}}, 0.0)
    spend.add_turn({"num_turns": 1, "subtype": "success", "usage": {"input_tokens": 100, "speed": "x"}}, 0.0)
    assert spend.turns == 3 and spend.usage == {"input_tokens": 300}  # token counts add up over turns
    assert claude_turns_left(5, spend.turns) == 2 and claude_turns_left(3, spend.turns) == 1
    assert claude_turns_left(None, spend.turns) is None


def test_seconds_are_the_turns_time() -> None:
    spend = Spend()
    spend.add_turn({}, 2.5)
    spend.add_turn({}, -1)  # a clock that went backwards adds nothing
    assert spend.seconds == 2.5
    assert check_budget(Budget(seconds=3), spend) is None
    reached = check_budget(Budget(seconds=2.5, turns=2), spend)
    assert reached is not None and reached.limits == ("turns", "seconds")
    assert "turns 2 of 2, seconds 2.5 of 2.5" in reached.summary


def test_a_continue_raises_only_the_fields_it_names() -> None:
    budget = Budget(usd=1.0, turns=10)
    assert continued_budget(budget, {"decision": "continue"}) == budget
    assert continued_budget(budget, None) == budget
    assert continued_budget(budget, {"decision": "continue", "budget": {"usd": 3}}) == Budget(3.0, 10)
    with pytest.raises(UsageError):
        continued_budget(budget, {"decision": "continue", "budget": {"usd": -3}})


def test_a_resumed_claude_gets_what_is_left() -> None:
    assert claude_budget_left(None, 1.0) is None
    assert claude_budget_left(3.0, 1.25) == 1.75
    assert claude_budget_left(1.0, None) == 1.0
    assert claude_budget_left(1.0, 2.0) == 0.000001  # Claude Code refuses 0


def test_usd_needs_an_agent_that_reports_cost() -> None:
    require_supported(Budget(usd=1), agent="claude", reports_cost=True)
    require_supported(Budget(turns=3), agent="codex", reports_cost=False)
    with pytest.raises(RefusedError) as caught:
        require_supported(Budget(usd=1), agent="codex", reports_cost=False)
    assert caught.value.code == "budget_not_supported"


def _entry(method: str, params: dict[str, Any], direction: str = "baton") -> dict[str, Any]:
    return {"method": method, "direction": direction, "payload": {"jsonrpc": "2.0", "method": method, "params": params}}


def test_what_a_run_spent_is_read_back_from_its_log() -> None:
    entries = [
        _entry("_baton/run_started", {}),
        _entry("_baton/usage", {"total_cost_usd": 0.25, "num_turns": 3}, "from_agent"),
        _entry("_baton/turn_complete", {"total_cost_usd": 0.25, "duration_ms": 1500}),
        _entry("_baton/turn_complete", {"duration_ms": None}),  # an ACP agent that reports nothing
        _entry("_baton/usage", {"total_cost_usd": 0.5, "num_turns": 1}, "from_agent"),
        _entry("_baton/turn_complete", {"total_cost_usd": 0.5, "duration_ms": 500}),
    ]
    spend = spend_from_log(entries)
    assert (spend.usd, spend.turns, spend.seconds) == (0.5, 5, 2.0)


def test_a_turn_stopped_at_its_seconds_budget_reaches_it_and_time_at_gates_does_not_count() -> None:
    spend = Spend()
    spend.add_turn({}, 1.9)
    assert check_budget(Budget(seconds=2), spend) is None
    # baton stopped the turn when the budget ran out (its clock), whatever the agent reported
    reached = check_budget(Budget(seconds=2, usd=5), spend, out_of_time=True)
    assert reached is not None and reached.limits == ("seconds",)
    assert check_budget(Budget(usd=5), spend, out_of_time=True) is None  # no seconds budget: nothing reached
    entries = [
        _entry("_baton/turn_complete", {"duration_ms": 9000, "gate_wait_ms": 8000}),  # 8 s waiting for a human
        _entry("_baton/turn_complete", {"duration_ms": 1000, "gate_wait_ms": 3000}),  # never below zero
    ]
    assert spend_from_log(entries).seconds == 1.0
