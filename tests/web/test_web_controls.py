"""The run page's controls and results, the runs list's pages, and what a gate card and the
header say, in a real browser on real Claude Code runs (scripted models): a message to an
interactive run, a new permission mode, cancel; the diff between any two snapshots; the result
branch pushed and merged from its buttons; **Older** / **Newer**; a stale card's binding
mismatch; new gates announced (Notification API) and counted in the favicon; a JWT signed in
on the sign-in page sees only its subject's runs."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, expect
from tests.server._server import KeyPair, RunningServer, make_key_pair, running_server, sign
from tests.web.conftest import DESKTOP, PHONE, shot, start_run, wait_ended
from tests.web.test_web_inbox import gates_of, inbox, open_card

from baton.config import Settings
from baton.server import ServerConfig

pytestmark = [pytest.mark.claude, pytest.mark.timeout(180)]


def run_of(web: RunningServer, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = httpx.get(f"{web.base_url}/v1/runs/{run_id}", headers=web.headers()).json()
    return run


def until(check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_an_interactive_run_takes_a_message_a_new_mode_and_a_cancel(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    run_id = start_run(web, git_repo, "plain", run_mode="interactive")
    page = context.new_page()
    page.goto(f"{web.base_url}/runs/{run_id}")
    agent = page.locator("li.ev-agent")
    expect(agent.first).to_contain_text("Hello from baton's scripted model", timeout=60_000)
    page.get_by_label("Message").fill("Once more, please.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("li.ev-user").filter(has_text="Once more, please.")).to_be_visible(timeout=30_000)
    expect(agent).to_have_count(2, timeout=60_000)  # the agent answered the message
    page.get_by_label("Permission mode").select_option("acceptEdits")
    page.get_by_role("button", name="Change mode").click()
    expect(page.locator(".controls")).to_contain_text("Mode: acceptEdits.")
    until(lambda: run_of(web, run_id)["permission_mode"] == "acceptEdits")
    page.get_by_role("button", name="Cancel run").click()
    run = wait_ended(web, run_id)
    assert run["status"] == "cancelled"
    expect(page.locator(".status").first).to_have_text("cancelled", timeout=15_000)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)


def test_the_diff_between_any_two_snapshots_then_the_result_pushed_and_merged(
    context: BrowserContext, web: RunningServer, git_repo: Path, tmp_path: Path
) -> None:
    run_id = start_run(
        web, git_repo, "three-steps", permission_mode="acceptEdits", allow=("Bash(sleep:*)", "Bash(echo:*)")
    )
    page = context.new_page()
    page.goto(f"{web.base_url}/runs/{run_id}")
    expect(page.locator("li[data-end]")).to_be_visible(timeout=60_000)
    wait_ended(web, run_id)
    listed = httpx.get(f"{web.base_url}/v1/runs/{run_id}/snapshots", headers=web.headers()).json()["snapshots"]
    first = next(s for s in listed if "one.txt" in s["added"])
    last = next(s for s in listed if "two.txt" in s["added"])
    assert first["id"] != last["id"], listed
    out = page.locator(".diff-out")
    page.get_by_label("From", exact=True).select_option("start")
    page.get_by_label("To", exact=True).select_option(last["id"])
    expect(out).to_contain_text("+++ b/two.txt")
    expect(out).to_contain_text("+++ b/one.txt")  # from the start: both files
    page.get_by_label("From", exact=True).select_option(first["id"])  # between two snapshots: what came after the first
    expect(out).not_to_contain_text("one.txt")
    expect(out).to_contain_text("+++ b/two.txt")
    # The result: a branch, pushed to a remote, merged into the checked-out branch.
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(git_repo, "remote", "add", "origin", str(remote))
    git(git_repo, "branch", "release")  # (the checked-out branch holds the run's files uncommitted: in place)
    page.get_by_role("button", name="Make a branch").click()
    expect(page.get_by_role("button", name="Push")).to_be_visible(timeout=15_000)
    branch = until(lambda: (run_of(web, run_id).get("workspace") or {}).get("branch"))
    page.get_by_label("Remote").fill("origin")
    page.get_by_role("button", name="Push").click()
    expect(page.locator("[data-result-feedback]")).to_contain_text(f"Pushed {branch}", timeout=15_000)
    assert git(remote, "branch", "--list", branch).strip("* ") == branch
    page.get_by_label("Merge into").fill("release")
    page.get_by_role("button", name="Merge").click()
    expect(page.locator("[data-result-feedback]")).to_contain_text(f"Merged {branch} into release", timeout=15_000)
    assert git(git_repo, "show", "release:two.txt") == "two"
    shot(page, "run-result-1280")


def test_the_runs_list_pages_older_and_newer(context: BrowserContext, web: RunningServer) -> None:
    async def many() -> list[str]:
        return [
            (await web.baton.store.create_run(agent="claude", owner="local", repo="/tmp/paged")).id for _ in range(60)
        ]

    made = web.call(many)
    listed = httpx.get(f"{web.base_url}/v1/runs?order=newest&repo=/tmp/paged&limit=100", headers=web.headers()).json()[
        "runs"
    ]
    newest_first = [run["id"] for run in listed]
    assert sorted(newest_first) == sorted(made)
    page = context.new_page()
    page.goto(f"{web.base_url}/?repo=/tmp/paged")
    rows = page.locator("a[data-run-id]")
    expect(rows).to_have_count(50)
    first_page = rows.evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert first_page == newest_first[:50]
    expect(page.get_by_role("button", name="Newer")).to_have_count(0)
    page.get_by_role("button", name="Older").click()
    expect(rows).to_have_count(10)
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.runId)") == newest_first[50:]
    expect(page.get_by_role("button", name="Older")).to_have_count(0)
    page.get_by_role("button", name="Newer").click()
    expect(rows).to_have_count(50)
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.runId)") == first_page


def test_a_card_that_no_longer_matches_its_gate_says_so_and_decides_nothing(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    page = inbox(context, web)
    run_id = start_run(web, git_repo, "needs-approval")
    card = open_card(page, web, run_id)
    gate_id = card.get_attribute("data-gate-id")
    # What the page shows no longer matches the gate (as after the agent changed its call).
    page.evaluate(
        """async (id) => {
          const { gateStore } = await import("/static/gates.js");
          gateStore.gates.get(id).bound_input_hash = "0".repeat(64);
        }""",
        gate_id,
    )
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url) if request.method == "POST" else None)
    card.get_by_role("button", name="Approve", exact=True).click()
    alert = card.get_by_role("alert")
    expect(alert).to_contain_text("This gate no longer matches what is shown")
    expect(alert).to_contain_text("approval_binding_mismatch")
    time.sleep(1)
    assert [url for url in requests if "/decide" in url] == [f"{web.base_url}/v1/gates/{gate_id}/decide"]  # no retry
    (gate,) = gates_of(web, run_id)
    assert gate["status"] == "pending"
    decided = httpx.post(
        f"{web.base_url}/v1/gates/{gate_id}/decide",
        headers=web.headers(),
        json={"decision": "deny", "bound_call_id": gate["bound_call_id"], "bound_input_hash": gate["bound_input_hash"]},
    )
    assert decided.status_code == 200
    wait_ended(web, run_id)


def test_a_new_gate_is_announced_and_counted_in_the_title_and_favicon(
    browser: Browser, web: RunningServer, git_repo: Path
) -> None:
    context = browser.new_context(viewport=DESKTOP)
    context.grant_permissions(["notifications"], origin=web.base_url)
    context.add_init_script(
        """(() => {
          const Real = window.Notification;
          window.__notes = [];
          window.Notification = class extends Real {
            constructor(title, options) {
              super(title, options);
              window.__notes.push([title, options && options.body]);
            }
          };
        })();"""
    )
    try:
        page = context.new_page()
        page.goto(f"{web.base_url}/login?next=/inbox#token={web.token}")
        page.wait_for_url(f"{web.base_url}/inbox")
        idle_icon = page.locator("link[rel=icon]").get_attribute("href")
        page.get_by_label("Announce new gates").check()
        expect(page.get_by_label("Announce new gates")).to_be_checked()
        run_id = start_run(web, git_repo, "needs-approval")
        card = open_card(page, web, run_id)
        until(lambda: page.evaluate("window.__notes.length"))
        assert page.evaluate("window.__notes") == [["baton: a gate waits", "Bash: touch approved.txt"]]
        assert page.title() == "(1) Inbox · baton"
        busy_icon = page.locator("link[rel=icon]").get_attribute("href")
        assert busy_icon and busy_icon.startswith("data:image/png") and busy_icon != idle_icon
        card.get_by_role("button", name="Approve", exact=True).click()
        expect(page.locator("[data-pending-count]")).to_be_hidden()
        assert page.title() == "Inbox · baton"
        wait_ended(web, run_id)
    finally:
        context.close()


@pytest.fixture(scope="module")
def key() -> KeyPair:
    return make_key_pair()


@pytest.fixture(scope="module")
def jwt_web(tmp_path_factory: pytest.TempPathFactory, key: KeyPair) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("jwt-web")
    settings = Settings.load({"BATON_HOME": str(tmp / "home")})
    with running_server(settings, ServerConfig(jwt_public_keys=(key.write_public(tmp / "k.pem"),))) as server:
        yield server


def test_a_jwt_signed_in_on_the_page_sees_only_its_subjects_runs(
    browser: Browser, jwt_web: RunningServer, key: KeyPair
) -> None:
    async def runs() -> tuple[str, str]:
        store = jwt_web.baton.store
        mine = await store.create_run(agent="claude", owner="grace", repo="/tmp/grace")
        theirs = await store.create_run(agent="claude", owner="mallory", repo="/tmp/mallory")
        return mine.id, theirs.id

    mine, theirs = jwt_web.call(runs)
    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        page.goto(jwt_web.base_url + "/")
        page.wait_for_url(f"{jwt_web.base_url}/login?next=/")
        page.get_by_label("Token").fill(sign(key, sub="grace", scope="runs:read gates:decide"))
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(jwt_web.base_url + "/")
        expect(page.locator("[data-who]")).to_have_text("grace")
        expect(page.locator(f"a[data-run-id='{mine}']")).to_be_visible()
        assert page.locator("a[data-run-id]").evaluate_all("rows => rows.map(r => r.dataset.runId)") == [mine]
        page.goto(f"{jwt_web.base_url}/runs/{theirs}")
        expect(page.get_by_role("alert")).to_contain_text("run_not_found")
        assert "mallory" not in page.content()
    finally:
        context.close()


def test_a_failing_test_run_is_highlighted_in_light_and_dark(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    (git_repo / "calc.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { add } = require('./calc');\ntest('adds', () => assert.strictEqual(add(2, 3), 5));\n"
    )
    run_id = start_run(web, git_repo, "node-test-pipe", allow=("Bash(node:*)", "Bash(tail:*)"))
    page = context.new_page()
    page.goto(f"{web.base_url}/runs/{run_id}")
    expect(page.locator("li[data-end]")).to_be_visible(timeout=60_000)
    badge = page.locator("li.ev-tool .test")
    expect(badge).to_have_text("tests failed (node:test)")
    assert "test-fail" in (badge.get_attribute("class") or "")
    expect(page.locator("li.ev-tool.failed")).to_contain_text(
        "exit 0"
    )  # the pipe's status; the block shows the failure
    light = badge.evaluate("e => [getComputedStyle(e).color, getComputedStyle(document.body).backgroundColor]")
    page.emulate_media(color_scheme="dark")
    dark = badge.evaluate("e => [getComputedStyle(e).color, getComputedStyle(document.body).backgroundColor]")
    assert light != dark and light[1] != dark[1]  # the page follows the system's dark scheme
    page.set_viewport_size(PHONE)
    shot(page, "run-dark-390")
    wait_ended(web, run_id)
