"""Where agents run: contained in a PID namespace of their own, and sandboxed (docs/sandbox.md).

- :mod:`baton.sandbox.bwrap`: whether bubblewrap can make namespaces here (probed once).
- :mod:`baton.sandbox.plan`: a run's :class:`~baton.sandbox.plan.SandboxPlan` (what is
  writable, read-only, invisible) and the command line that starts an agent inside it.
- The sandbox network (``docs/sandbox-network.md``): the model proxy and the allow-list
  (CONNECT) proxy. A sandboxed agent reaches its model only through
:class:`ModelProxy` (which holds the real key) and other hosts only through
:class:`ConnectProxy` (which lets through the hosts of an :class:`AllowList`).
"""

from __future__ import annotations

from baton.sandbox.connect_proxy import ConnectProxy, NetReporter
from baton.sandbox.model_proxy import ModelProxy, ModelUpstream, new_placeholder_key
from baton.sandbox.proxy_allow import AllowList, NetDecision, NetRule
from baton.sandbox.proxy_hooks import ExchangeOutcome, ModelChunk, ModelExchange, ModelObserver, ModelSource

__all__ = [
    "AllowList",
    "ConnectProxy",
    "ExchangeOutcome",
    "ModelChunk",
    "ModelExchange",
    "ModelObserver",
    "ModelProxy",
    "ModelSource",
    "ModelUpstream",
    "NetDecision",
    "NetReporter",
    "NetRule",
    "new_placeholder_key",
]
