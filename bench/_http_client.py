"""A keep-alive HTTP client for ``bench/http.py``, run in its own process.

``python -m bench._http_client URL TOKEN SECONDS`` sends ``GET URL`` one request at a time on one
connection (the standard library's client: little CPU of its own), 100 to warm up, then for
SECONDS; prints one JSON line: ``requests`` and wall ``seconds``. Any answer but 200 stops it
with an error.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from urllib.parse import urlsplit


def main(url: str, token: str, seconds: float) -> None:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"}

    def get() -> None:
        connection.request("GET", parts.path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"GET {parts.path} answered {response.status}: {body[:200]!r}")

    for _ in range(100):
        get()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        get()
        count += 1
    print(json.dumps({"requests": count, "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
