"""Webhooks: baton's events POSTed, signed, to the endpoints of ``[notify]`` (docs/web.md "Webhooks").

:class:`~baton.notify.notifier.Notifier` reads the store for ``gate.opened``,
``gate.resolved``, ``run.finished`` and ``run.failed`` and delivers them with retries
(``baton serve`` and ``baton worker`` run one); :func:`~baton.notify.signing.verify` is what a
Python receiver calls to check a delivery.
"""

from __future__ import annotations

from baton.notify.notifier import Notifier
from baton.notify.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
    verify,
)

__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Notifier",
    "sign",
    "verify",
]
