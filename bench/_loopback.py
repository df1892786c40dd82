"""What the server benchmarks share: ``baton serve``'s application on 127.0.0.1 in a thread of
the bench's process (:func:`serving`), and Debian's Chromium driven by Playwright, signed in to
it (:func:`chromium`). Used by ``bench/web.py``, ``bench/web_decision.py`` and
``bench/sse_fanout.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import FastAPI

from baton.config import Settings
from baton.server import BatonServer, ServerConfig, create_app
from baton.server.state import ServerState

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "Loopback", "chromium", "serving"]

T = TypeVar("T")

CHROMIUM = "/usr/bin/chromium"  # Debian's (make setup), never a downloaded browser
# As root Chromium needs --no-sandbox; the closed network refuses its background connections.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@dataclass(frozen=True)
class Loopback:
    """A server listening on 127.0.0.1 (a random port), its event loop running in a thread."""

    app: FastAPI
    server: BatonServer
    loop: asyncio.AbstractEventLoop
    home: Path

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.baton_server
        return state

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.bound_port}"

    @property
    def token(self) -> str:
        """The local token (``$BATON_HOME/api-token``), subject ``local``."""
        return (self.home / "api-token").read_text().strip()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 300) -> T:
        """Run ``coroutine`` on the server's loop (where its Baton lives) and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


@contextmanager
def serving(settings: Settings, config: ServerConfig | None = None) -> Iterator[Loopback]:
    """``create_app(settings, config)`` served by uvicorn on loopback until the block ends."""
    app = create_app(settings, config or ServerConfig())
    server = BatonServer(app, host="127.0.0.1", port=0, log_level="warning")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the bench server did not start")
        time.sleep(0.01)
    try:
        yield Loopback(app, server, loop, settings.home)
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, through Playwright (imported here: only the web benches need it)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
