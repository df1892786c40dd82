"""The web app in Debian's Chromium (Playwright, headless), against a server on loopback.

Each page figure is the median of ``LOADS`` loads, each in a new tab of one signed-in browser.

- ``web_run_page_first_paint_ms``: a run of 10,000 runner events (agent messages and commands
  with output, then its end) already in the log; from the navigation's start to the first
  event on the page (``performance.now()`` when the first ``li.ev`` is added). Target
  ≤ 1,000 ms. ``web_run_page_all_events_ms``: until the last one (the end) is on the page
  (no target); ``web_run_page_longest_task_ms``: the longest main-thread task meanwhile
  (PerformanceObserver ``longtask``; 0 when none passed 50 ms), target ≤ 200 ms.
- ``web_run_page_50k_first_paint_ms`` / ``_all_events_ms`` / ``_longest_task_ms``: the same
  for a run of 50,000 events (targets ≤ 1,000 and ≤ 200 ms).
- ``web_runs_page_longest_task_ms``: the runs page (``/``) over a store of 1,000 runs (one in
  twenty running, so the page reads its list again every 3 s): the longest main-thread task
  from the navigation until every page of the list has been shown — the first page, its live
  refresh, then **Older** clicked until the last page. Target ≤ 200 ms.
  ``web_runs_page_first_rows_ms``: navigation → the first row (the run page's ≤ 1,000 ms target).
- ``web_gate_to_screen_p50_ms`` / ``_p99_ms``: a gate opened (its row committed, through
  ``GateLedger.open`` on the server's loop) → its card in an open inbox page (the page's clock
  when the card is added; same machine, same wall clock), ``GATES`` gates one after another.
  Target p99 ≤ 500 ms (the gate stream polls the store every 0.2 s).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.config import Settings
from baton.gates.ledger import GateLedger

from . import Metric, percentile
from ._loopback import Loopback, chromium, serving

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

__all__ = ["METRICS", "run"]

METRICS = (
    "web_run_page_first_paint_ms",
    "web_run_page_all_events_ms",
    "web_run_page_longest_task_ms",
    "web_run_page_50k_first_paint_ms",
    "web_run_page_50k_all_events_ms",
    "web_run_page_50k_longest_task_ms",
    "web_runs_page_first_rows_ms",
    "web_runs_page_longest_task_ms",
    "web_gate_to_screen_p50_ms",
    "web_gate_to_screen_p99_ms",
)
EVENTS = 10_000
BIG_EVENTS = 50_000
RUNS = 1_000
GATES = 30
LOADS = 3
# Installed before any page script: the longest task, when the first event / row and the end
# are added, when each gate card appears. Cheap on purpose (it runs on the measured thread).
_OBSERVE = """
window.__bench = {first: null, end: null, longest: 0, cards: {}};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__bench.longest = Math.max(window.__bench.longest, entry.duration);
}).observe({type: "longtask", buffered: true});
const has = (node, selector) => node.matches(selector) || node.querySelector(selector) !== null;
new MutationObserver((records) => {
  const bench = window.__bench;
  for (const record of records) for (const node of record.addedNodes) {
    if (!(node instanceof Element)) continue;
    if (bench.first === null && has(node, "li.ev, a[data-run-id]")) bench.first = performance.now();
    if (bench.end === null && has(node, "li[data-end]")) bench.end = performance.now();
    const gate = node.dataset.gateId;
    if (gate !== undefined && !(gate in bench.cards)) bench.cards[gate] = Date.now();
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


def _ended_run(loopback: Loopback, events: int) -> str:
    """A finished run whose log holds ``events`` runner events."""
    baton = loopback.state.baton

    async def write() -> str:
        record = await baton.store.create_run(agent="claude", owner="local", repo="/tmp/bench-web")
        baton.log.open_run(record.id)
        for direction, method, payload in _entries(record.id, events):
            baton.log.append(record.id, direction, method, payload)
        await baton.log.flush()
        baton.log.close_run(record.id)
        await baton.store.update_run(record.id, status="running")
        await baton.store.update_run(record.id, status="finished", finished_at="2026-12-02T00:00:01Z")
        return record.id

    return loopback.call(write())


def _many_runs(loopback: Loopback, count: int) -> None:
    """``count`` runs: agents and repositories varied, one in twenty running, the rest ended."""
    store = loopback.state.baton.store

    async def write() -> None:
        for i in range(count):
            record = await store.create_run(
                agent=("claude", "codex", "gemini")[i % 3],
                model="m",
                owner="local",
                repo=f"/srv/repos/project-{i % 17}",
                request={"prompt": f"Fix issue #{i}: the parser drops the last line of a file\nDetails follow."},
            )
            await store.update_run(record.id, status="running")
            if i % 20:
                ended = "finished" if i % 7 else "failed"
                await store.update_run(record.id, status=ended, finished_at="2026-12-02T00:00:01Z")

    loopback.call(write())


def _wait(page: Page, key: str, timeout: float = 180) -> dict[str, Any]:
    # (not wait_for_function: it evaluates a string, which the page's CSP forbids)
    deadline = time.monotonic() + timeout
    while True:
        timings: dict[str, Any] = page.evaluate("window.__bench")
        if timings[key] is not None:
            return timings
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not reach {key}")
        time.sleep(0.05)


def _run_page(context: BrowserContext, base_url: str, run_id: str) -> dict[str, float]:
    """Median first paint, all events and longest task of ``LOADS`` loads of the run's page."""
    loads = []
    for _ in range(LOADS):
        page = context.new_page()
        page.goto(f"{base_url}/runs/{run_id}")
        timings = _wait(page, "end")
        shown = page.evaluate("document.querySelector('ol.events').batonSeqs.length")
        if shown < 2:
            raise AssertionError(f"the run page showed {shown} events")
        loads.append(timings)
        page.close()
    return {key: statistics.median(load[key] for load in loads) for key in ("first", "end", "longest")}


def _runs_page(context: BrowserContext, base_url: str) -> dict[str, float]:
    """Median first rows and longest task of ``LOADS`` walks through every page of the runs list."""
    loads = []
    for _ in range(LOADS):
        page = context.new_page()
        page.goto(base_url + "/")
        timings = _wait(page, "first")
        page.wait_for_selector("a[data-run-id] >> nth=49")
        time.sleep(3.5)  # one live refresh (a listed run is running)
        pages = 1
        while (older := page.get_by_role("button", name="Older")).count():
            first_id = page.locator("a[data-run-id]").first.get_attribute("data-run-id")
            older.click()
            page.wait_for_selector(f"a[data-run-id]:first-child:not([data-run-id='{first_id}'])")
            pages += 1
        if pages != RUNS // 50:
            raise AssertionError(f"the runs page showed {pages} pages of 50 for {RUNS} runs")
        timings = page.evaluate("window.__bench")
        loads.append(timings)
        page.close()
    return {key: statistics.median(load[key] for load in loads) for key in ("first", "longest")}


def _gate_delays(context: BrowserContext, loopback: Loopback) -> list[float]:
    baton = loopback.state.baton
    inbox = context.new_page()
    inbox.goto(loopback.base_url + "/inbox")
    inbox.wait_for_selector("text=Nothing waits for a decision.")
    delays = []
    for n in range(GATES):

        async def open_gate(n: int = n) -> tuple[str, float]:
            gate_run = await baton.store.create_run(agent="claude", owner="local", repo="/tmp/bench-web")
            gate, _ = await GateLedger(baton.store).open(
                gate_run.id, "tool", tool_name="Bash", bound_call_id=f"c{n}", bound_input_hash=f"h{n}",
                input={"command": f"echo {n}"}, summary=f"Bash: echo {n}",
            )  # fmt: skip
            return gate.id, time.time() * 1000

        gate_id, opened_ms = loopback.call(open_gate())
        inbox.wait_for_selector(f"[data-gate-id='{gate_id}']", timeout=10_000)
        delays.append(inbox.evaluate(f"window.__bench.cards['{gate_id}']") - opened_ms)
    inbox.close()
    return delays


def _signed_in(context: BrowserContext, loopback: Loopback) -> None:
    page = context.new_page()
    page.goto(f"{loopback.base_url}/login?next=/new#token={loopback.token}")
    page.wait_for_url(loopback.base_url + "/new")
    page.close()


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-web-") as scratch:
        with serving(Settings.load({"BATON_HOME": str(Path(scratch) / "pages")})) as loopback:
            small, big = _ended_run(loopback, EVENTS), _ended_run(loopback, BIG_EVENTS)
            with chromium() as browser:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(_OBSERVE)
                _signed_in(context, loopback)
                ten_k = _run_page(context, loopback.base_url, small)
                fifty_k = _run_page(context, loopback.base_url, big)
                delays = _gate_delays(context, loopback)
        # The 1,000 runs in a store of their own: the gate bench's runs and the big runs stay out.
        with serving(Settings.load({"BATON_HOME": str(Path(scratch) / "runs")})) as loopback:
            _many_runs(loopback, RUNS)
            with chromium() as browser:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(_OBSERVE)
                _signed_in(context, loopback)
                runs = _runs_page(context, loopback.base_url)

    def metric(value: float, target: float) -> Metric:
        return {"value": round(value, 1), "unit": "ms", "target": target, "better": "lower", "reference": None}

    return {
        "web_run_page_first_paint_ms": metric(ten_k["first"], 1000),
        "web_run_page_all_events_ms": metric(ten_k["end"], 10_000),
        "web_run_page_longest_task_ms": metric(ten_k["longest"], 200),
        "web_run_page_50k_first_paint_ms": metric(fifty_k["first"], 1000),
        "web_run_page_50k_all_events_ms": metric(fifty_k["end"], 50_000),
        "web_run_page_50k_longest_task_ms": metric(fifty_k["longest"], 200),
        "web_runs_page_first_rows_ms": metric(runs["first"], 1000),
        "web_runs_page_longest_task_ms": metric(runs["longest"], 200),
        "web_gate_to_screen_p50_ms": metric(statistics.median(delays), 500),
        "web_gate_to_screen_p99_ms": metric(percentile(delays, 99), 500),
    }
