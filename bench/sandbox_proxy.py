"""The sandbox's network proxies: what a model request pays for going through the model proxy,
and how fast bytes go through the allow-list (CONNECT) proxy.

The production path: :class:`baton.sandbox.ModelProxy` and :class:`baton.sandbox.ConnectProxy`
on this process's event loop, listening on loopback TCP; every other party is a process of its
own (``bench._proxy_peers``), so the figures hold the proxy's own work, not a neighbour's GIL.

- ``model_proxy_overhead_ms`` / ``model_proxy_overhead_p99_ms``: a streamed Anthropic
  ``POST /v1/messages`` answered by the scripted model server (``baton model-server
  --scenario plain``, its own process), timed by the client to the answer's last byte, direct
  and through the proxy, alternating on one keep-alive connection each (2,000 of each); the
  p50 (p99) through the proxy minus the p50 (p99) direct. Targets ≤ 1 ms and ≤ 5 ms (issue 16).
  Plain HTTP upstream: a TLS endpoint adds its encryption, paid once per byte either way.
- ``model_proxy_cpu_ms``: this process's CPU time over the same run (it does nothing but
  proxy) per proxied request: the proxy's own cost, which the neighbours on a shared machine
  do not move the way they move the wall clock above.
- ``sandbox_proxy_mb_s``: 256 MiB through one ``CONNECT`` tunnel from a sender process to a
  sink process, wall clock, median of three. Target ≥ 200 MB/s.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

from baton.sandbox import AllowList, ConnectProxy, ModelProxy, ModelUpstream

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("model_proxy_overhead_ms", "model_proxy_overhead_p99_ms", "model_proxy_cpu_ms", "sandbox_proxy_mb_s")
WARMUP = 50  # requests of each kind bench._proxy_peers sends before timing
REQUESTS = 2_000
MIB = 256
PEERS = [sys.executable, "-m", "bench._proxy_peers"]


async def _peer(*args: str) -> Any:
    process = await asyncio.create_subprocess_exec(*PEERS, *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"bench._proxy_peers {args[0]} exited with {process.returncode}")
    return json.loads(out)


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


async def _model_overhead() -> tuple[float, float, float]:
    baton = [sys.executable, "-c", "from baton.cli import main; main()"]
    server = await asyncio.create_subprocess_exec(
        *baton, "model-server", "--scenario", "plain", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        direct_url = (await server.stdout.readline()).decode().strip()
        async with ModelProxy(ModelUpstream(direct_url, "sk-bench-real"), tcp=("127.0.0.1", 0)) as proxy:
            host, port = proxy.tcp_address
            cpu = time.process_time()
            times = await _peer("model", direct_url, f"http://{host}:{port}", proxy.placeholder, str(REQUESTS))
            cpu = time.process_time() - cpu
    finally:
        server.terminate()
        await server.wait()
    direct, proxied = times["direct"], times["proxied"]
    p50 = statistics.median(proxied) - statistics.median(direct)
    return p50 * 1000, (_p99(proxied) - _p99(direct)) * 1000, cpu / (REQUESTS + WARMUP) * 1000


async def _tunnel_mb_s() -> float:
    sink = await asyncio.create_subprocess_exec(*PEERS, "sink", stdout=asyncio.subprocess.PIPE)
    try:
        assert sink.stdout is not None
        sink_port = int(await sink.stdout.readline())
        async with ConnectProxy(AllowList.parse([f"127.0.0.1:{sink_port}"]), tcp=("127.0.0.1", 0)) as proxy:
            rates = []
            for _ in range(3):
                done = await _peer("send", str(proxy.tcp_address[1]), str(sink_port), str(MIB))
                rates.append(done["bytes"] / done["seconds"] / 1e6)
    finally:
        sink.kill()
        await sink.wait()
    return statistics.median(rates)


def run() -> dict[str, Metric]:
    p50, p99, cpu = asyncio.run(_model_overhead())
    rate = asyncio.run(_tunnel_mb_s())
    return {
        "model_proxy_overhead_ms": {"value": p50, "unit": "ms", "target": 1.0, "better": "lower", "reference": None},
        "model_proxy_overhead_p99_ms": {
            "value": p99,
            "unit": "ms",
            "target": 5.0,
            "better": "lower",
            "reference": None,
        },
        "model_proxy_cpu_ms": {"value": cpu, "unit": "ms", "target": 1.0, "better": "lower", "reference": None},
        "sandbox_proxy_mb_s": {"value": rate, "unit": "MB/s", "target": 200.0, "better": "higher", "reference": None},
    }
