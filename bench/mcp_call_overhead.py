"""An MCP tool call through baton's proxy (:mod:`baton.mcp`): what baton's policy adds to it.

The test MCP server (``tests/mcp/mcp_test_server.py``, stdio) behind two :class:`~baton.mcp.McpProxy`
instances: one deciding every call with the Gatekeeper (:class:`~baton.mcp.PolicyDecider`, mode
``default``, 30 run rules: ``mcp__t__echo`` allowed among them, globs denied) and one allowing
everything. A client of the ``mcp`` SDK calls ``echo`` through each in turn, ``CALLS`` times
(interleaved, so the machine's noise falls on both alike); notes go nowhere (the log's append
is ``bench.append``'s).

- ``mcp_call_overhead_ms``: p99 through the policy minus p99 allowing everything. Target ≤ 2 ms.
- ``mcp_call_overhead_p50_ms``: the same at p50. Target ≤ 1 ms.
- ``mcp_call_decision_p99_ms``: the in-process decision alone (``PolicyDecider`` of one call, CPU
  time: the machine is shared). Target ≤ 2 ms.
- ``mcp_call_p99_ms``: a whole call through the policy (client → proxy → server and back), for
  reference. Target ≤ 50 ms.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.client import Client

from baton.config import McpServerConfig
from baton.gates import Gatekeeper, Policy
from baton.mcp import McpProxy, McpVerdict, PolicyDecider

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("mcp_call_overhead_ms", "mcp_call_overhead_p50_ms", "mcp_call_decision_p99_ms", "mcp_call_p99_ms")
CALLS = 400
WARMUP = 20
SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "mcp_test_server.py"


async def _allow_all(server: str, tool: str, arguments: Mapping[str, Any], call_id: str) -> McpVerdict:
    return McpVerdict("allow", "bench", "allowed")


def _decider(repo: Path) -> PolicyDecider:
    allow = [f"mcp__other{i}__tool{i}" for i in range(20)] + ["Bash(npm test:*)", "mcp__t__echo"]
    deny = ["mcp__t__delete_*", "mcp__prod*__*", "Bash(rm:*)", "mcp__t__cr?sh"]
    ask = ["mcp__t__token", "WebFetch", "mcp__t__agent_*", "Write(/etc/**)"]
    policy = Policy.build("default", allow=allow, deny=deny, ask=ask)
    return PolicyDecider(Gatekeeper(policy, repo))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(repo: Path) -> dict[str, list[float]]:
    config = McpServerConfig(name="t", command=(sys.executable, str(SERVER)))
    decider = _decider(repo)
    times: dict[str, list[float]] = {"policy": [], "allow": [], "decision": []}
    async with (
        McpProxy([config], decider, lambda _name, _params: None) as policed,
        McpProxy([config], _allow_all, lambda _name, _params: None) as open_,
        Client(policed.url("t"), cache=None) as through_policy,
        Client(open_.url("t"), cache=None) as allowing,
    ):
        for i in range(WARMUP + CALLS):
            for name, client in (("policy", through_policy), ("allow", allowing)):
                start = time.perf_counter()
                result = await client.call_tool("echo", {"text": f"call {i}"})
                elapsed = time.perf_counter() - start
                assert not result.is_error, result
                if i >= WARMUP:
                    times[name].append(elapsed * 1000)
            start = time.process_time()  # CPU time: the decision is CPU-bound, the machine shared
            verdict = await decider("t", "echo", {"text": f"call {i}"}, f"mcp_{i}")
            if i >= WARMUP:
                times["decision"].append((time.process_time() - start) * 1000)
            assert verdict.behavior == "allow", verdict
    return times


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-mcp-") as tmp:
        times = asyncio.run(_measure(Path(tmp)))
    policy, allow = times["policy"], times["allow"]
    added_p99 = _percentile(policy, 0.99) - _percentile(allow, 0.99)
    added_p50 = statistics.median(policy) - statistics.median(allow)
    return {
        "mcp_call_overhead_ms": _metric(max(added_p99, 0.0), 2.0, _percentile(allow, 0.99)),
        "mcp_call_overhead_p50_ms": _metric(max(added_p50, 0.0), 1.0, statistics.median(allow)),
        "mcp_call_decision_p99_ms": _metric(_percentile(times["decision"], 0.99), 2.0, None),
        "mcp_call_p99_ms": _metric(_percentile(policy, 0.99), 50.0, None),
    }


def _metric(value: float, target: float, reference: float | None) -> Metric:
    return {"value": round(value, 3), "unit": "ms", "target": target, "better": "lower", "reference": reference}


if __name__ == "__main__":
    for name, metric in run().items():
        print(f"{name}: {metric['value']} {metric['unit']} (target {metric['target']})")
