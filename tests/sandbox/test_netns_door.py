"""The sandbox's network made from outside (baton.sandbox.netns, spawn): real bubblewrap, loopback only."""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from baton.errors import AgentError
from baton.sandbox import AllowList, ModelUpstream
from baton.sandbox.bwrap import containment
from baton.sandbox.netns import NETNS_METHOD_VARIABLE, NetnsDoor, RelayDoor, netns_unavailable, open_door
from baton.sandbox.network import MODEL_PORT, NetworkPlan, SandboxNetwork
from baton.sandbox.plan import plan_sandbox
from baton.sandbox.spawn import spawn_contained

pytestmark = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot contain here")
needs_setns = pytest.mark.skipif(netns_unavailable() is not None, reason="baton may not enter a namespace here")
METHODS = [pytest.param("setns", marks=needs_setns), "inside"]

# Inside: what listens on the namespace's loopback at the model port, and whether the host's is there.
PROBE = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    print("model-port:open")
except OSError as exc:
    print("model-port:" + type(exc).__name__)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=3).close()
    print("host-port:open")
except OSError as exc:
    print("host-port:" + type(exc).__name__)
"""


def _plan(tmp_path: Path):  # type: ignore[no-untyped-def]
    workspace = tmp_path / "work"
    workspace.mkdir(exist_ok=True)
    return plan_sandbox("bwrap", workspace=workspace, agent_home=tmp_path / "home", baton_home=tmp_path / "baton")


@pytest.mark.parametrize("method", METHODS)
async def test_the_namespace_holds_only_what_baton_serves(
    tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NETNS_METHOD_VARIABLE, method)
    host = socket.create_server(("127.0.0.1", 0))  # on the host's loopback: not in the sandbox
    plan = _plan(tmp_path)
    assert plan.network.isolated
    network = SandboxNetwork(plan.network, ModelUpstream("http://127.0.0.1:9"), "sk-baton-placeholder-x")
    try:
        process = await spawn_contained(
            [sys.executable, "-c", PROBE, str(MODEL_PORT), str(host.getsockname()[1])],
            plan=plan,
            network=network,
            cwd=tmp_path / "work",
            env={"PATH": "/usr/bin:/bin"},
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(process.communicate(), 30)
    finally:
        await network.aclose()
        host.close()
    assert out.decode().split() == ["model-port:open", "host-port:ConnectionRefusedError"]
    assert plan.describe()["network"]["method"] == method


@needs_setns
async def test_sockets_that_cannot_be_made_stop_the_command_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both proxies on one port: the second bind fails; the command never runs, and says so."""

    class SamePort(SandboxNetwork):
        async def serve(self, door: NetnsDoor) -> None:
            await door.listen([MODEL_PORT, MODEL_PORT])

    monkeypatch.setenv(NETNS_METHOD_VARIABLE, "setns")
    plan = _plan(tmp_path)
    network = SamePort(plan.network, ModelUpstream("http://127.0.0.1:9"), "placeholder")
    marker = tmp_path / "work" / "ran.txt"
    with pytest.raises(AgentError) as raised:
        await spawn_contained(
            ["/bin/sh", "-c", f"echo ran > {marker}"],
            plan=plan,
            network=network,
            cwd=tmp_path / "work",
            env={"PATH": "/usr/bin:/bin"},
        )
    assert raised.value.code == "sandbox_network_failed"
    assert "Address already in use" in raised.value.message
    await asyncio.sleep(0.5)
    assert not marker.exists()


async def test_a_bubblewrap_that_ends_first_is_reported_not_waited_for(tmp_path: Path) -> None:
    door = NetnsDoor.pipes()
    process = await asyncio.create_subprocess_exec(
        "bwrap", "--no-such-option", *door.bwrap_args(), "--", "true", pass_fds=door.pass_fds,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    door.spawned()
    with pytest.raises(AgentError) as raised:
        await door.listen([MODEL_PORT], wait_seconds=20)
    assert raised.value.code == "agent_exited"
    door.close()
    await process.wait()


async def test_a_closed_network_serves_nothing(tmp_path: Path) -> None:
    network = SandboxNetwork(NetworkPlan(True, AllowList()), ModelUpstream("http://127.0.0.1:9"), "placeholder")
    await network.aclose()
    door = NetnsDoor.pipes()
    with pytest.raises(AgentError) as raised:
        await network.serve(door)
    assert raised.value.code == "sandbox_network_failed"
    door.close()


@pytest.mark.parametrize("method", METHODS)
async def test_a_door_works_for_a_command_a_script_starts(
    tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Claude path: a shell script runs bubblewrap (setns: it opens the FIFOs as descriptors 7
    and 8; inside: the inside program connects to the door's Unix socket in the launch directory)."""
    monkeypatch.setenv(NETNS_METHOD_VARIABLE, method)
    (tmp_path / "launch").mkdir()
    plan = _plan(tmp_path).with_read_only([tmp_path / "launch"])  # as the run's launch files are
    network = SandboxNetwork(plan.network, ModelUpstream("http://127.0.0.1:9"), "placeholder")
    door = open_door(tmp_path / "launch")
    assert isinstance(door, NetnsDoor if method == "setns" else RelayDoor)
    args = " ".join(plan.bwrap_args(tmp_path / "work") + door.bwrap_args())
    command = " ".join(door.command([sys.executable, "-c", f"'{PROBE}'", str(MODEL_PORT), "9"]))
    script = tmp_path / "launch" / "run.sh"
    script.write_text(f"#!/bin/sh\nexec {args} -- {command} {door.redirections()}\n")
    script.chmod(0o700)
    try:
        async with network.serving(door):
            process = await asyncio.create_subprocess_exec(str(script), stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(process.communicate(), 30)
    finally:
        door.close()
        await network.aclose()
    assert out.decode().split()[0] == "model-port:open"
    assert not (tmp_path / "launch" / "netns-info").exists() and not (tmp_path / "launch" / "netns.sock").exists()


async def test_without_batons_word_the_inside_program_never_runs_the_agent(tmp_path: Path) -> None:
    door = RelayDoor.for_spawn()
    marker = tmp_path / "ran.txt"
    process = await asyncio.create_subprocess_exec(
        "bwrap", "--unshare-net", "--dev-bind", "/", "/", "--",
        *door.command(["/bin/sh", "-c", f"echo ran > {marker}"]), pass_fds=door.pass_fds,
    )  # fmt: skip
    door.spawned()
    sockets = await door._receive(2)  # the sockets arrive; baton then closes without its word
    for sock in sockets:
        sock.close()
    door.close()
    assert await asyncio.wait_for(process.wait(), 20) == 111
    assert not marker.exists()


async def test_an_unprivileged_sandbox_gets_its_sockets_made_inside() -> None:
    """As ``nobody``: bubblewrap makes a user namespace first; baton could not enter it, so the
    inside program makes the sockets (with the system's Python: this venv lives under /root)."""
    from baton.sandbox.netns import _INSIDE

    shared = Path(tempfile.mkdtemp(prefix="baton-netns-", dir="/tmp"))  # pytest's tmp_path is root's only
    shared.chmod(0o755)
    door = RelayDoor.for_script(shared)
    socket_path = shared / "netns.sock"
    socket_path.chmod(0o666)  # baton and its agent share a uid in real use; here they do not
    host = socket.create_server(("127.0.0.1", 0))
    inside = door.command(["/usr/bin/python3", "-I", "-c", PROBE, str(MODEL_PORT), str(host.getsockname()[1])])
    inside[0] = "/usr/bin/python3"
    inside[3] = str(_INSIDE)
    network = SandboxNetwork(NetworkPlan(True, AllowList()), ModelUpstream("http://127.0.0.1:9"), "placeholder")
    try:
        async with network.serving(door):
            process = await asyncio.create_subprocess_exec(
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                "bwrap", "--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", *inside,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        door.close()
        await network.aclose()
        host.close()
        shutil.rmtree(shared, ignore_errors=True)
    assert out.decode().split() == ["model-port:open", "host-port:ConnectionRefusedError"], err.decode()
