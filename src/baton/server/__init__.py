"""baton's HTTP server: REST for runs, server-sent events, JSON-RPC commands, JWT auth.

Thin on the :class:`~baton.runs.Baton` API (see ``docs/server.md``); ``baton serve`` runs it.
"""

from baton.server.app import create_app
from baton.server.auth import ALL_SCOPES, Principal
from baton.server.config import ServerConfig
from baton.server.errors import HTTP_STATUS, status_for
from baton.server.http import BatonServer

__all__ = ["ALL_SCOPES", "HTTP_STATUS", "BatonServer", "Principal", "ServerConfig", "create_app", "status_for"]
