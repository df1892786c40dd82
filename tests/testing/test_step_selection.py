"""Step selection is a pure function of the request: counting, matching, resume, placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.testing import Scenario, TextBlock, ToolCall, load_scenario
from baton.testing._anthropic import read_conversation
from baton.testing._selection import Conversation, choose_step, plan_reply, scenario_marker

SAMPLES = Path(__file__).parent / "data" / "claude-request-log.jsonl"
REMINDER = {"type": "text", "text": "<system-reminder>\nAttribution for git commits…</system-reminder>"}
ENVIRONMENT = "# Environment\n - Primary working directory: /home/dev/work\n - Is a git repository: false\n"


def prompt(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [REMINDER, {"type": "text", "text": text}]}


def calls(*names: str) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}} for i, name in enumerate(names)]
    return {"role": "assistant", "content": blocks}


def results(*texts: str) -> dict[str, Any]:
    blocks = [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": t} for i, t in enumerate(texts)]
    return {"role": "user", "content": blocks}


def body(*messages: dict[str, Any], tools: bool = True) -> dict[str, Any]:
    system = {"role": "system", "content": ENVIRONMENT}
    return {
        "model": "claude-test",
        "stream": True,
        "messages": [messages[0], system, *messages[1:]],
        "tools": [{"name": "Bash"}, {"name": "Write"}] if tools else [],
    }


def conversation(*messages: dict[str, Any], tools: bool = True) -> Conversation:
    return read_conversation(body(*messages, tools=tools))


WHEN = Scenario.from_yaml(
    """
steps:
  - tools: [{name: Bash, input: {command: touch x}}]
  - text: "{last_result}"
  - when: {prompt_contains: "[baton:resume]"}
    tools: [{name: Bash, input: {command: touch x}}]
  - when: {tool_result_contains: "needs approval"}
    tools: [{name: Bash, input: {command: echo other}}]
  - text: after the detour
""",
    name="when",
)


def test_the_recorded_claude_requests_read_as_one_prompt_and_growing_results() -> None:
    bodies = [json.loads(line)["body"] for line in SAMPLES.read_text().splitlines()]
    read = [read_conversation(b) for b in bodies]
    assert [c.prompt for c in read] == ["Create hello.txt and run echo hi"] * 3
    assert [c.result_count for c in read] == [0, 1, 2]
    assert {c.cwd for c in read} == {"/home/dev/work2"}
    assert all(c.offers_tools for c in read)
    assert [choose_step(c, load_scenario("write-and-run")) for c in read] == [0, 1, 2]


def test_steps_are_chosen_by_counting_tool_results_after_the_prompt() -> None:
    scenario = load_scenario("write-and-run")
    first = conversation(prompt("go"))
    second = conversation(prompt("go"), calls("Write"), results("written"))
    third = conversation(prompt("go"), calls("Write"), results("written"), calls("Bash"), results("hi"))
    assert [choose_step(c, scenario) for c in (first, second, third)] == [0, 1, 2]


def test_a_step_with_two_tool_calls_consumes_two_results() -> None:
    scenario = load_scenario("two-tools")
    one_message = conversation(prompt("go"), calls("Write", "Write"), results("a", "b"))
    assert choose_step(one_message, scenario) == 1
    assert choose_step(conversation(prompt("go"), calls("Write", "Write"), results("a")), scenario) == 1


def test_after_the_last_step_the_answer_is_a_final_text_ending_the_turn() -> None:
    scenario = load_scenario("plain")
    done = conversation(prompt("go"), calls("Bash"), results("x"))
    assert choose_step(done, scenario) is None
    reply = plan_reply(done, scenario, None)
    assert reply.content == (TextBlock(scenario.final_text),)
    assert (reply.stop_reason, reply.step, reply.scenario) == ("end_turn", None, "plain")


def test_a_new_prompt_restarts_the_count_so_a_resume_replays() -> None:
    scenario = load_scenario("write-and-run")
    earlier = [prompt("go"), calls("Write"), results("written"), calls("Bash")]
    resumed = conversation(*earlier, results("[Tool call interrupted]"), prompt("continue"))
    assert resumed.prompt == "continue"
    assert choose_step(resumed, scenario) == 0
    merged = {
        "role": "user",
        "content": [*results("interrupted")["content"], {"type": "text", "text": "go on"}],
    }
    assert choose_step(conversation(*earlier, merged), scenario) == 0


def test_system_reminders_alone_are_not_a_prompt() -> None:
    with_reminder = {"role": "user", "content": [*results("done")["content"], REMINDER]}
    read = conversation(prompt("go"), calls("Bash"), with_reminder)
    assert (read.prompt, read.result_count) == ("go", 1)


def test_a_step_matching_the_prompt_is_preferred_over_counting() -> None:
    assert choose_step(conversation(prompt("go")), WHEN) == 0
    resumed = conversation(prompt("go"), calls("Bash"), results("x"), prompt("Resume [baton:resume] now"))
    assert choose_step(resumed, WHEN) == 2
    after = conversation(prompt("[baton:resume]"), calls("Bash"), results("ok"))
    assert choose_step(after, WHEN) == 4  # counting goes on from the matched step


def test_a_step_matching_a_tool_result_is_preferred_and_counting_skips_matching_steps() -> None:
    denied = conversation(prompt("go"), calls("Bash"), results("touch needs approval"))
    assert choose_step(denied, WHEN) == 3
    detour_done = conversation(prompt("go"), calls("Bash"), results("needs approval"), calls("Bash"), results("x"))
    assert choose_step(detour_done, WHEN) == 4
    plain = conversation(prompt("go"), calls("Bash"), results("ok"))
    assert choose_step(plain, WHEN) == 1


def test_once_steps_are_skipped_after_they_fired() -> None:
    scenario = Scenario.from_yaml("steps:\n  - {error: 529, once: true}\n  - text: recovered\n", name="once")
    read = conversation(prompt("go"))
    assert choose_step(read, scenario) == 0
    assert choose_step(read, scenario, fired={0}) == 1


def test_placeholders_are_filled_from_the_request() -> None:
    read = conversation(prompt("go"), calls("Write"), results("written"), calls("Bash"), results("hi"))
    reply = plan_reply(read, load_scenario("write-and-run"), 2)
    assert reply.content == (TextBlock("Created hello.txt and ran `echo hi`, which printed: hi"),)
    write = plan_reply(conversation(prompt("go")), load_scenario("write-and-run"), 0)
    assert write.content[1] == ToolCall(
        "Write", {"file_path": "/home/dev/work/hello.txt", "content": "hello from baton\n"}
    )
    demo = plan_reply(conversation(prompt("go")), load_scenario("demo"), 2)
    assert isinstance(demo.content[1], ToolCall)
    assert demo.content[1].input["old_string"] == "  return a - b;"  # braces in code are left alone


def test_the_working_directory_is_found_in_the_system_field_too() -> None:
    read = read_conversation({"system": [{"type": "text", "text": ENVIRONMENT}], "messages": [prompt("x")]})
    assert read.cwd == "/home/dev/work"
    assert read_conversation({"messages": [prompt("x")]}).cwd is None


def test_requests_offering_no_tools_are_side_requests() -> None:
    assert not conversation(prompt("Generate a title"), tools=False).offers_tools
    assert not read_conversation({"messages": [prompt("x")]}).offers_tools


@pytest.mark.parametrize(
    ("prompts", "expected"),
    [
        (["[scenario:demo] fix it"], "demo"),
        (["[scenario:demo] fix it", "continue"], "demo"),
        (["[scenario:demo]", "now [scenario:plain]"], "plain"),
        (["no marker"], None),
    ],
)
def test_a_prompt_may_name_its_scenario(prompts: list[str], expected: str | None) -> None:
    assert scenario_marker(Conversation(offers_tools=True, prompts=tuple(prompts))) == expected


def test_usage_comes_from_the_scenario_and_the_step() -> None:
    scenario = Scenario.from_yaml(
        "usage: {input_tokens: 7}\nsteps:\n  - {text: hi, usage: {output_tokens: 3}}\n", name="usage"
    )
    reply = plan_reply(conversation(prompt("go")), scenario, 0)
    assert reply.usage == {
        "input_tokens": 7,
        "output_tokens": 3,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
