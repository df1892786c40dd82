"""The model proxy serving a sandbox's own loopback: a listening socket made inside a
bubblewrap network namespace, handed out, served by baton outside (no relay process)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys

import pytest
from tests.sandbox._upstream import Upstream

from baton.sandbox import ModelProxy, ModelUpstream

# Runs inside the namespace: listen on its loopback, hand the socket to baton through argv[1], wait
# for baton's word, then be the agent: the proxy on this loopback answers, the host's does not.
INSIDE = """
import json, socket, sys
baton = socket.socket(fileno=int(sys.argv[1]))
listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]
socket.send_fds(baton, [str(port).encode()], [listener.fileno()])
listener.close()
key, upstream_port = baton.recv(1024).decode().split()
with socket.create_connection(("127.0.0.1", port), timeout=10) as agent:
    head = f"GET /v1/models HTTP/1.1\\r\\nHost: sandbox\\r\\nx-api-key: {key}\\r\\nConnection: close\\r\\n\\r\\n"
    agent.sendall(head.encode())
    answer = b""
    while data := agent.recv(65536):
        answer += data
try:
    socket.create_connection(("127.0.0.1", int(upstream_port)), timeout=5).close()
    direct = "reached"
except OSError as exc:
    direct = type(exc).__name__
print(json.dumps({"answer": answer.decode(), "direct": direct}))
"""


def _bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--unshare-net", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap cannot make a network namespace here")
async def test_a_socket_made_inside_the_sandbox_serves_its_loopback_and_nothing_else_is_reachable() -> None:
    baton_end, sandbox_end = socket.socketpair()
    sandbox = await asyncio.create_subprocess_exec(
        "bwrap", "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent",
        sys.executable, "-c", INSIDE, str(sandbox_end.fileno()),
        pass_fds=[sandbox_end.fileno()], stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    sandbox_end.close()
    try:
        message, fds, _, _ = await asyncio.wait_for(asyncio.to_thread(socket.recv_fds, baton_end, 64, 1), 30)
        listener = socket.socket(fileno=fds[0])
        async with Upstream() as upstream:
            async with ModelProxy(ModelUpstream(upstream.url, "sk-real"), sock=listener) as proxy:
                assert proxy.tcp_address[1] == int(message)  # the namespace's port, not one of ours
                baton_end.sendall(f"{proxy.placeholder} {upstream.port}".encode())
                out, _ = await asyncio.wait_for(sandbox.communicate(), 30)
            seen = upstream.seen
    finally:
        baton_end.close()
        if sandbox.returncode is None:
            sandbox.kill()
            await sandbox.wait()
    result = json.loads(out)
    assert result["answer"].startswith("HTTP/1.1 200 OK") and result["answer"].endswith('{"ok": true}')
    assert result["direct"] == "ConnectionRefusedError"  # the host's loopback is not the sandbox's
    assert [s.header("x-api-key") for s in seen] == ["sk-real"]
