"""The inbox in a real browser, deciding real Claude Code runs' gates: approve (two pages on
one gate), deny, edit then approve, always for this run, answer a question, approve a plan,
continue a budget, and approving with the keyboard only."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect
from tests.server._server import RunningServer
from tests.web.conftest import PHONE, shot, start_run, wait_ended

pytestmark = [pytest.mark.claude, pytest.mark.timeout(180)]


def gates_of(web: RunningServer, run_id: str) -> list[dict[str, Any]]:
    page: dict[str, Any] = httpx.get(f"{web.base_url}/v1/gates?run_id={run_id}", headers=web.headers()).json()
    return list(page["gates"])


def open_card(page: Page, web: RunningServer, run_id: str, timeout: float = 60) -> Locator:
    """The inbox card of the run's pending gate, once the run has opened one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = [gate for gate in gates_of(web, run_id) if gate["status"] == "pending"]
        if pending:
            card = page.locator(f"[data-gate-id='{pending[-1]['id']}']")
            expect(card).to_be_visible(timeout=5_000)
            return card
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} opened no gate")


def inbox(context: BrowserContext, web: RunningServer) -> Page:
    page = context.new_page()
    page.goto(web.base_url + "/inbox")
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    return page


def test_approve_from_the_inbox_and_a_second_page_follows(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    first, second = inbox(context, web), inbox(context, web)
    run_id = start_run(web, git_repo, "needs-approval")
    card = open_card(first, web, run_id)
    other = open_card(second, web, run_id)
    expect(card).to_contain_text("touch approved.txt")
    expect(card).to_contain_text("Bound to input")
    expect(first.locator("[data-pending-count]")).to_have_text("1")
    assert first.title().startswith("(1) ")
    shot(first, "inbox-1280")
    first.set_viewport_size(PHONE)
    assert first.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(first, "inbox-390")
    card.get_by_role("button", name="Approve", exact=True).click()
    # The other page learns of the decision within a second (the gate stream), without a reload.
    expect(other.get_by_role("button", name="Approve", exact=True)).to_have_count(0, timeout=1_000)
    expect(other.locator("[data-pending-count]")).to_be_hidden(timeout=1_000)
    run = wait_ended(web, run_id)
    assert run["status"] == "finished"
    assert (git_repo / "approved.txt").exists()
    (gate,) = gates_of(web, run_id)
    assert gate["status"] == "approved" and gate["decided_by"] == "local"


def test_deny_with_a_reason(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    page = inbox(context, web)
    run_id = start_run(web, git_repo, "needs-approval")
    card = open_card(page, web, run_id)
    card.get_by_label("Reason (shown to the agent on deny)").fill("not today")
    card.get_by_role("button", name="Deny").click()
    wait_ended(web, run_id)
    (gate,) = gates_of(web, run_id)
    assert gate["status"] == "denied" and gate["decision"]["reason"] == "not today"
    assert not (git_repo / "approved.txt").exists()
    run_page = context.new_page()
    run_page.goto(f"{web.base_url}/runs/{run_id}")
    expect(run_page.locator(f"[data-gate-id='{gate['id']}']")).to_contain_text("not today")


def test_edit_the_input_then_approve_runs_the_edited_command(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    page = inbox(context, web)
    run_id = start_run(web, git_repo, "needs-approval")
    card = open_card(page, web, run_id)
    card.get_by_text("Edit the input, then approve").click()
    editor = card.get_by_label("Input (JSON)")
    editor.fill(editor.input_value().replace("touch approved.txt", "touch edited.txt"))
    card.get_by_role("button", name="Approve edited").click()
    wait_ended(web, run_id)
    assert (git_repo / "edited.txt").exists() and not (git_repo / "approved.txt").exists()
    (gate,) = gates_of(web, run_id)
    assert gate["decision"]["updated_input"]["command"] == "touch edited.txt"


def test_always_for_this_run_then_a_matching_call_opens_no_gate(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    page = inbox(context, web)
    run_id = start_run(web, git_repo, "gate-twice")
    card = open_card(page, web, run_id)
    expect(card).to_contain_text("Bash(mkdir:*)")
    card.get_by_role("button", name="Always for this run").click()
    second = open_card(page, web, run_id)  # `mkdir -p two` ran without a gate; `rm -rf one` asks
    expect(second).to_contain_text("rm -rf one")
    second.get_by_role("button", name="Approve", exact=True).click()
    wait_ended(web, run_id)
    gates = gates_of(web, run_id)
    assert [gate["input"]["command"] for gate in gates] == ["mkdir -p one", "rm -rf one"]
    assert gates[0]["decision"]["remember_rule"] == "Bash(mkdir:*)"
    assert (git_repo / "two").is_dir()


def test_answer_a_question(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    page = inbox(context, web)
    run_id = start_run(web, git_repo, "ask-question")
    card = open_card(page, web, run_id)
    card.get_by_role("radio", name="SQLite").check()
    card.get_by_role("checkbox", name="Caching").check()
    card.get_by_role("checkbox", name="Metrics").check()
    card.get_by_role("button", name="Answer").click()
    wait_ended(web, run_id)
    (gate,) = gates_of(web, run_id)
    assert gate["status"] == "answered"
    answers = {answer["header"]: answer["selected"] for answer in gate["decision"]["answers"]}
    assert answers == {"Database": ["SQLite"], "Extras": ["Caching", "Metrics"]}
    run_page = context.new_page()
    run_page.goto(f"{web.base_url}/runs/{run_id}")
    expect(run_page.locator("li.ev-agent").last).to_contain_text("SQLite")


def test_approve_a_plan(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    page = inbox(context, web)
    run_id = start_run(web, git_repo, "plan-review", permission_mode="plan", allow=("Bash(echo:*)",))
    card = open_card(page, web, run_id)
    expect(card.locator(".plan")).to_contain_text("Make add return a + b")
    shot(page, "inbox-plan-1280")
    card.get_by_role("button", name="Approve plan").click()
    run = wait_ended(web, run_id)
    assert run["status"] == "finished"
    (gate,) = gates_of(web, run_id)
    assert gate["kind"] == "plan_review" and gate["status"] == "approved"


def test_continue_a_budget(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    page = inbox(context, web)
    run_id = start_run(
        web, git_repo, "write-and-run", permission_mode="acceptEdits", allow=("Bash(echo:*)",), budget_turns=1
    )
    card = open_card(page, web, run_id)
    expect(card).to_contain_text("resource limit")
    card.get_by_label("Turns").fill("10")
    card.get_by_role("button", name="Continue").click()
    run = wait_ended(web, run_id)
    assert run["status"] == "finished"
    (gate,) = gates_of(web, run_id)
    assert gate["kind"] == "resource_limit" and gate["decision"]["budget"]["turns"] == 10


def test_keyboard_only_open_the_inbox_and_approve(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    page = context.new_page()
    page.goto(web.base_url + "/")
    run_id = start_run(web, git_repo, "needs-approval")
    gates: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while not gates and time.monotonic() < deadline:
        gates = [gate for gate in gates_of(web, run_id) if gate["status"] == "pending"]
        time.sleep(0.1)
    # Tab to the Inbox link, open it, then Tab to the gate's Approve button.
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent").startswith("Inbox"):
            break
    page.keyboard.press("Enter")
    page.wait_for_url(web.base_url + "/inbox")
    expect(page.locator(f"[data-gate-id='{gates[0]['id']}']")).to_be_visible()
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Approve":
            break
    assert page.evaluate("document.activeElement.closest('[data-gate-id]').dataset.gateId") == gates[0]["id"]
    page.keyboard.press("Enter")
    run = wait_ended(web, run_id)
    assert run["status"] == "finished" and (git_repo / "approved.txt").exists()
