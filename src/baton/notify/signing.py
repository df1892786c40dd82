"""How a webhook body is signed, and how a receiver checks it (docs/web.md "Webhooks").

Each POST carries ``X-Baton-Signature: sha256=<hex>``, HMAC-SHA256 keyed by the webhook's
secret over the **exact bytes of the body**, and ``X-Baton-Timestamp`` (Unix seconds), which
equals the body's own ``timestamp`` — so the time is covered by the signature. A receiver
checks the signature, then that the timestamp is recent (:data:`TOLERANCE_SECONDS`), and keeps
the ``id`` of what it handled to ignore a repeat (a delivery is sent at least once).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Final

__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TOLERANCE_SECONDS",
    "sign",
    "verify",
]

SIGNATURE_HEADER: Final = "X-Baton-Signature"
TIMESTAMP_HEADER: Final = "X-Baton-Timestamp"
EVENT_HEADER: Final = "X-Baton-Event"
DELIVERY_HEADER: Final = "X-Baton-Delivery"
TOLERANCE_SECONDS: Final = 300


def sign(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``body`` keyed by ``secret`` (UTF-8)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    body: bytes,
    signature: str | None,
    timestamp: str | None,
    *,
    now: float | None = None,
    tolerance: float = TOLERANCE_SECONDS,
) -> bool:
    """Whether ``body`` was signed with ``secret`` and sent within ``tolerance`` seconds of ``now``.

    ``signature`` and ``timestamp`` are the ``X-Baton-Signature`` and ``X-Baton-Timestamp``
    headers as received. The comparison takes the same time however much of it matches.
    """
    if not signature or not timestamp:
        return False
    if not hmac.compare_digest(sign(secret, body), signature):
        return False
    try:
        sent = int(timestamp)
        stamped = json.loads(body).get("timestamp")
    except (ValueError, AttributeError):
        return False
    if stamped != sent:  # the header must say what the signed body says
        return False
    return abs((time.time() if now is None else now) - sent) <= tolerance
