"""A sandboxed agent's network (docs/sandbox.md "The network").

In mode ``bwrap`` the agent runs in a network namespace of its own where nothing is reachable
but two proxies baton serves on the namespace's own loopback (:mod:`baton.sandbox.netns`):

- ``http://127.0.0.1:MODEL_PORT``: the **model proxy** (:class:`~baton.sandbox.ModelProxy`),
  in front of the endpoint the agent would otherwise have used (the configured API, a
  scenario's scripted server, a recording proxy). The agent holds a placeholder key; the proxy
  puts the real one in its place, so the real key never enters the sandbox.
- ``http://127.0.0.1:MCP_PORT/NAME/mcp``: the run's **MCP endpoints** (:mod:`baton.mcp`), when
  it has MCP servers: the socket is handed to :attr:`SandboxNetwork.mcp_serve`.
- ``http://127.0.0.1:PROXY_PORT``: the **allow-list proxy** (:class:`~baton.sandbox.ConnectProxy`),
  the agent's ``HTTPS_PROXY``/``HTTP_PROXY``, which lets through the hosts of ``--allow-net``
  and ``sandbox.allow_net`` and refuses every other one. Each connection it sees is reported
  (the run logs it as ``_baton/net``; a refused one is also a runner ``message`` with
  ``denied: true``).

The run's ``BATON_PORT_BASE`` block (:attr:`SandboxNetwork.forward_ports`) is forwarded from the
host's ``127.0.0.1`` into the namespace (:mod:`baton.sandbox.port_forward`), so a dev server
the agent starts there is reachable from the host while the run lasts.

:class:`NetworkPlan` is what a run asked for (pure data, in the sandbox plan);
:class:`SandboxNetwork` serves it for one agent (and its workspace's setup step).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from baton.errors import AgentError
from baton.sandbox.connect_proxy import ConnectProxy
from baton.sandbox.model_proxy import ModelProxy, ModelUpstream
from baton.sandbox.netns import SANDBOX_PORTS, Door
from baton.sandbox.port_forward import NamespaceSockets, PortForwarder
from baton.sandbox.proxy_allow import AllowList, NetDecision
from baton.sandbox.proxy_hooks import ModelObserver
from baton.sandbox.proxy_listener import ProxyListener

__all__ = ["MCP_PORT", "MODEL_PORT", "PROXY_PORT", "McpServe", "NetworkPlan", "SandboxNetwork", "proxy_environment"]

# Ports on the sandbox's own loopback (its namespace holds nothing else).
MODEL_PORT, PROXY_PORT, MCP_PORT = SANDBOX_PORTS
# Serves the run's MCP endpoints on a listening socket made in the namespace (baton.mcp.McpProxy.serve_socket).
McpServe = Callable[[socket.socket], Awaitable[None]]
MODEL_URL = f"http://127.0.0.1:{MODEL_PORT}"
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"

Reporter = Callable[[NetDecision], object]


@dataclass(frozen=True)
class NetworkPlan:
    """A run's network: ``isolated`` (a namespace of its own, the two proxies) or the machine's."""

    isolated: bool
    allow: AllowList = field(default_factory=AllowList)
    reason: str | None = None  # why the network is the machine's
    method: str = "setns"  # how the namespace's sockets are made (baton.sandbox.netns.netns_method)

    def describe(self) -> dict[str, Any]:
        """The ``network`` part of ``_baton/sandbox``."""
        if not self.isolated:
            body: dict[str, Any] = {"mode": "shared"}
            if self.reason:
                body["reason"] = self.reason
            return body
        return {
            "mode": "isolated",
            "method": self.method,
            "model_proxy": MODEL_URL,
            "proxy": PROXY_URL,
            "allow_net": [str(rule) for rule in self.allow.rules],
            "dns": False,
        }


def proxy_environment() -> dict[str, str]:
    """What names the allow-list proxy in a sandboxed agent's environment (both spellings)."""
    env: dict[str, str] = {}
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = PROXY_URL
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    return env


class SandboxNetwork:
    """The two proxies of one agent's sandbox, served from baton's event loop.

    ``upstream`` is the endpoint the agent's model requests go to, with the real key;
    ``placeholder`` is the key the agent holds. :meth:`serve` is called once per bubblewrap
    that runs in the namespace (the agent, its workspace's setup step); :meth:`aclose` ends
    every proxy. ``reporter`` (set by the run's executor) receives every connection the
    allow-list proxy sees.
    """

    def __init__(
        self,
        plan: NetworkPlan,
        upstream: ModelUpstream,
        placeholder: str,
        *,
        observer: ModelObserver | None = None,
    ) -> None:
        self.plan = plan
        self.upstream = upstream
        self.placeholder = placeholder
        self.observer = observer
        self.reporter: Reporter | None = None
        self.mcp_serve: McpServe | None = None  # set by the run before its agent starts, when it has MCP servers
        self.forward_ports: tuple[int, ...] = ()  # the run's BATON_PORT_BASE block, forwarded from the host
        self.forwarder: PortForwarder | None = None  # made by the first serve() with ports to forward
        self.decisions: list[NetDecision] = []  # reported before a reporter was set
        self._proxies: list[ProxyListener] = []
        self._closed = False

    async def serve(self, door: Door) -> None:
        """Listen in the namespace behind ``door`` and serve both proxies there until :meth:`aclose`."""
        if self._closed:
            door.close()
            raise AgentError("sandbox_network_failed", "the sandbox's network is closed")
        model_sock, proxy_sock, mcp_sock = await door.listen(list(SANDBOX_PORTS))
        await self._forward_into(door)
        model = ModelProxy(self.upstream, sock=model_sock, placeholder=self.placeholder, observer=self.observer)
        connect = ConnectProxy(self.plan.allow, report=self._report, sock=proxy_sock)
        try:
            for proxy in (model, connect):
                self._proxies.append(proxy)
                await proxy.start()
            if self.mcp_serve is not None:
                await self.mcp_serve(mcp_sock)  # the MCP proxy owns the socket from here
            else:
                mcp_sock.close()
        except BaseException:
            model_sock.close()  # a proxy not started yet never owned its socket
            proxy_sock.close()
            mcp_sock.close()
            raise

    @contextlib.asynccontextmanager
    async def serving(self, door: Door) -> AsyncIterator[None]:
        """``async with network.serving(door): <spawn the bubblewrap behind door>``: serves while
        the body spawns, and on leaving waits until both proxies listen (raising what failed:
        the caller then kills what it spawned and closes the door). A body that fails cancels
        the serving."""
        task = asyncio.create_task(self.serve(door))
        try:
            yield
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        door.spawned()
        await task
        door.close()

    async def _forward_into(self, door: Door) -> None:
        """Point the host's ports at the namespace behind ``door`` (the newest: the agent's after
        its setup's), listening on them first if this is the first namespace."""
        namespace = door.take_namespace()
        if not self.forward_ports or namespace is None:
            if namespace is not None:
                os.close(namespace)
            return
        if self.forwarder is None:
            self.forwarder = PortForwarder(self.forward_ports)
            await self.forwarder.start()
        self.forwarder.target(NamespaceSockets(namespace))

    async def aclose(self) -> None:
        self._closed = True
        forwarder, self.forwarder = self.forwarder, None
        if forwarder is not None:
            await forwarder.aclose()
        proxies, self._proxies = self._proxies, []
        for proxy in proxies:
            with contextlib.suppress(Exception):
                await proxy.aclose()

    def _report(self, decision: NetDecision) -> None:
        if self.reporter is None:
            self.decisions.append(decision)
            return
        self.reporter(decision)

    def report_to(self, reporter: Reporter) -> None:
        """Send every decision (the ones already made first) to ``reporter``."""
        self.reporter = reporter
        pending, self.decisions = self.decisions, []
        for decision in pending:
            reporter(decision)
