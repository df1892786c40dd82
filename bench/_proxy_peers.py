"""The other ends of ``bench/sandbox_proxy.py``, each in its own process (blocking sockets).

- ``python -m bench._proxy_peers model DIRECT_URL PROXY_URL KEY COUNT``: COUNT streamed
  ``POST /v1/messages`` to each URL, alternating, on one keep-alive connection each; prints
  ``{"direct": [seconds…], "proxied": [seconds…]}`` (a request's whole answer, last byte read).
- ``python -m bench._proxy_peers sink``: listens on 127.0.0.1, prints its port, then per
  connection reads to EOF and answers the byte count.
- ``python -m bench._proxy_peers send PROXY_PORT TARGET_PORT MIB``: through ``CONNECT`` to the
  sink, MIB mebibytes; prints ``{"bytes", "seconds"}`` (first byte sent to the count received).
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

BODY = json.dumps(
    {
        "model": "claude-scripted",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "Say hello"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    }
).encode()


def _model(direct_url: str, proxy_url: str, key: str, count: int) -> None:
    def connect(url: str) -> http.client.HTTPConnection:
        parts = urlsplit(url)
        return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)

    connections = {"direct": connect(direct_url), "proxied": connect(proxy_url)}
    headers = {"x-api-key": key, "content-type": "application/json"}
    times: dict[str, list[float]] = {"direct": [], "proxied": []}

    def once(name: str) -> float:
        start = time.perf_counter()
        connections[name].request("POST", "/v1/messages", body=BODY, headers=headers)
        response = connections[name].getresponse()
        body = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200 or b"message_stop" not in body:
            raise SystemExit(f"{name}: {response.status} {body[:200]!r}")
        return elapsed

    for _ in range(50):  # sandbox_proxy.WARMUP
        once("direct")
        once("proxied")
    for index in range(count):
        order = ("direct", "proxied") if index % 2 else ("proxied", "direct")
        for name in order:
            times[name].append(once(name))
    print(json.dumps(times))


def _sink() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)

    def drain(connection: socket.socket) -> None:
        buffer = bytearray(1 << 20)
        total = 0
        while read := connection.recv_into(buffer):
            total += read
        connection.sendall(str(total).encode())
        connection.close()

    while True:
        connection, _ = listener.accept()
        threading.Thread(target=drain, args=(connection,), daemon=True).start()


def _send(proxy_port: int, target_port: int, mib: int) -> None:
    connection = socket.create_connection(("127.0.0.1", proxy_port))
    connection.sendall(f"CONNECT 127.0.0.1:{target_port} HTTP/1.1\r\n\r\n".encode())
    answer = b""
    while not answer.endswith(b"\r\n\r\n"):
        answer += connection.recv(1)
    if not answer.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"CONNECT answered {answer!r}")
    block = bytes(range(256)) * 4096  # 1 MiB
    start = time.perf_counter()
    for _ in range(mib):
        connection.sendall(block)
    connection.shutdown(socket.SHUT_WR)
    count = int(connection.recv(64))
    seconds = time.perf_counter() - start
    if count != mib << 20:
        raise SystemExit(f"the sink got {count} bytes of {mib << 20}")
    print(json.dumps({"bytes": count, "seconds": seconds}))


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "model":
        _model(args[0], args[1], args[2], int(args[3]))
    elif mode == "sink":
        _sink()
    elif mode == "send":
        _send(int(args[0]), int(args[1]), int(args[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
