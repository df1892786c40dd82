"""The runs page and a run's page: live events exactly once and in order (also across a reload
and a cut connection), diffs and command output, hostile Markdown shown as text, the phone
layout; screenshots of each page at 1280 and 390 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Request, expect
from tests.server._server import RunningServer
from tests.web._proxy import CuttableProxy
from tests.web.conftest import DESKTOP, PHONE, shot, sign_in, start_run, wait_ended

from baton.events.project import project

pytestmark = [pytest.mark.claude, pytest.mark.timeout(180)]

HOSTILE = (
    'echo \'<script>window.__xss = 1</script> <img src=x onerror="window.__xss = 2"> '
    '[click me](javascript:window.__xss=3) **bold** <a href="javascript:alert(1)">a</a>\''
)


def shown_seqs(page: Page) -> list[int]:
    seqs: list[int] = page.evaluate("document.querySelector('ol.events').batonSeqs")
    return seqs


def stored_seqs(web: RunningServer, run_id: str) -> list[int]:
    entries = web.call(lambda: web.baton.log.read(run_id))
    return [event["seq"] for event in project(entries)]


def no_horizontal_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"] if page.viewport_size else True, f"scrolls sideways: {width}"


def header_links_visible(page: Page) -> None:
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Runs", "Inbox", "New task"):
        link = nav.get_by_role("link", name=name)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= (page.viewport_size or DESKTOP)["width"]


def test_a_run_watched_live_then_reloaded_shows_every_event_once(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    run_id = start_run(web, git_repo, "write-and-run", permission_mode="acceptEdits", allow=("Bash(echo:*)",))
    page = context.new_page()
    page.goto(f"{web.base_url}/runs/{run_id}")
    expect(page.locator("li[data-end]")).to_contain_text("Finished", timeout=60_000)
    wait_ended(web, run_id)
    expected = stored_seqs(web, run_id)
    assert shown_seqs(page) == expected
    events = page.locator("ol.events")
    expect(events).to_contain_text("I'll create hello.txt first.")
    expect(events.locator("pre.diff")).to_contain_text("+hello from baton")
    expect(events.locator("pre.command")).to_contain_text("$ echo hi")
    expect(events.locator("pre.output")).to_contain_text("hi")
    expect(events.locator("code").filter(has_text="echo hi")).to_be_visible()  # the Markdown's inline code
    expect(page.locator("#diff-out, .diff-out")).to_contain_text("+++ b/hello.txt")
    expect(page.locator(".facts")).to_contain_text("Tokens")
    # The result as a branch, from the page (POST /v1/runs/{id}/branch); then push and merge are offered.
    page.get_by_role("button", name="Make a branch").click()
    expect(page.locator(".facts")).to_contain_text("Branch", timeout=15_000)
    expect(page.get_by_role("button", name="Merge")).to_be_visible()
    shot(page, "run-1280")
    page.set_viewport_size(PHONE)
    header_links_visible(page)
    no_horizontal_scroll(page)
    shot(page, "run-390")
    page.set_viewport_size(DESKTOP)
    page.reload()
    expect(page.locator("li[data-end]")).to_be_visible(timeout=30_000)
    assert shown_seqs(page) == expected


def test_a_cut_connection_resumes_without_a_gap_or_a_repeat(
    browser: Browser, web: RunningServer, git_repo: Path
) -> None:
    run_id = start_run(web, git_repo, "long-command", allow=("Bash(sleep:*)", "Bash(echo:*)"))
    with CuttableProxy(int(web.base_url.rsplit(":", 1)[1])) as proxy:
        context = browser.new_context(viewport=DESKTOP)
        streams: list[Request] = []  # the page's requests for the run's events
        context.on("request", lambda request: streams.append(request) if "/events" in request.url else None)
        try:
            page = sign_in(context.new_page(), web, f"/runs/{run_id}", base_url=proxy.base_url)
            expect(page.locator("ol.events")).to_contain_text("sleep", timeout=60_000)
            before = shown_seqs(page)
            assert before
            assert proxy.cut() >= 1  # the page's event stream (and any other connection) dropped
            expect(page.locator("li[data-end]")).to_be_visible(timeout=60_000)
            wait_ended(web, run_id)
            assert shown_seqs(page) == stored_seqs(web, run_id)
            assert page.evaluate("document.querySelector('ol.events').batonReconnects") >= 1
            # It resumed after what it had (Last-Event-ID), not from the start.
            runs = [request for request in streams if f"/v1/runs/{run_id}/events" in request.url]
            assert len(runs) >= 2 and "last-event-id" not in runs[0].headers
            assert int(runs[1].headers["last-event-id"]) >= before[-1]
        finally:
            context.close()


def test_hostile_markdown_is_shown_as_text(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    run_id = start_run(web, git_repo, "bash-prompt", prompt=HOSTILE, allow=("Bash(echo:*)",))
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{web.base_url}/runs/{run_id}")
    expect(page.locator("li[data-end]")).to_be_visible(timeout=60_000)
    agent = page.locator("li.ev-agent").last
    expect(agent).to_contain_text("<script>window.__xss = 1</script>")
    expect(agent).to_contain_text('onerror="window.__xss = 2"')
    assert page.evaluate("window.__xss") is None and not dialogs
    assert page.locator("ol.events script, ol.events img, ol.events [onerror]").count() == 0
    hrefs = page.locator("ol.events a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert all(href and not href.lower().startswith("javascript") for href in hrefs)
    expect(agent.locator("strong")).to_have_text("bold")  # Markdown still renders
    page.locator("ol.events a").evaluate_all("links => links.forEach(a => a.click())")
    assert page.evaluate("window.__xss") is None
    wait_ended(web, run_id)


def test_the_runs_page_lists_links_filters_and_fits_a_phone(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    prompt = "Explain what this repository is for, in one paragraph " + "x" * 300
    run_id = start_run(web, git_repo, "plain", prompt=prompt + "\nSecond line, not listed")
    wait_ended(web, run_id)
    page = context.new_page()
    page.goto(web.base_url + "/")
    row = page.locator(f"a[data-run-id='{run_id}']")
    expect(row).to_be_visible()
    expect(row).to_contain_text("finished")
    expect(row).to_contain_text("tok")
    # The first line of its prompt (at most 200 characters from the API, cut to the row's width).
    listed = row.locator(".prompt")
    expect(listed).to_have_text(prompt[:199] + "…")
    assert "Second line" not in row.inner_text()
    assert listed.evaluate("e => e.scrollWidth > e.clientWidth")  # shown on one line, ellipsed
    ids = page.locator("a[data-run-id]").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert ids == sorted(ids, reverse=True)  # newest first
    shot(page, "runs-1280")
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(f"a[data-run-id='{run_id}']")).to_have_count(0)
    assert "status=failed" in page.url
    page.get_by_label("Status").select_option("finished")
    page.get_by_role("button", name="Filter").click()
    expect(row).to_be_visible()
    page.set_viewport_size(PHONE)
    header_links_visible(page)
    no_horizontal_scroll(page)
    shot(page, "runs-390")
    row.click()
    page.wait_for_url(f"{web.base_url}/runs/{run_id}")


def test_new_task_starts_a_run(context: BrowserContext, web: RunningServer, git_repo: Path) -> None:
    page = context.new_page()
    page.goto(web.base_url + "/new")
    expect(page.get_by_role("heading", name="New task")).to_be_visible()
    shot(page, "new-1280")
    page.set_viewport_size(PHONE)
    header_links_visible(page)
    no_horizontal_scroll(page)
    shot(page, "new-390")
    page.set_viewport_size(DESKTOP)
    page.get_by_label("Repository").fill(str(git_repo))
    page.get_by_label("Prompt").fill("say hello")
    page.get_by_label("Permission mode").select_option("plan")
    page.get_by_label("Turns").fill("5")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(f"{web.base_url}/runs/*")
    run_id = page.url.rsplit("/", 1)[1]
    run: dict[str, Any] = httpx.get(f"{web.base_url}/v1/runs/{run_id}", headers=web.headers()).json()
    assert run["permission_mode"] == "plan" and run["repo"] == str(git_repo.resolve())
    expect(page.locator("li.ev-agent")).to_contain_text("Hello from baton's scripted model", timeout=60_000)
    expect(page.locator("li[data-end]")).to_be_visible(timeout=60_000)
    wait_ended(web, run_id)
