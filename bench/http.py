"""The cost of a JWT-checked request to ``baton serve``: ``GET /v1/runs/{id}``.

The production path: :func:`baton.server.create_app` with an RS256 key configured, its
lifespan opening the store (SQLite), a run in it, and a token with ``runs:read``.

- ``http_jwt_verify_us``: ``Authenticator.authenticate`` of a token never seen before
  (header parse, RS256 verify, claims); ``http_jwt_cached_us``: of the same token again (a
  client sends one token on every request; only ``exp``/``nbf`` are checked again).
- ``http_get_run_ms``: one whole request, the ASGI application called in process (routing,
  the token, the store read — inline on a SQLite file, no worker thread — the JSON response).
  Target 0.5 ms; reference: ~0.7 ms per JWT-checked request in the TypeScript server.
- ``http_request_overhead_ms``: the same minus one ``Store.get_run`` timed alike: what the
  server adds to the store read. Target ≤ 0.2 ms.
- ``http_get_run_rps``: requests per second over loopback to a real uvicorn server, from one
  keep-alive client in another process (``bench._http_client``), one request at a time (wall
  clock, median of three 2-second runs). Target 1,500.

In-process figures are CPU time of the process (``time.process_time``), medians over batches:
on this shared 2-vCPU machine the wall clock mostly measures the neighbours.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.types import ASGIApp, Message

from baton.config import Settings
from baton.server import ServerConfig, create_app

from . import Metric
from ._loopback import serving

__all__ = ["METRICS", "run"]

METRICS = (
    "http_jwt_verify_us",
    "http_jwt_cached_us",
    "http_get_run_ms",
    "http_request_overhead_ms",
    "http_get_run_rps",
)
BATCH = 200
BATCHES = 7


def _keys(home: Path) -> tuple[rsa.RSAPrivateKey, Path]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = home / "bench.pem"
    public.write_bytes(
        private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


def _token(private: rsa.RSAPrivateKey, jti: int = 0) -> str:
    now = int(time.time())
    claims = {"sub": "bench", "aud": "baton", "scope": "runs:read", "iat": now, "exp": now + 3600, "jti": str(jti)}
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": "bench"})


async def _cpu_median(work: Callable[[], Awaitable[Any]]) -> float:
    """CPU seconds of one call of ``work``, median over batches of BATCH calls."""
    for _ in range(20):
        await work()
    times = []
    for _ in range(BATCHES):
        start = time.process_time()
        for _ in range(BATCH):
            await work()
        times.append(time.process_time() - start)
    return statistics.median(times) / BATCH


def _get(app: ASGIApp, path: str, authorization: bytes) -> Callable[[], Awaitable[None]]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench"), (b"authorization", authorization)],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise RuntimeError(f"GET {path} answered {message['status']}")

    async def call() -> None:
        await app(dict(scope), receive, send)

    return call


async def _in_process(settings: Settings, config: ServerConfig, private: rsa.RSAPrivateKey) -> dict[str, float]:
    app = create_app(settings, config)
    async with app.router.lifespan_context(app):
        state = app.state.baton_server
        record = await state.baton.store.create_run(agent="claude", owner="bench", repo="/tmp/bench")
        fresh = [f"Bearer {_token(private, jti)}" for jti in range(BATCH * BATCHES)]
        start = time.process_time()
        for header in fresh:
            state.authenticator.authenticate(header)
        verify = (time.process_time() - start) / len(fresh)
        header = fresh[0]

        async def cached() -> None:
            state.authenticator.authenticate(header)

        async def read() -> None:
            await state.baton.store.get_run(record.id)

        return {
            "verify": verify,
            "cached": await _cpu_median(cached),
            "request": await _cpu_median(_get(app, f"/v1/runs/{record.id}", header.encode())),
            "read": await _cpu_median(read),
        }


def _loopback(settings: Settings, config: ServerConfig, token: str) -> float:
    with serving(settings, config) as loopback:
        created = loopback.call(loopback.state.baton.store.create_run(agent="claude", owner="bench", repo="/tmp/bench"))
        url = f"{loopback.base_url}/v1/runs/{created.id}"
        rates = []
        for _ in range(3):
            client = subprocess.run(
                [sys.executable, "-m", "bench._http_client", url, token, "2"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
                cwd=Path(__file__).resolve().parent.parent,
            )
            counted = json.loads(client.stdout)
            rates.append(counted["requests"] / counted["seconds"])
        return statistics.median(rates)


def _metric(value: float, unit: str, target: float, better: str = "lower", reference: float | None = None) -> Metric:
    return {"value": value, "unit": unit, "target": target, "better": better, "reference": reference}  # type: ignore[typeddict-item]


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        private, public = _keys(home)
        config = ServerConfig(jwt_public_keys=(public,))
        timed = asyncio.run(_in_process(Settings.load({"BATON_HOME": str(home / "a")}), config, private))
        rps = _loopback(Settings.load({"BATON_HOME": str(home / "b")}), config, _token(private))
    return {
        "http_jwt_verify_us": _metric(round(timed["verify"] * 1e6, 1), "µs", 200.0),
        "http_jwt_cached_us": _metric(round(timed["cached"] * 1e6, 2), "µs", 10.0),
        "http_get_run_ms": _metric(round(timed["request"] * 1e3, 3), "ms", 0.5, reference=0.7),
        "http_request_overhead_ms": _metric(round((timed["request"] - timed["read"]) * 1e3, 3), "ms", 0.2),
        "http_get_run_rps": _metric(round(rps), "req/s", 1500.0, better="higher"),
    }
