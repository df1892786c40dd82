"""An SSE client in its own process that leaves and comes back at random points.

``python -m tests.server._reconnecting_client URL TOKEN SEED`` reads the stream; after a random
number of messages (1–4), or a random moment (0–300 ms) into a connection, it disconnects and
reconnects with ``Last-Event-ID`` of the last message it received, until the stream ends after
``task.finished`` / ``task.failed``. Prints one JSON line: ``{"messages": [[id, event, data], …],
"connections": N}``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

import httpx

_LAST = ("task.finished", "task.failed")


def _read(client: httpx.Client, url: str, headers: dict[str, str], rng: random.Random) -> tuple[list[Any], bool]:
    """One connection: the messages it got, and whether the stream ended by itself."""
    stop_after = rng.randint(1, 4)
    leave_at = time.monotonic() + rng.uniform(0, 0.3)
    messages: list[Any] = []
    fields: dict[str, str] = {}
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            raise SystemExit(f"HTTP {response.status_code}: {response.read()!r}")
        for line in response.iter_lines():
            if line == "" and fields:
                messages.append([int(fields["id"]), fields["event"], json.loads(fields["data"])])
                fields = {}
                if messages[-1][1] in _LAST:
                    return messages, True
                if len(messages) >= stop_after or time.monotonic() > leave_at:
                    return messages, False
            elif line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
    return messages, True


def main(url: str, token: str, seed: int) -> None:
    rng = random.Random(seed)
    received: list[Any] = []
    connections = 0
    with httpx.Client(timeout=60) as client:
        while True:
            headers = {"Authorization": f"Bearer {token}"}
            if received:
                headers["Last-Event-ID"] = str(received[-1][0])
            messages, ended = _read(client, url, headers, rng)
            received += messages
            connections += 1
            if ended:
                break
            time.sleep(rng.uniform(0, 0.05))
    sys.stdout.write(json.dumps({"messages": received, "connections": connections}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
