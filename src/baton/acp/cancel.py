"""``$/cancel_request``: either side of an ACP connection cancels a request it sent.

The ``acp`` package (0.12) routes no ``$/`` method (it would log the notification as an unknown
method and drop it), so baton handles it at the transport:

- **Received.** :class:`RequestCancels` remembers every request the peer sends until it is
  answered, and makes it the *current request* (:func:`current_request`) of the handler the SDK
  starts for it: the SDK creates that handler's task right after the transport hands the
  message on, inside the receive loop, so the task starts with the context variable set here
  (``tests/acp/test_host_sessions.py`` and ``tests/acp_server/test_protocol_features.py`` hold
  the SDK to it). ``$/cancel_request {requestId}``
  sets that request's ``cancelled`` event and is not handed on. A handler that can wait long (a
  permission put to a human or a gate, a replay to an editor) watches the event and answers
  ``-32800`` (:func:`request_cancelled`), as the protocol asks; a quick one answers as usual.
- **Sent.** :func:`cancel_if_abandoned` awaits a request and, when the awaiting task is
  cancelled before the answer came, sends ``$/cancel_request`` for it (``baton acp`` does so
  for a permission it forwarded to the editor that nobody needs any more).

:class:`CancellableTransport` puts the bookkeeping on a transport that logs nothing (``baton
acp``'s connection to the editor); the tap (:mod:`baton.acp.tap`) does it for a run's agent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from acp import RequestError

from baton.acp.transport import Transport

__all__ = [
    "CANCEL_REQUEST",
    "REQUEST_CANCELLED",
    "CancellableTransport",
    "PendingRequest",
    "RequestCancels",
    "cancel_if_abandoned",
    "current_request",
    "request_cancelled",
    "until_cancelled",
]

CANCEL_REQUEST: Final = "$/cancel_request"
REQUEST_CANCELLED: Final = -32800  # the protocol's "Request cancelled"

T = TypeVar("T")


@dataclass
class PendingRequest:
    """A request the peer sent that is not answered yet."""

    request_id: Any
    method: str
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


_CURRENT: ContextVar[PendingRequest | None] = ContextVar("baton_acp_current_request", default=None)
_SENT: ContextVar[list[Any] | None] = ContextVar("baton_acp_sent_requests", default=None)


def current_request() -> PendingRequest | None:
    """The request the running handler answers (None outside a handler, or without bookkeeping)."""
    return _CURRENT.get()


def request_cancelled(method: str) -> RequestError:
    """The answer to a request its sender cancelled."""
    return RequestError(REQUEST_CANCELLED, "Request cancelled", {"method": method, "reason": "cancel_request"})


class RequestCancels:
    """One connection's requests in flight, for ``$/cancel_request`` in both directions."""

    def __init__(self) -> None:
        self._received: dict[Any, PendingRequest] = {}

    def received(self, message: dict[str, Any]) -> bool:
        """Note a message from the peer; False when it was a ``$/cancel_request`` (handled here)."""
        method = message.get("method")
        if method == CANCEL_REQUEST:
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            pending = self._received.get(request_id)
            if pending is not None:
                pending.cancelled.set()
            return False
        if isinstance(method, str) and "id" in message:
            pending = PendingRequest(message["id"], method)
            self._received[message["id"]] = pending
            _CURRENT.set(pending)  # the SDK's handler task for this message starts with it
        else:
            _CURRENT.set(None)
        return True

    def sending(self, message: dict[str, Any]) -> None:
        """Note a message to the peer: an answer retires its request; a request is remembered
        by the :func:`cancel_if_abandoned` around it, if any."""
        if "method" not in message:
            if "id" in message:
                self._received.pop(message["id"], None)
            return
        if "id" in message:
            sent = _SENT.get()
            if sent is not None:
                sent.append(message["id"])


async def cancel_if_abandoned(send: Callable[[dict[str, Any]], Awaitable[None]], request: Awaitable[T]) -> T:
    """Await ``request``; if this task is cancelled first, tell the peer with ``$/cancel_request``
    (for each request sent while awaiting it, through a transport with :class:`RequestCancels`)."""
    sent: list[Any] = []
    token = _SENT.set(sent)
    try:
        return await request
    except asyncio.CancelledError:
        for request_id in sent:
            with contextlib.suppress(Exception):
                await send({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": request_id}})
        raise
    finally:
        _SENT.reset(token)


async def until_cancelled(work: Awaitable[T], pending: PendingRequest | None) -> T:
    """``work``'s result, unless the peer cancels ``pending`` first: then ``work`` is cancelled
    and :func:`request_cancelled` raised."""
    if pending is None:
        return await work
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(pending.cancelled.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise request_cancelled(pending.method)


class CancellableTransport:
    """A transport with :class:`RequestCancels` bookkeeping (and nothing else)."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self.requests = RequestCancels()

    async def send(self, message: dict[str, Any]) -> None:
        self.requests.sending(message)
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._inner.receive()
            if message is None or self.requests.received(message):
                return message

    async def close(self) -> None:
        await self._inner.close()
