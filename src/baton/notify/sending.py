"""One POST of a webhook body (``urllib`` in a worker thread; no redirect is followed).

A 2xx answer is a delivery; anything else — another status, a redirect, a refused or timed-out
connection, a TLS failure — is a failed attempt, described in a short line for the row's
``last_error``.
"""

from __future__ import annotations

import asyncio
import http.client
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

__all__ = ["post"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx is an answer like any other non-2xx: the attempt failed


_OPENER = urllib.request.build_opener(_NoRedirect)


async def post(url: str, body: bytes, headers: Mapping[str, str], seconds: float) -> str | None:
    """POST ``body`` (giving up after ``seconds``); None when the receiver answered 2xx, else what went wrong."""
    return await asyncio.to_thread(_post, url, body, dict(headers), seconds)


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> str | None:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status = int(response.status)
            response.read(65536)
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(exc).__name__}: {reason}"[:500]
    return None if 200 <= status < 300 else f"HTTP {status}"
