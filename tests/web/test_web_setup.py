"""The run page shows the workspace's setup: its command, its output as it comes, how it ended;
and, for a repository whose ``.baton/setup`` was skipped, why and how to have it run."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect
from tests.conftest import make_git_repo
from tests.server._server import RunningServer
from tests.web.conftest import shot, start_run, wait_ended

pytestmark = [pytest.mark.claude, pytest.mark.timeout(180)]


def test_the_run_page_shows_the_setup_and_its_output(
    context: BrowserContext, web: RunningServer, git_repo: Path
) -> None:
    setup = "echo installing; echo 'two <b>lines</b>'"
    run_id = start_run(
        web,
        git_repo,
        "write-prompt-file",
        prompt="a.txt",
        permission_mode="acceptEdits",
        workspace="worktree",
        setup=setup,
    )
    page = context.new_page()
    page.goto(f"{web.base_url}/runs/{run_id}")
    expect(page.locator("li[data-end]")).to_contain_text("Finished", timeout=60_000)
    wait_ended(web, run_id)
    block = page.locator("ol.events li.ev-setup")
    expect(block).to_have_count(1)
    expect(block.locator("code")).to_have_text(setup)
    expect(block).to_contain_text("--setup")
    expect(block.locator("pre.setup-output")).to_have_text("installing\ntwo <b>lines</b>")  # text, not markup
    expect(block.locator(".tool-state")).to_contain_text("done")
    expect(block).to_have_class("ev ev-setup ok")
    # before the task starts
    classes = page.locator("ol.events li.ev").evaluate_all("nodes => nodes.map(node => node.className)")
    assert classes.index("ev ev-setup ok") < classes.index("ev ev-meta"), classes
    shot(page, "run-setup-1280")


def test_the_run_page_says_why_a_setup_was_skipped_and_how_to_run_it(
    context: BrowserContext, web: RunningServer, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "untrusted", {".baton/setup": "echo never\n", "README.md": "# r\n"})
    run_id = start_run(
        web, repo, "write-prompt-file", prompt="b.txt", permission_mode="acceptEdits", workspace="worktree"
    )
    page = context.new_page()
    page.goto(f"{web.base_url}/runs/{run_id}")
    expect(page.locator("li[data-end]")).to_contain_text("Finished", timeout=60_000)
    skipped = page.locator("ol.events li.ev-setup-skipped")
    expect(skipped).to_contain_text("is not a trusted repository")
    expect(skipped.locator(".hint")).to_contain_text(f'add "{repo.resolve()}" to trusted under [workspace]')
    expect(skipped.locator(".hint")).to_contain_text("--setup CMD")
    expect(page.locator("ol.events li.ev-setup")).to_have_count(0)
