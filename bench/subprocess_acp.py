"""Messages through a tapped subprocess ACP connection: agent process → line transport → tap →
session log (SQLite) → runner events → host.

The agent is ``tests/agents/acp_script_agent.py echo`` (plain Python, no SDK), spawned by
:class:`~baton.agents.subprocess.SubprocessAgent` exactly as codex-acp is. Each of its
``session/update`` chunks carries the sender's ``time.monotonic_ns()``; the host measures the
time to its ``session_update`` (after the tap logged the message and the runner-event
projection saw it). Two phases:

- **throughput**: 20,000 chunks as fast as the agent writes them; messages per CPU second of
  the baton process from the prompt request to the last chunk's arrival at the host (CPU time:
  the machine is shared and noisy, and the agent's own CPU is another process's);
- **added latency**: 2,000 chunks paced at 1,000/s (no backlog), p50 and p99.

Reference: the ACP SDK's client alone handles ~15k messages/s here (docs/design.md).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, connect_to_agent, text_block

from baton.acp.host import BatonHost
from baton.acp.tap import TappingTransport
from baton.acp.transport import sdk_spans_where_seen
from baton.agents.subprocess import AgentCommand, SubprocessAgent
from baton.events.entry import Direction, LogEntry
from baton.events.project import Projector
from baton.gates import Gatekeeper, Policy
from baton.store import Redactor, SessionLog, Store

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("subprocess_acp_msgs_per_s", "subprocess_acp_latency_p50_ms", "subprocess_acp_latency_p99_ms")
SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "agents" / "acp_script_agent.py"
BURST = 20_000
PACED = 2_000
RATE = 1_000.0


class _ProjectingSink:
    """The session log, with the runner-event projection fed every entry as it is appended."""

    def __init__(self, log: SessionLog, run_id: str) -> None:
        self._log = log
        self._projector = Projector(run_id)
        self.events = 0

    async def drain(self) -> None:
        await self._log.drain()

    def append(self, run_id: str, direction: Direction, method: str | None, payload: dict[str, Any]) -> int:
        seq = self._log.append(run_id, direction, method, payload)
        entry: LogEntry = {
            "run_id": run_id,
            "seq": seq,
            "ts": "2026-11-30T12:00:00.000Z",
            "direction": direction,
            "method": method,
            "payload": payload,
        }
        self.events += len(self._projector.feed(entry))
        return seq


class _TimingHost(BatonHost):
    def __init__(self, gatekeeper: Gatekeeper, expected: int) -> None:
        async def logged() -> None:
            return None

        super().__init__(gatekeeper, logged)
        self.latencies_ns: list[int] = []
        self.expected = expected
        self.all_arrived = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        sent = (update.field_meta or {}).get("sent_ns")
        if sent is not None:
            self.latencies_ns.append(time.monotonic_ns() - sent)
            if len(self.latencies_ns) == self.expected:
                self.all_arrived.set()


async def _one_turn(work: Path, count: int, rate: float) -> tuple[float, list[int], int]:
    """(CPU seconds of this process for the turn, latencies in ns, runner events) of one echo turn."""
    store = Store.open(f"sqlite:///{work / 'bench.db'}")
    try:
        async with SessionLog(store, Redactor()) as log:
            record = await store.create_run(agent="bench-echo", repo=str(work), cwd=str(work))
            log.open_run(record.id)
            argv = (sys.executable, str(SCRIPT), "echo", str(count), str(rate))
            agent = SubprocessAgent("echo", AgentCommand(argv, {"PATH": "/usr/bin:/bin"}, work, record.id))
            sink = _ProjectingSink(log, record.id)
            tap = TappingTransport(await agent.start(), sink, record.id)
            host = _TimingHost(Gatekeeper(Policy.build("default"), work), count)
            sdk_spans_where_seen()  # as the executor does
            conn = connect_to_agent(host, tap)  # type: ignore[arg-type]
            try:
                await conn.initialize(protocol_version=PROTOCOL_VERSION)
                session = await conn.new_session(cwd=str(work), mcp_servers=[])
                started = time.process_time()
                await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
                await host.all_arrived.wait()  # the last notifications' tasks may still run
                seconds = time.process_time() - started
                await log.flush()
            finally:
                await conn.close()
                await agent.aclose()
            log.close_run(record.id)
            return seconds, host.latencies_ns, sink.events
    finally:
        await store.aclose()


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-acp-") as tmp:
        work = Path(tmp)
        (work / "burst").mkdir()
        (work / "paced").mkdir()
        rates = []
        for _ in range(3):
            seconds, _, events = asyncio.run(_one_turn(work / "burst", BURST, 0.0))
            assert events >= BURST, events
            rates.append(BURST / seconds)
        _, latencies, _ = asyncio.run(_one_turn(work / "paced", PACED, RATE))
    latencies_ms = sorted(ns / 1e6 for ns in latencies)
    p99 = latencies_ms[min(len(latencies_ms) - 1, int(len(latencies_ms) * 0.99))]
    return {
        "subprocess_acp_msgs_per_s": {
            "value": round(statistics.median(rates)),
            "unit": "msg/s",
            "target": 20_000,
            "better": "higher",
            "reference": 15_000,
        },
        "subprocess_acp_latency_p50_ms": {
            "value": round(statistics.median(latencies_ms), 3),
            "unit": "ms",
            "target": 5,
            "better": "lower",
            "reference": None,
        },
        "subprocess_acp_latency_p99_ms": {
            "value": round(p99, 3),
            "unit": "ms",
            "target": 5,
            "better": "lower",
            "reference": None,
        },
    }
