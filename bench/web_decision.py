"""A decision clicked in the web app → the agent continues, in Debian's Chromium (Playwright,
headless), against a server on loopback executing a real Claude Code run (scripted model).

- ``web_decision_to_agent_p50_ms`` / ``_p99_ms``: the run asks ``GATES`` times in a row (one
  Bash command that writes per step, ``default`` mode); each gate's card is approved in an open
  inbox page by clicking **Approve**. The clock starts in the page when the click is dispatched
  (``performance.timeOrigin + performance.now()``) and stops at the ``ts`` of the log entry
  that hands the agent its answer (the response to its ``session/request_permission``, stamped
  by the tapping transport as it is sent; same machine, same wall clock). In between: the
  page's ``POST /v1/gates/{id}/decide`` (session cookie, CSRF), the server's ledger commit and
  its in-process wake of the run (the run executes in the server: the agent waits in the hook,
  within the grace period). Target p99 ≤ 300 ms.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from baton.config import Settings
from baton.runs.spec import RunSpec
from baton.testing import Scenario, ScriptedModelServer

from . import Metric, percentile
from ._loopback import chromium, serving

__all__ = ["METRICS", "run"]

METRICS = ("web_decision_to_agent_p50_ms", "web_decision_to_agent_p99_ms")
GATES = 30
MODEL_KEY = "sk-bench-scripted-model-key-0123456789"
# Clicks Approve on the card of one gate; the page's own clock at the click (ms since the epoch).
_CLICK = """(gateId) => {
  const card = document.querySelector(`[data-gate-id="${gateId}"]`);
  const button = [...card.querySelectorAll("button")].find((b) => b.textContent.trim() === "Approve");
  const at = performance.timeOrigin + performance.now();
  button.click();
  return at;
}"""


def _scenario(gates: int) -> Scenario:
    steps: list[dict[str, Any]] = [
        {"text": f"Step {i}.", "tools": [{"name": "Bash", "input": {"command": f"touch f{i}.txt",
                                                                     "description": f"Create f{i}.txt"}}]}
        for i in range(gates)
    ]  # fmt: skip
    steps.append({"text": "All done."})
    return Scenario.from_dict({"description": "bench: one gated command per step", "steps": steps}, name="bench")


def _epoch_ms(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000


def _answers(entries: list[dict[str, Any]]) -> dict[str, float]:
    """Each permission request's tool call id → when its answer went to the agent (ms since the epoch)."""
    asked: dict[Any, str] = {}
    answered: dict[str, float] = {}
    for entry in entries:
        payload = entry["payload"]
        if entry["method"] == "session/request_permission" and entry["direction"] == "from_agent":
            asked[payload.get("id")] = str(((payload.get("params") or {}).get("toolCall") or {}).get("toolCallId"))
        elif entry["direction"] == "to_agent" and "result" in payload and payload.get("id") in asked:
            answered.setdefault(asked[payload["id"]], _epoch_ms(entry["ts"]))
    return answered


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-web-decision-") as scratch:
        home, repo = Path(scratch) / "home", Path(scratch) / "repo"
        repo.mkdir()
        for command in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
            subprocess.run(
                ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *command], cwd=repo, check=True
            )
        with ScriptedModelServer(_scenario(GATES)) as model:
            settings = replace(
                Settings.load({"BATON_HOME": str(home), "BATON_WORKSPACE": "in-place"}),
                anthropic_base_url=model.base_url,
                anthropic_api_key=MODEL_KEY,
                gate_grace_seconds=120.0,  # the agent waits in-process for every decision
            )
            with serving(settings) as loopback, chromium() as browser:
                state, base = loopback.state, loopback.base_url
                clicks: dict[str, tuple[str, float]] = {}  # gate id → (tool call id, click ms)
                page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
                page.goto(f"{base}/login?next=/inbox#token={loopback.token}")
                page.wait_for_url(base + "/inbox")
                page.wait_for_selector("text=Nothing waits for a decision.")
                handle = loopback.call(state.baton.start(RunSpec(prompt="go", repo=repo, owner="local")))
                state.handles[handle.run_id] = handle
                while len(clicks) < GATES:
                    pending = [g for g in loopback.call(state.runs.gates(status="pending")) if g.id not in clicks]
                    if not pending:
                        time.sleep(0.005)
                        continue
                    gate = pending[0]
                    page.wait_for_selector(f"[data-gate-id='{gate.id}'] button", timeout=10_000)
                    clicks[gate.id] = (str(gate.tool_call_id), page.evaluate(_CLICK, gate.id))
                deadline = time.monotonic() + 120
                while loopback.call(state.runs.get_run(handle.run_id)).finished_at is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the bench run did not end")
                    time.sleep(0.05)
                answered = _answers(loopback.call(state.baton.log.read(handle.run_id)))
    delays = [answered[call_id] - clicked for call_id, clicked in clicks.values()]

    def metric(value: float) -> Metric:
        return {"value": round(value, 1), "unit": "ms", "target": 300, "better": "lower", "reference": None}

    return {
        "web_decision_to_agent_p50_ms": metric(statistics.median(delays)),
        "web_decision_to_agent_p99_ms": metric(percentile(delays, 99)),
    }
