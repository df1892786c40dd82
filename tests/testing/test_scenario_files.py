"""The shipped scenarios load from package data; malformed scenarios are refused clearly."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import baton.testing
from baton.errors import UsageError
from baton.testing import Failure, Scenario, ToolCall, copy_sample_repo, list_scenarios, load_scenario

SHIPPED = {
    "plain",
    "write-and-run",
    "two-tools",
    "pytest-pipe",
    "node-test-pipe",
    "needs-approval",
    "api-error",
    "api-error-500",
    "long-command",
    "demo",
}


def test_public_names_are_exported() -> None:
    for name in baton.testing.__all__:
        assert getattr(baton.testing, name) is not None


def test_every_shipped_scenario_loads_and_documents_itself() -> None:
    assert set(list_scenarios()) >= SHIPPED
    for name in list_scenarios():
        scenario = load_scenario(name)
        assert scenario.name == name
        assert scenario.description
        assert scenario.steps


def documented_scenarios() -> list[str]:
    """The names in the first column of docs/scenarios.md's table of scenarios."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    table = doc.split("\n## The scenarios\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.MULTILINE)


def test_docs_scenarios_lists_every_shipped_scenario_once() -> None:
    documented = documented_scenarios()
    assert len(documented) == len(set(documented)), "a scenario is listed twice in docs/scenarios.md"
    shipped = set(list_scenarios())
    assert not shipped - set(documented), f"shipped but not in docs/scenarios.md: {sorted(shipped - set(documented))}"
    assert not set(documented) - shipped, f"in docs/scenarios.md but not shipped: {sorted(set(documented) - shipped)}"


def test_the_failure_scenarios_end_in_the_provider_errors() -> None:
    assert load_scenario("api-error").steps[-1].failure == Failure(529)
    assert load_scenario("api-error-500").steps[-1].failure == Failure(500)
    assert load_scenario("api-error").steps[0].tool_calls == (
        ToolCall("Bash", {"command": "echo step1", "description": "Print step1"}),
    )


def test_an_unknown_scenario_is_an_invalid_argument() -> None:
    with pytest.raises(UsageError) as caught:
        load_scenario("no-such-scenario")
    assert caught.value.code == "invalid_argument"
    assert "write-and-run" in caught.value.message
    with pytest.raises(UsageError):
        load_scenario("../pyproject")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("steps: [", "scenario 'bad'"),
        ("- a list", "a mapping"),
        ("steps: {}", "'steps' must be a list"),
        ("steps:\n  - {}", "give text, tools, error or drop"),
        ("steps:\n  - {text: hi, colour: red}", "unknown keys"),
        ("steps:\n  - {error: 418}", "'error' is one of"),
        ("steps:\n  - {error: 529, text: hi}", "no text or tools"),
        ("steps:\n  - {tools: [Bash]}", "a tool call is"),
        ("steps:\n  - {tools: [{name: Bash, input: ls}]}", "must be a mapping"),
        ("steps:\n  - {text: hi, when: {prompt: x}}", "'when' has"),
        ("steps:\n  - {text: hi, usage: {input_tokens: many}}", "'usage'"),
    ],
)
def test_malformed_scenarios_are_config_invalid(text: str, complaint: str) -> None:
    with pytest.raises(UsageError) as caught:
        Scenario.from_yaml(text, name="bad")
    assert caught.value.code == "config_invalid"
    assert complaint in caught.value.message


def test_steps_accept_drops_delays_and_custom_error_messages() -> None:
    scenario = Scenario.from_yaml(
        "steps:\n  - {drop: true}\n  - {error: {status: 429, message: slow down}}\n  - {text: [a, b], delay: 0.5}\n",
        name="mixed",
    )
    drop, limited, text = scenario.steps
    assert drop.failure is not None and drop.failure.drops_connection
    assert limited.failure == Failure(429, "slow down")
    assert (len(text.content), text.delay, text.effective_stop_reason) == (2, 0.5, "end_turn")


def test_the_sample_repository_fails_its_test_until_add_is_fixed(tmp_path: Path) -> None:
    repo = copy_sample_repo(tmp_path / "calc")
    assert sorted(p.name for p in repo.iterdir()) == ["README.md", "calc.js", "calc.test.js", "package.json"]
    failing = subprocess.run(["node", "--test"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert failing.returncode != 0
    calc = repo / "calc.js"
    edit = load_scenario("demo").steps[2].tool_calls[0].input
    assert calc.read_text().count(edit["old_string"]) == 1
    calc.write_text(calc.read_text().replace(edit["old_string"], edit["new_string"]))
    passing = subprocess.run(["node", "--test"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert passing.returncode == 0, passing.stdout
