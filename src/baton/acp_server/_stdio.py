"""Serving :class:`BatonAcpAgent` on this process's stdin/stdout, with stdout kept for ACP alone.

The connection reads the editor line by line (:class:`~baton.agents.line_transport.LineTransport`:
a line that is not JSON reaches the agent as ``_baton/malformed_line``, which it ignores) and
keeps its requests for ``$/cancel_request`` (:class:`~baton.acp.cancel.CancellableTransport`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, cast

from acp import run_agent
from acp.stdio import _WritePipeProtocol

from baton.acp.cancel import CancellableTransport
from baton.acp_server._agent import AcpServerOptions, BatonAcpAgent
from baton.agents.line_transport import LineTransport
from baton.config import Settings

__all__ = ["serve_stdio"]

_LINE_LIMIT = 64 * 1024 * 1024


async def serve_stdio(settings: Settings, options: AcpServerOptions) -> None:
    """Serve until the editor closes stdin. Anything else written to fd 1 goes to stderr."""
    from baton.runs import Baton

    acp_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # prints, warnings and child processes that inherit fd 1 land on stderr
    sys.stdout = sys.stderr
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    protocol = _WritePipeProtocol()
    pipe, _ = await loop.connect_write_pipe(lambda: protocol, acp_out)
    writer = asyncio.StreamWriter(pipe, protocol, None, loop)
    transport = CancellableTransport(LineTransport(reader, writer))
    async with Baton(settings) as baton:
        agent = BatonAcpAgent(baton, options)
        agent.editor_transport = transport
        try:  # session/resume is still part of the protocol's unstable methods in the acp package
            await run_agent(cast(Any, agent), transport, use_unstable_protocol=True)
        finally:
            await agent.aclose()  # the editor left: its sessions' runs are closed
