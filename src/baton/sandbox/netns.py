"""Listening sockets inside a sandbox's own network namespace, made by baton from outside.

A sandboxed agent runs in a network namespace of its own (bubblewrap ``--unshare-net``): its
loopback is its own, and nothing else is there. baton serves the agent's model proxy and its
allow-list proxy on that loopback **without a relay process**: bubblewrap reports the pid of
its child (``--info-fd``) and waits (``--block-fd``) before it runs the agent; meanwhile a
short-lived thread of baton enters the child's network namespace (``setns``), makes the
listening sockets there (a socket keeps the namespace it was made in) and leaves with the
thread. baton's event loop then accepts on them as on any socket. Once the sockets listen,
baton lets bubblewrap go on; if anything fails the child is killed before its command runs
(were it let go, it would find nothing listening: a sandbox without its proxies has no network).

Entering a network namespace takes ``CAP_SYS_ADMIN`` (baton as root). Elsewhere
(:func:`netns_method` ``inside``) :class:`RelayDoor` has ``netns_inside.py`` make the sockets
inside and hand them over (``SCM_RIGHTS``) before it becomes the agent.

:class:`NetnsDoor` is the rendezvous with one bubblewrap: pipes for a child baton spawns
itself (``pass_fds``), FIFOs for one a script spawns (Claude Code's ``cli_path`` wrapper);
:func:`open_door` chooses the door.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import os
import shlex
import socket
import sys
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from baton.errors import AgentError

__all__ = [
    "BLOCK_FD",
    "INFO_FD",
    "NETNS_METHOD_VARIABLE",
    "SANDBOX_PORTS",
    "Door",
    "NetnsDoor",
    "RelayDoor",
    "netns_method",
    "open_door",
]

_CLONE_NEWNET = 0x40000000
_CAP_SYS_ADMIN = 21
_IP_FREEBIND = 15  # bind before the namespace's loopback is up (bubblewrap brings it up)
# The ports of the sandbox's own loopback where baton listens: the model proxy, the allow-list
# proxy, and the run's MCP endpoints (baton.mcp; closed at once for a run without MCP servers).
SANDBOX_PORTS = (17070, 17071, 17072)
# The descriptors a FIFO door's script opens for bubblewrap (well above the SDK's stdio).
INFO_FD = 7
BLOCK_FD = 8


NETNS_METHOD_VARIABLE = "BATON_NETNS_METHOD"  # "setns" or "inside": how the sockets are made (tests, diagnosis)
_INSIDE = Path(__file__).with_name("netns_inside.py")


def netns_method() -> str:
    """``setns`` where baton may enter a namespace (CAP_SYS_ADMIN), else ``inside``: a small
    program in the namespace makes the sockets and hands them over (:class:`RelayDoor`)."""
    chosen = os.environ.get(NETNS_METHOD_VARIABLE)
    if chosen in ("setns", "inside"):
        return chosen
    return "setns" if netns_unavailable() is None else "inside"


def open_door(script_dir: Path | None = None) -> Door:
    """The door for one bubblewrap: baton spawns it (``script_dir`` None: pipes, ``pass_fds``) or
    a script does (FIFOs, or for ``inside`` a Unix socket, in ``script_dir``)."""
    if netns_method() == "inside":
        return RelayDoor.for_script(script_dir) if script_dir is not None else RelayDoor.for_spawn()
    return NetnsDoor.fifos(script_dir) if script_dir is not None else NetnsDoor.pipes()


class Door(Protocol):
    """How baton's listening sockets get into one bubblewrap's network namespace."""

    @property
    def pass_fds(self) -> tuple[int, ...]: ...
    def bwrap_args(self) -> list[str]: ...
    def command(self, argv: Sequence[str]) -> list[str]: ...
    def redirections(self) -> str: ...
    def spawned(self) -> None: ...
    async def listen(self, ports: Sequence[int], *, wait_seconds: float = 30.0) -> list[socket.socket]: ...
    def take_namespace(self) -> int | None: ...
    def release(self) -> None: ...
    def close(self) -> None: ...


@cache
def netns_unavailable() -> str | None:
    """Why baton cannot make sockets in a sandbox's network namespace here; None when it can."""
    if not hasattr(os, "sched_getaffinity"):  # not Linux
        return "network namespaces are Linux's"
    try:
        status = Path("/proc/self/status").read_text()
    except OSError as exc:
        return f"cannot read /proc/self/status: {exc.strerror}"
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            if int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1:
                return None
            break
    return "entering the sandbox's network namespace needs CAP_SYS_ADMIN (baton runs unprivileged)"


class NetnsDoor:
    """One bubblewrap's ``--info-fd``/``--block-fd``: :meth:`listen` waits for its child, makes the
    listening sockets in the child's network namespace and lets it go on."""

    def __init__(self, info: int, block: int, child_fds: Sequence[int], fifo_dir: Path | None) -> None:
        self._info = info  # baton's end: bubblewrap writes its child's pid here
        self._block = block  # baton's end: bubblewrap waits until something is written (or EOF)
        self._child_fds = list(child_fds)  # the ends bubblewrap inherits (pipes); closed once spawned
        self._fifo_dir = fifo_dir
        self._namespace = -1  # the child's /proc/PID/ns/net, opened once it is known (take_namespace)
        os.set_blocking(self._info, False)

    @classmethod
    def pipes(cls) -> NetnsDoor:
        """For a child baton spawns: pass :attr:`pass_fds`, add :meth:`bwrap_args`, call :meth:`spawned`."""
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        return cls(info_read, block_write, [info_write, block_read], None)

    @classmethod
    def fifos(cls, directory: Path) -> NetnsDoor:
        """For a child a script spawns: the script opens ``INFO_FD`` and ``BLOCK_FD`` on the FIFOs
        :meth:`redirections` names. baton holds both FIFOs read-write, so neither open blocks."""
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("netns-info", "netns-block"):
            (directory / name).unlink(missing_ok=True)
            os.mkfifo(directory / name, 0o600)
        info = os.open(directory / "netns-info", os.O_RDWR | os.O_CLOEXEC)
        block = os.open(directory / "netns-block", os.O_RDWR | os.O_CLOEXEC)
        return cls(info, block, [], directory)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self._child_fds)

    def command(self, argv: Sequence[str]) -> list[str]:
        """The command bubblewrap runs: the agent's own (the sockets are made from outside)."""
        return list(argv)

    def bwrap_args(self) -> list[str]:
        """bubblewrap's options for this door (after ``--unshare-net``)."""
        if self._fifo_dir is not None:
            return ["--info-fd", str(INFO_FD), "--block-fd", str(BLOCK_FD)]
        info_write, block_read = self._child_fds
        return ["--info-fd", str(info_write), "--block-fd", str(block_read)]

    def redirections(self) -> str:
        """A FIFO door's shell redirections, for the command that execs bubblewrap."""
        if self._fifo_dir is None:
            return ""
        info, block = self._fifo_dir / "netns-info", self._fifo_dir / "netns-block"
        return f"{INFO_FD}>{_quote(info)} {BLOCK_FD}<{_quote(block)}"

    def spawned(self) -> None:
        """The child holds its ends now: close baton's copies (a dead child then reads as EOF)."""
        for fd in self._child_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._child_fds = []

    async def listen(self, ports: Sequence[int], *, wait_seconds: float = 30.0) -> list[socket.socket]:
        """Wait for the child, make a listening TCP socket on 127.0.0.1 at each port inside its
        network namespace, then let it go on. On failure the child is left waiting: the caller
        kills it, then :meth:`close` (were it let go, it would find no network at all).

        ``agent_start_timeout`` when bubblewrap says nothing in ``wait_seconds``,
        ``agent_exited`` when it ends first, ``sandbox_network_failed`` when the sockets cannot
        be made.
        """
        try:
            pid = await asyncio.wait_for(self._child_pid(), wait_seconds)
            sockets = await asyncio.to_thread(_listen_in, pid, list(ports))
        except TimeoutError as exc:
            message = f"bubblewrap did not start the sandbox in {wait_seconds:g} s"
            raise AgentError("agent_start_timeout", message) from exc
        with contextlib.suppress(OSError):  # the child waits still: its pid is its own
            self._namespace = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self.release()
        return sockets

    def take_namespace(self) -> int | None:
        """The namespace's descriptor (an open ``/proc/PID/ns/net``), the caller's to close from
        now on; None before :meth:`listen`, or once taken. baton.sandbox.port_forward enters it."""
        fd, self._namespace = self._namespace, -1
        return fd if fd >= 0 else None

    def release(self) -> None:
        """Let the child go on (idempotent)."""
        if self._block >= 0:
            with contextlib.suppress(OSError):
                os.write(self._block, b"1")
            os.close(self._block)
            self._block = -1

    def close(self) -> None:
        """Close every descriptor and FIFO of this door (idempotent). A child still waiting then
        reads EOF and goes on: kill it first if it must not run."""
        if self._block >= 0:
            os.close(self._block)
            self._block = -1
        self.spawned()
        if self._info >= 0:
            os.close(self._info)
            self._info = -1
        if self._namespace >= 0:
            os.close(self._namespace)
            self._namespace = -1
        if self._fifo_dir is not None:
            for name in ("netns-info", "netns-block"):
                (self._fifo_dir / name).unlink(missing_ok=True)

    async def _child_pid(self) -> int:
        loop = asyncio.get_running_loop()
        data = b""
        while True:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self._info, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(self._info)
            try:
                chunk = os.read(self._info, 4096)
            except BlockingIOError:
                continue
            if not chunk:
                raise AgentError("agent_exited", "bubblewrap ended before it started the sandbox")
            data += chunk
            info = _parsed(data)
            if info is not None:
                pid = info.get("child-pid")
                if not isinstance(pid, int):
                    raise AgentError("sandbox_network_failed", f"bubblewrap reported no child pid: {info!r}")
                return pid


class RelayDoor:
    """The door where baton may not enter the namespace (unprivileged): ``netns_inside.py`` runs
    first in the sandbox, makes the listening sockets on its loopback, hands them to baton over a
    Unix socket (``SCM_RIGHTS``) and, on baton's word, becomes the agent. ~30 ms more a start (a
    Python interpreter without ``site``); the sockets are baton's as with ``setns``."""

    def __init__(self, baton_end: socket.socket | None, child_end: socket.socket | None, path: Path | None) -> None:
        self._baton = baton_end  # the connection to the inside program (a socketpair end, or accepted)
        self._child = child_end  # its end, inherited by bubblewrap (pipes case)
        self._listener: socket.socket | None = None
        self._path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _bind_unix(self._listener, path)
            path.chmod(0o600)
            self._listener.listen(1)
            self._listener.setblocking(False)

    @classmethod
    def for_spawn(cls) -> RelayDoor:
        baton_end, child_end = socket.socketpair()
        baton_end.setblocking(False)
        return cls(baton_end, child_end, None)

    @classmethod
    def for_script(cls, directory: Path) -> RelayDoor:
        return cls(None, None, directory / "netns.sock")

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._child.fileno(),) if self._child is not None else ()

    def bwrap_args(self) -> list[str]:
        return []

    def redirections(self) -> str:
        return ""

    def command(self, argv: Sequence[str]) -> list[str]:
        """``netns_inside.py`` first, then the agent's command."""
        channel = f"fd:{self._child.fileno()}" if self._child is not None else f"path:{self._path}"
        ports = ",".join(str(port) for port in SANDBOX_PORTS)
        return [sys.executable, "-I", "-S", str(_INSIDE), channel, ports, "--", *argv]

    def spawned(self) -> None:
        if self._child is not None:
            self._child.close()
            self._child = None

    async def listen(self, ports: Sequence[int], *, wait_seconds: float = 30.0) -> list[socket.socket]:
        """The listening sockets the inside program made (it was given ``ports`` on its command line)."""
        if tuple(ports) != SANDBOX_PORTS:
            raise AgentError("sandbox_network_failed", f"the inside program listens on {SANDBOX_PORTS}, not {ports}")
        try:
            sockets = await asyncio.wait_for(self._receive(len(ports)), wait_seconds)
        except TimeoutError as exc:
            message = f"the sandbox's network was not made in {wait_seconds:g} s"
            raise AgentError("agent_start_timeout", message) from exc
        self.release()
        return sockets

    def take_namespace(self) -> int | None:
        """None: baton unprivileged cannot enter the namespace (its ports are not forwarded)."""
        return None

    async def _receive(self, count: int) -> list[socket.socket]:
        loop = asyncio.get_running_loop()
        if self._baton is None:
            assert self._listener is not None
            self._baton, _ = await loop.sock_accept(self._listener)
            self._baton.setblocking(False)
        baton = self._baton
        while True:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(baton.fileno(), _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(baton.fileno())
            try:
                message, fds, _flags, _address = socket.recv_fds(baton, 64, count)
            except BlockingIOError:
                continue
            if not message:
                raise AgentError("agent_exited", "the sandbox ended before its network was made")
            sockets = [socket.socket(fileno=fd) for fd in fds]
            if len(sockets) != count:
                for sock in sockets:
                    sock.close()
                raise AgentError("sandbox_network_failed", f"the sandbox handed over {len(fds)} sockets, not {count}")
            for sock in sockets:
                sock.setblocking(False)
            return sockets

    def release(self) -> None:
        if self._baton is not None:
            with contextlib.suppress(OSError):
                self._baton.setblocking(True)
                self._baton.send(b"1")
            self._baton.close()
            self._baton = None

    def close(self) -> None:
        if self._baton is not None:
            self._baton.close()  # without the word: the inside program exits, the agent never runs
            self._baton = None
        self.spawned()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)


def _bind_unix(sock: socket.socket, path: Path) -> None:
    """Bind ``sock`` at ``path``, which may be longer than a Unix socket's 107 bytes (a run's
    directory can be): then through ``/proc/self/fd/N`` of its directory (the inside program
    connects the same way)."""
    if len(os.fsencode(path)) < 100:
        sock.bind(str(path))
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _parsed(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None  # not whole yet
    return value if isinstance(value, dict) else None


def _listen_in(pid: int, ports: list[int]) -> list[socket.socket]:
    """In a thread of its own (which then ends): enter ``pid``'s network namespace, listen there."""
    made: list[socket.socket] = []
    failure: list[BaseException] = []

    def enter_and_listen() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))
            finally:
                os.close(fd)
            for port in ports:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                made.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.IPPROTO_IP, _IP_FREEBIND, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen(128)
                sock.setblocking(False)
        except BaseException as exc:  # reported to the caller, from this thread
            failure.append(exc)

    # A thread that only does this and ends: the namespace it entered goes with it.
    thread = threading.Thread(target=enter_and_listen, name="baton-netns", daemon=True)
    thread.start()
    thread.join()
    if failure:
        for sock in made:
            sock.close()
        exc = failure[0]
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
            raise AgentError("agent_exited", "the sandbox ended before its network was made")
        raise AgentError("sandbox_network_failed", f"cannot listen in the sandbox's network namespace: {exc}")
    return made


def _quote(path: Path) -> str:
    return shlex.quote(str(path))
