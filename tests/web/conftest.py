"""The web app in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser), against a real baton server on 127.0.0.1 whose runs are real Claude Code runs on
scripted scenarios (``RunSpec.scenario``: each run its own scripted model server).

Screenshots go to ``$BATON_WEB_SHOTS`` (default ``/tmp/web-shots``).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright
from tests.conftest import make_git_repo
from tests.server._server import RunningServer, running_server

from baton.config import Settings
from baton.runs.spec import RunSpec
from baton.server import ServerConfig
from baton.testing import ScriptedModelServer

MODEL_KEY = "sk-scripted-model-key-0123456789abcdef"

CHROMIUM = "/usr/bin/chromium"
# As root Chromium needs --no-sandbox; the closed network refuses its background connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(os.environ.get("BATON_WEB_SHOTS", "/tmp/web-shots"))
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture
def fresh_profile(playwright: Playwright) -> Iterator[BrowserContext]:
    """A browser with a profile of its own (``--user-data-dir``), as a person's browser."""
    with tempfile.TemporaryDirectory(prefix="baton-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=DESKTOP
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server with the local token (sub ``local``), shared by a module's tests."""
    tmp = tmp_path_factory.mktemp("web")
    # in place: the tests read the repository the run worked on (docs/workspaces.md)
    environ = {"BATON_HOME": str(tmp / "baton-home"), "PATH": os.environ.get("PATH", ""), "BATON_WORKSPACE": "in-place"}
    settings = Settings.load(environ)
    # Runs started over HTTP (the New task page) talk to a scripted model playing `plain`; the
    # tests' own runs name a scenario each (RunSpec.scenario).
    with ScriptedModelServer("plain") as model:
        configured = replace(settings, anthropic_base_url=model.base_url, anthropic_api_key=MODEL_KEY)
        with running_server(configured, ServerConfig()) as server:
            yield server


@pytest.fixture
def context(browser: Browser, web: RunningServer) -> Iterator[BrowserContext]:
    """A signed-in browser context (through the sign-in page, with the token in the fragment)."""
    made = browser.new_context(viewport=DESKTOP)
    try:
        sign_in(made.new_page(), web)
        yield made
    finally:
        made.close()


def sign_in(page: Page, server: RunningServer, next_path: str = "/", base_url: str | None = None) -> Page:
    base_url = base_url or server.base_url
    page.goto(f"{base_url}/login?next={next_path}#token={server.token}")
    page.wait_for_url(f"{base_url}{next_path}")
    page.wait_for_selector("[data-who]:not(:empty)")
    return page


def start_run(server: RunningServer, repo: Path, scenario: str, **fields: Any) -> str:
    """A real Claude Code run on a scripted scenario, executing in the server (owner ``local``)."""
    spec = RunSpec(prompt=fields.pop("prompt", "go"), repo=repo, scenario=scenario, owner="local", **fields)
    handle = server.call(lambda: server.baton.start(spec))
    server.state.handles[handle.run_id] = handle
    return handle.run_id


def wait_ended(server: RunningServer, run_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run: dict[str, Any] = httpx.get(f"{server.base_url}/v1/runs/{run_id}", headers=server.headers()).json()
        if run["finished_at"] is not None:
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not end")


def shot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    return make_git_repo(
        tmp_path / "repo", {"README.md": "# a repository\n", "calc.js": "exports.add = (a, b) => a - b;\n"}
    )
