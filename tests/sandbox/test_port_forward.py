"""A run's ports forwarded from the host into its sandbox's network namespace
(baton.sandbox.port_forward): a real bubblewrap, a real dev server inside, the host's client outside."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from baton.sandbox import ModelUpstream
from baton.sandbox.bwrap import containment
from baton.sandbox.netns import NETNS_METHOD_VARIABLE, netns_unavailable
from baton.sandbox.network import SandboxNetwork
from baton.sandbox.plan import plan_sandbox
from baton.sandbox.port_forward import PortForwarder
from baton.sandbox.spawn import spawn_contained
from baton.workspaces.ports import PORT_BLOCK, claim_ports

pytestmark = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot contain here")
needs_setns = pytest.mark.skipif(netns_unavailable() is not None, reason="baton may not enter a namespace here")


def _get(port: int) -> bytes:
    """``GET /`` on the host's 127.0.0.1:port: the whole answer (empty when the far side closed at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.0\r\nHost: sandbox\r\n\r\n")
        answer = b""
        try:
            while data := client.recv(65536):
                answer += data
        except ConnectionResetError:  # closed by the far side before it read the request
            return answer
    return answer


async def _answer_once_up(port: int, process: asyncio.subprocess.Process) -> bytes:
    """The dev server's answer through the forwarder, once it listens inside (until then the
    forwarder finds nothing there and closes the host's connection)."""
    for _ in range(500):
        answer = await asyncio.to_thread(_get, port)
        if answer:
            return answer
        assert process.returncode is None, "the dev server ended"
        await asyncio.sleep(0.02)
    raise AssertionError("the dev server never answered through the forwarder")


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


@needs_setns
async def test_a_dev_server_in_the_sandbox_is_reachable_from_the_host_while_the_run_lasts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NETNS_METHOD_VARIABLE, "setns")
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "served-from-the-sandbox.txt").write_text("hello\n")
    base = claim_ports(tmp_path / "baton", "run_forward")  # as a run's BATON_PORT_BASE
    ports = tuple(range(base, base + PORT_BLOCK))
    plan = plan_sandbox("bwrap", workspace=workspace, agent_home=tmp_path / "home", baton_home=tmp_path / "baton")
    assert plan.network.isolated
    network = SandboxNetwork(plan.network, ModelUpstream("http://127.0.0.1:9"), "placeholder")
    network.forward_ports = ports
    server = await spawn_contained(
        [sys.executable, "-m", "http.server", str(base + 1), "--bind", "127.0.0.1"],
        plan=plan,
        network=network,
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert network.forwarder is not None and network.forwarder.listening == list(ports)
        answer = await _answer_once_up(base + 1, server)
        assert answer.startswith(b"HTTP/1.0 200 OK")
        assert b"served-from-the-sandbox.txt" in answer  # the sandbox's server, in the workspace
        assert await asyncio.to_thread(_get, base) == b""  # a port nothing listens on inside: closed
    finally:
        await network.aclose()  # the run's end
        server.kill()
        await server.wait()
    assert _refused(base + 1) and _refused(base)  # the host's ports are let go with the run


async def test_the_inside_method_forwards_nothing_and_listens_on_no_host_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unprivileged baton cannot enter the namespace: its ports stay the sandbox's own."""
    monkeypatch.setenv(NETNS_METHOD_VARIABLE, "inside")
    workspace = tmp_path / "work"
    workspace.mkdir()
    base = claim_ports(tmp_path / "baton", "run_inside")
    plan = plan_sandbox("bwrap", workspace=workspace, agent_home=tmp_path / "home", baton_home=tmp_path / "baton")
    network = SandboxNetwork(plan.network, ModelUpstream("http://127.0.0.1:9"), "placeholder")
    network.forward_ports = (base,)
    process = await spawn_contained(
        ["/bin/sh", "-c", "exit 0"], plan=plan, network=network, cwd=workspace, env={"PATH": "/usr/bin:/bin"}
    )
    try:
        assert await process.wait() == 0
        assert network.forwarder is None
        assert _refused(base)
    finally:
        await network.aclose()


async def test_a_port_the_host_holds_already_is_reported_and_the_others_listen() -> None:
    held = socket.create_server(("127.0.0.1", 0))
    free = socket.create_server(("127.0.0.1", 0))
    free_port = free.getsockname()[1]
    free.close()
    forwarder = PortForwarder([held.getsockname()[1], free_port])
    try:
        await forwarder.start()
        assert forwarder.listening == [free_port]
        assert list(forwarder.unavailable) == [held.getsockname()[1]]
        # no namespace yet: a connection is closed at once, never relayed anywhere else
        assert await asyncio.to_thread(_get, free_port) == b""
    finally:
        await forwarder.aclose()
        held.close()
    assert _refused(free_port)
