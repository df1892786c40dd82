"""baton's MCP proxy for one run: every server of the run behind one endpoint each.

``McpProxy(servers, decide, note)`` connects to each server (a stdio command is started here,
outside any sandbox, with the MCP SDK's default environment plus the server's own ``env``; a
URL is reached with its ``headers``) and serves ``http://127.0.0.1:PORT/NAME/mcp``
(streamable HTTP, stateless, JSON answers) for the agent. ``tools/list`` is passed through;
every ``tools/call`` is decided first (``decide``: :class:`baton.mcp.deciding.PolicyDecider`)
and logged through ``note`` as ``mcp_called`` (before the decision, so a gate it opens follows
it) and ``mcp_finished`` (the output, ``is_error``, and ``denied`` with the reason when it was
not made). A server that exits mid-call, or does not answer within its ``timeout_seconds``, is
an error result for the agent: the run goes on.

:meth:`McpProxy.serve_socket` serves the same endpoints on another listening socket (the one
made inside a sandbox's network namespace, :data:`baton.sandbox.network.MCP_PORT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx2
import mcp_types as types
import uvicorn
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

from baton.config import McpServerConfig
from baton.errors import AgentError
from baton.mcp.deciding import McpVerdict

__all__ = ["OUTPUT_LIMIT", "Decide", "McpCall", "McpProxy", "Note"]

_log = logging.getLogger("baton.mcp")

OUTPUT_LIMIT = 64 * 1024  # bytes of a call's output the log keeps (head and tail around a marker)
_CONNECT_SECONDS = 30.0

Decide = Callable[[str, str, Mapping[str, Any], str], Awaitable[McpVerdict]]
Note = Callable[[str, Any], object]


@dataclass(frozen=True)
class McpCall:
    """One ``tools/call`` as the log names it."""

    server: str
    tool: str
    tool_call_id: str
    input: dict[str, Any]


class _QuietServer(uvicorn.Server):
    """uvicorn inside baton's own loop: the process's signals stay baton's."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class _Backend:
    """The proxy's client of one server."""

    def __init__(self, config: McpServerConfig, errlog: TextIO) -> None:
        self.config = config
        self.client: Client | None = None
        self.gone: str | None = None  # why the server cannot be reached any more
        self._errlog = errlog

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "stdio":
            params = StdioServerParameters(
                command=config.command[0], args=list(config.command[1:]), env=dict(config.env)
            )
            return stdio_client(params, errlog=self._errlog)
        assert config.url is not None
        if config.transport == "sse":
            return sse_client(config.url, headers=dict(config.headers))
        http = httpx2.AsyncClient(headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=None))
        stack.push_async_callback(http.aclose)  # a client handed in is not closed by the transport
        return streamable_http_client(config.url, http_client=http)

    async def connect(self, stack: contextlib.AsyncExitStack) -> None:
        client = Client(self._transport(stack), cache=None, raise_exceptions=False)
        self.client = await stack.enter_async_context(client)


class McpProxy:
    """The MCP endpoints of one run (an async context manager; :meth:`start` / :meth:`aclose`)."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        decide: Decide,
        note: Note,
        *,
        stderr_dir: Path | None = None,
    ) -> None:
        self.servers = tuple(servers)
        self._decide = decide
        self._note = note
        self._stderr_dir = stderr_dir
        self._backends: dict[str, _Backend] = {}
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._http: list[tuple[_QuietServer, asyncio.Task[None]]] = []
        self._app: Starlette | None = None
        self._errlogs: list[TextIO] = []
        self.port: int | None = None

    async def __aenter__(self) -> McpProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def url(self, name: str, *, host: str = "127.0.0.1", port: int | None = None) -> str:
        """The endpoint of server ``name`` (``port``: another socket's, e.g. the sandbox's)."""
        return f"http://{host}:{port if port is not None else self.port}/{name}/mcp"

    async def start(self) -> None:
        """Connect to every server and listen on 127.0.0.1 (a free port); a server that cannot
        be started or reached is ``mcp_server_failed``."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name="baton-mcp-proxy")
        try:
            await ready
        except BaseException:
            owner, self._owner = self._owner, None
            self._stop.set()
            owner.cancel()  # still connecting, perhaps: it watches no stop yet
            with contextlib.suppress(BaseException):
                await owner
            raise

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """Holds every client and session manager (anyio scopes live in one task) until closed."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                routes: list[Route] = []
                for config in self.servers:
                    backend = _Backend(config, self._errlog(config.name))
                    try:
                        async with asyncio.timeout(_CONNECT_SECONDS):
                            await backend.connect(stack)
                    except Exception as exc:
                        raise AgentError(
                            "mcp_server_failed", f"the MCP server {config.name} could not be started: {_text(exc)}"
                        ) from exc
                    self._backends[config.name] = backend
                    manager = StreamableHTTPSessionManager(
                        app=self._front(backend), json_response=True, stateless=True, security_settings=_LOOPBACK
                    )
                    await stack.enter_async_context(manager.run())
                    routes.append(Route(f"/{config.name}/mcp", endpoint=StreamableHTTPASGIApp(manager)))
                self._app = Starlette(routes=routes)
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", 0))
                self.port = sock.getsockname()[1]
                await self._listen(sock)
                if not ready.done():  # else start() gave up meanwhile
                    ready.set_result(None)
                    await self._stop.wait()
                await self._close_http()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            elif not isinstance(exc, asyncio.CancelledError | GeneratorExit):
                _log.exception("the MCP proxy failed")
        finally:
            await self._close_http()  # what a failure or a cancel left listening
            for errlog in self._errlogs:
                errlog.close()

    def _errlog(self, name: str) -> TextIO:
        """Where a stdio server's stderr goes: ``mcp-NAME.stderr`` in the run's directory."""
        if self._stderr_dir is None:
            errlog = open(os.devnull, "w")  # noqa: SIM115 - closed with the proxy
        else:
            self._stderr_dir.mkdir(parents=True, exist_ok=True)
            errlog = open(self._stderr_dir / f"mcp-{name}.stderr", "a")  # noqa: SIM115
        self._errlogs.append(errlog)
        return errlog

    async def _listen(self, sock: socket.socket) -> None:
        """Serve the app on ``sock`` (uvicorn in this loop: started here, its main loop a task)."""
        assert self._app is not None
        if sock.family in (socket.AF_INET, socket.AF_INET6):  # answers in several writes: no Nagle wait
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.listen(64)
        sock.setblocking(False)
        config = uvicorn.Config(self._app, lifespan="off", access_log=False, log_level="warning", ws="none")
        config.load()
        server = _QuietServer(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
        if not server.started:
            sock.close()
            raise AgentError("mcp_server_failed", "the MCP proxy could not listen")

        async def serve() -> None:
            try:
                await server.main_loop()
            finally:
                await server.shutdown(sockets=[sock])

        self._http.append((server, asyncio.create_task(serve(), name="baton-mcp-http")))

    async def serve_socket(self, sock: socket.socket) -> None:
        """Serve the same endpoints on ``sock`` too (a socket bound elsewhere: the sandbox's)."""
        if self._app is None or self._stop.is_set():
            sock.close()
            return
        await self._listen(sock)

    async def _close_http(self) -> None:
        servers, self._http = self._http, []
        for server, _task in servers:
            server.should_exit = True
        for _server, task in servers:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 5.0)  # cancelled when it takes longer

    async def aclose(self) -> None:
        self._stop.set()
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), 10.0)
            except (TimeoutError, asyncio.CancelledError):
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner
            except Exception:
                pass

    # -- the endpoint of one server -----------------------------------------------------------

    def _front(self, backend: _Backend) -> Server[Any]:
        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            client = backend.client
            if client is None or backend.gone is not None:
                raise _gone_error(backend)
            cursor = params.cursor if params is not None else None
            try:
                async with asyncio.timeout(backend.config.timeout_seconds):
                    return await client.list_tools(cursor=cursor)
            except Exception as exc:
                backend.gone = backend.gone or _text(exc)
                raise _gone_error(backend) from exc

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await self.call(backend.config.name, params.name, dict(params.arguments or {}))

        return Server(f"baton-{backend.config.name}", on_list_tools=list_tools, on_call_tool=call_tool)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One ``tools/call`` of the agent: logged, decided, made (or not), logged."""
        backend = self._backends[server]
        call = McpCall(server, tool, f"mcp_{uuid.uuid4().hex[:20]}", arguments)
        self._note(
            "mcp_called", {"server": server, "tool": tool, "tool_call_id": call.tool_call_id, "input": arguments}
        )
        verdict = await self._decide(server, tool, arguments, call.tool_call_id)
        if verdict.behavior != "allow":
            message = verdict.message or f"mcp__{server}__{tool} is denied ({verdict.reason})"
            self._finished(call, message, is_error=True, denied=True, reason=verdict.reason)
            return _error_result(message)
        result = await self._made(backend, call)
        self._finished(call, _output(result), is_error=bool(result.is_error), denied=False, reason=verdict.reason)
        return result

    async def _made(self, backend: _Backend, call: McpCall) -> types.CallToolResult:
        client, config = backend.client, backend.config
        if client is None or backend.gone is not None:
            return _error_result(f"the MCP server {config.name} is not running ({backend.gone})")
        try:
            async with asyncio.timeout(config.timeout_seconds):
                return await client.call_tool(call.tool, call.input)
        except TimeoutError:
            return _error_result(f"the MCP server {config.name} did not answer in {config.timeout_seconds:g} s")
        except Exception as exc:
            if not _is_tool_error(exc):
                backend.gone = _text(exc)
            return _error_result(f"the MCP server {config.name} failed: {_text(exc)}")

    def _finished(self, call: McpCall, output: str, *, is_error: bool, denied: bool, reason: str) -> None:
        self._note(
            "mcp_finished",
            {
                "server": call.server,
                "tool": call.tool,
                "tool_call_id": call.tool_call_id,
                "input": call.input,
                "output": _truncated(output),
                "is_error": is_error,
                "denied": denied,
                "reason": reason,
            },
        )


_LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
)


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _gone_error(backend: _Backend) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(types.INTERNAL_ERROR, f"the MCP server {backend.config.name} is not running ({backend.gone})")


def _is_tool_error(exc: Exception) -> bool:
    """An error answer of a server that still runs (a JSON-RPC error), not a broken connection."""
    from mcp.shared.exceptions import MCPError

    return isinstance(exc, MCPError) and getattr(getattr(exc, "error", None), "code", 0) not in (
        types.CONNECTION_CLOSED,
        types.INTERNAL_ERROR,
    )


def _output(result: types.CallToolResult) -> str:
    return "".join(_block_text(block) for block in result.content)


def _block_text(block: Any) -> str:
    text = getattr(block, "text", None)
    return text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]"


def _truncated(text: str) -> str:
    data = text.encode()
    if len(data) <= OUTPUT_LIMIT:
        return text
    half = OUTPUT_LIMIT // 2
    omitted = len(data) - 2 * half
    head = data[:half].decode(errors="ignore")
    tail = data[-half:].decode(errors="ignore")
    return f"{head}… [{omitted} bytes omitted] …{tail}"


def _text(exc: BaseException) -> str:
    for inner in _leaves(exc):
        return f"{type(inner).__name__}: {inner}"[:500]
    return type(exc).__name__


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
