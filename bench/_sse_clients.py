"""SSE clients for ``bench/sse_fanout.py``, run in their own process.

``python -m bench._sse_clients URL TOKEN CLIENTS LAST_ID`` opens CLIENTS streams on URL, prints
``ready`` and reads each until it has frame LAST_ID; prints ``done`` as soon as the last client
has it, then one JSON line: every client's ids in order, the delivery latencies (receive wall
time minus the entry's ``ts``) in milliseconds, each client's first and last receive time
(``time.monotonic``), and this process's CPU and wall seconds from ``ready`` to ``done``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import datetime
from urllib.parse import urlsplit

_PARSED: dict[bytes, float] = {}


def _seconds(ts: bytes) -> float:
    """``2026-11-30T12:00:00.123Z`` as a POSIX time (entries share their millisecond: cached)."""
    value = _PARSED.get(ts)
    if value is None:
        value = _PARSED[ts] = datetime.fromisoformat(ts.decode().replace("Z", "+00:00")).timestamp()
    return value


async def _client(
    host: str, port: int, path: str, token: str, last_id: int, ready: asyncio.Event
) -> tuple[list[int], list[float], tuple[float, float]]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    ready.set()
    ids: list[int] = []
    latencies: list[float] = []
    buffer = b""
    first = last = 0.0
    while not ids or ids[-1] < last_id:
        chunk = await reader.read(65536)
        if not chunk:
            break
        now = time.time()
        last = time.monotonic()
        first = first or last
        buffer += chunk
        *frames, buffer = buffer.split(b"\n\n")  # chunk-size lines sit between frames: ignored
        for frame in frames:
            event_id = None
            data = None
            for line in frame.split(b"\n"):
                if line.startswith(b"id: "):
                    event_id = int(line[4:])
                elif line.startswith(b"data: "):
                    data = line[6:]
            if event_id is None or data is None:
                continue
            ids.append(event_id)
            start = data.find(b'"ts":"') + 6  # the entry's ts, without parsing the whole entry
            latencies.append((now - _seconds(data[start : start + 24])) * 1000)
    writer.close()
    return ids, latencies, (first, last)


async def main(url: str, token: str, clients: int, last_id: int) -> None:
    parts = urlsplit(url)
    ready = [asyncio.Event() for _ in range(clients)]
    tasks = [
        asyncio.create_task(
            _client(
                parts.hostname or "127.0.0.1", parts.port or 80, parts.path + "?" + parts.query, token, last_id, event
            )
        )
        for event in ready
    ]
    await asyncio.gather(*(event.wait() for event in ready))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    cpu_start, wall_start = time.process_time(), time.monotonic()
    results = await asyncio.gather(*tasks)
    cpu, wall = time.process_time() - cpu_start, time.monotonic() - wall_start
    sys.stdout.write("done\n")
    sys.stdout.flush()
    summary = {
        "ids": [ids for ids, _, _ in results],
        "latencies": [latencies for _, latencies, _ in results],
        "spans": [span for _, _, span in results],
        "cpu_s": cpu,
        "wall_s": wall,
    }
    sys.stdout.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
