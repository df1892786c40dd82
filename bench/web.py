"""The web app in Debian's Chromium (Playwright, headless), against a server on loopback.

- ``web_run_page_first_paint_ms``: a run of ``EVENTS`` runner events (agent messages and
  commands with output, then its end) already in the log; from the navigation's start to the
  first event on the page (``performance.now()`` when the first ``li.ev`` is added). Target
  ≤ 1,000 ms. ``web_run_page_all_events_ms``: until the last one (the end) is on the page
  (no target); ``web_run_page_longest_task_ms``: the longest main-thread task meanwhile
  (PerformanceObserver ``longtask``; 0 when none passed 50 ms), target ≤ 200 ms.
- ``web_gate_to_screen_p50_ms`` / ``_p99_ms``: a gate opened (its row committed, through
  ``GateLedger.open`` on the server's loop) → its card in an open inbox page (the page's clock
  when the card is added; same machine, same wall clock), ``GATES`` gates one after another.
  Target p99 ≤ 500 ms (the gate stream polls the store every 0.2 s).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from baton.config import Settings
from baton.gates.ledger import GateLedger
from baton.server import BatonServer, ServerConfig, create_app

from . import Metric

METRICS = (
    "web_run_page_first_paint_ms",
    "web_run_page_all_events_ms",
    "web_run_page_longest_task_ms",
    "web_gate_to_screen_p50_ms",
    "web_gate_to_screen_p99_ms",
)
EVENTS = 10_000
GATES = 30
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
_OBSERVE = """
window.__bench = {first: null, end: null, longest: 0, cards: {}};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__bench.longest = Math.max(window.__bench.longest, entry.duration);
}).observe({type: "longtask", buffered: true});
new MutationObserver((records) => {
  const bench = window.__bench;
  const all = (node, selector) => [...(node.matches(selector) ? [node] : []), ...node.querySelectorAll(selector)];
  for (const record of records) for (const node of record.addedNodes) {
    if (!(node instanceof Element)) continue;
    if (bench.first === null && all(node, "li.ev").length) bench.first = performance.now();
    if (all(node, "li[data-end]").length) bench.end = performance.now();
    for (const card of all(node, "[data-gate-id]")) {
      if (!(card.dataset.gateId in bench.cards)) bench.cards[card.dataset.gateId] = Date.now();
    }
  }
}).observe(document, {childList: true, subtree: true});
"""


def _entries(run_id: str, events: int) -> list[tuple[str, str, dict[str, Any]]]:
    def update(body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        params = {"sessionId": "s1", "update": body}
        return ("from_agent", "session/update", {"jsonrpc": "2.0", "method": "session/update", "params": params})

    started = {"run_id": run_id, "task_id": None, "agent": "claude", "model": "m", "cwd": "/tmp/bench-web",
               "permission_mode": "default", "run_mode": "background"}  # fmt: skip
    out: list[tuple[str, str, dict[str, Any]]] = [
        ("baton", "_baton/run_started", {"jsonrpc": "2.0", "method": "_baton/run_started", "params": started}),
        ("baton", "_baton/agent_session", {"jsonrpc": "2.0", "method": "_baton/agent_session",
                                           "params": {"agent_session_id": "s1", "adapter": "claude"}}),
    ]  # fmt: skip
    for i in range((events - 2) // 3):
        text = {"type": "text", "text": f"Step {i}: I will run **echo {i}** next.\n"}
        out.append(update({"sessionUpdate": "agent_message_chunk", "content": text}))
        out.append(update({"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": "Bash", "kind": "execute",
                           "status": "pending", "rawInput": {"command": f"echo {i}"},
                           "_meta": {"baton": {"tool_name": "Bash", "command": f"echo {i}"}}}))  # fmt: skip
        out.append(update({"sessionUpdate": "tool_call_update", "toolCallId": f"t{i}", "status": "completed",
                           "content": [{"type": "content", "content": {"type": "text", "text": f"{i}\n"}}],
                           "_meta": {"baton": {"is_error": False, "exit_code": 0}}}))  # fmt: skip
    status = {"status": "finished", "reason": "end_turn", "stop_reason": "end_turn"}
    out.append(("baton", "_baton/status", {"jsonrpc": "2.0", "method": "_baton/status", "params": status}))
    return out


def run() -> dict[str, Metric]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="baton-bench-web-") as scratch:
        home = Path(scratch)
        settings = Settings.load({"BATON_HOME": str(home)})
        app = create_app(settings, ServerConfig())
        server = BatonServer(app, host="127.0.0.1", port=0, log_level="warning")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=lambda: loop.run_until_complete(server.serve()), daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)

        def on_loop(coroutine: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result(300)

        baton = app.state.baton_server.baton
        base = f"http://127.0.0.1:{server.bound_port}"
        token = (home / "api-token").read_text().strip()
        try:
            record = on_loop(baton.store.create_run(agent="claude", owner="local", repo="/tmp/bench-web"))

            async def write() -> None:
                baton.log.open_run(record.id)
                for direction, method, payload in _entries(record.id, EVENTS):
                    baton.log.append(record.id, direction, method, payload)
                await baton.log.flush()
                baton.log.close_run(record.id)
                await baton.store.update_run(record.id, status="running")
                await baton.store.update_run(record.id, status="finished", finished_at="2026-12-02T00:00:01Z")

            on_loop(write())
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(_OBSERVE)
                page = context.new_page()
                page.goto(f"{base}/login?next=/#token={token}")
                page.wait_for_url(base + "/")
                page.goto(f"{base}/runs/{record.id}")
                deadline = time.monotonic() + 120
                while (timings := page.evaluate("window.__bench"))["end"] is None and time.monotonic() < deadline:
                    time.sleep(0.05)  # (wait_for_function evaluates a string: the page's CSP forbids it)
                inbox = context.new_page()
                inbox.goto(base + "/inbox")
                inbox.wait_for_selector("text=Nothing waits for a decision.")
                delays = []
                for i in range(GATES):
                    gate_run = on_loop(baton.store.create_run(agent="claude", owner="local", repo="/tmp/bench-web"))

                    async def open_gate(run_id: str = gate_run.id, n: int = i) -> tuple[str, float]:
                        gate, _ = await GateLedger(baton.store).open(
                            run_id, "tool", tool_name="Bash", bound_call_id=f"c{n}", bound_input_hash=f"h{n}",
                            input={"command": f"echo {n}"}, summary=f"Bash: echo {n}",
                        )  # fmt: skip
                        return gate.id, time.time() * 1000

                    gate_id, opened_ms = on_loop(open_gate())
                    inbox.wait_for_selector(f"[data-gate-id='{gate_id}']", timeout=10_000)
                    shown_ms = inbox.evaluate(f"window.__bench.cards['{gate_id}']")
                    delays.append(shown_ms - opened_ms)
                browser.close()
        finally:
            server.should_exit = True
            thread.join(30)
    delays.sort()
    p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]

    def metric(value: float, target: float) -> Metric:
        return {"value": round(value, 1), "unit": "ms", "target": target, "better": "lower", "reference": None}

    return {
        "web_run_page_first_paint_ms": metric(timings["first"], 1000),
        "web_run_page_all_events_ms": metric(timings["end"], 10_000),
        "web_run_page_longest_task_ms": metric(timings["longest"], 200),
        "web_gate_to_screen_p50_ms": metric(statistics.median(delays), 500),
        "web_gate_to_screen_p99_ms": metric(p99, 500),
    }
