"""The tapping transport: every ACP message, both directions, in wire order, into the log.

Connection observers in the ACP SDK can see messages out of wire order and see outgoing
messages after sending, so baton logs inside the transport instead: a message is appended
(and gets its ``seq``) before it is handed on, and an incoming one before the connection
sees it. The tap also keeps the connection's :class:`~baton.acp.cancel.RequestCancels`: an
agent's ``$/cancel_request`` is logged, then handled here (:mod:`baton.acp.cancel`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton.acp.cancel import RequestCancels
from baton.acp.transport import Transport
from baton.events.entry import Direction, EntrySink

__all__ = ["EntrySink", "TappingTransport"]  # EntrySink: baton.events.entry's, named here too


class TappingTransport:
    """Wraps the host's end of a transport; logs with ``method`` resolved for responses."""

    def __init__(
        self,
        inner: Transport,
        sink: EntrySink,
        run_id: str,
        *,
        stamp: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._inner = inner
        self._stamp = stamp  # adds to an outgoing message before it is logged (``_meta.traceparent``)
        self._sink = sink
        self._run_id = run_id
        self._sent_requests: dict[Any, str] = {}
        self._received_requests: dict[Any, str] = {}
        self.last_seq = 0
        self.requests = RequestCancels()  # the agent's requests in flight, for ``$/cancel_request``

    def _method_of(self, message: dict[str, Any], answered: dict[Any, str]) -> str | None:
        method = message.get("method")
        if isinstance(method, str):
            return method
        if "id" in message:
            return answered.pop(message["id"], None)
        return None

    def _log(self, direction: Direction, method: str | None, message: dict[str, Any]) -> None:
        self.last_seq = self._sink.append(self._run_id, direction, method, message)

    async def send(self, message: dict[str, Any]) -> None:
        method = self._method_of(message, self._received_requests)
        if "method" in message and "id" in message:
            self._sent_requests[message["id"]] = str(message["method"])
            if self._stamp is not None:
                self._stamp(message)
        self.requests.sending(message)
        self._log("to_agent", method, message)
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._inner.receive()
            if message is None:
                return None
            method = self._method_of(message, self._sent_requests)
            if "method" in message and "id" in message:
                self._received_requests[message["id"]] = str(message["method"])
            self._log("from_agent", method, message)
            # A slow disk slows the agent down instead of growing memory without bound.
            await self._sink.drain()
            if self.requests.received(message):  # not a ``$/cancel_request``: the connection gets it
                return message

    async def close(self) -> None:
        await self._inner.close()
