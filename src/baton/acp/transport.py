"""The ACP SDK's transport, behind baton's own name: the one module that imports ``acp._transport``.

``agent-client-protocol`` 0.12 (pinned ``>=0.12.1,<0.13`` in pyproject.toml) exports no
public name for its ``Transport`` protocol or for the in-memory pair the in-process Claude
adapter is linked through, so baton reaches into its private ``acp._transport`` here, and every
other module imports these names from ``baton.acp.transport``. A new SDK version that moves
them breaks this module only.
"""

from __future__ import annotations

from acp._transport import Transport, memory_transport_pair

__all__ = ["Transport", "memory_transport_pair"]
