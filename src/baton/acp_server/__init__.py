"""baton as an ACP agent (``baton acp``): a front end on the Python API, like the CLI and the server."""

from __future__ import annotations

from baton.acp_server._agent import AcpServerOptions, BatonAcpAgent
from baton.acp_server._stdio import serve_stdio

__all__ = ["AcpServerOptions", "BatonAcpAgent", "serve_stdio"]
