"""Request limits: the body size (413 ``body_too_large``)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.errors import RefusedError

__all__ = ["BodyLimit"]


class BodyLimit:
    """Refuses a body over ``max_bytes``: at once by its Content-Length, else as it streams in."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._refuse(send)
                    return
        seen = 0
        exceeded = False
        replaced = False

        async def limited() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    exceeded = True
                    raise self._error()
            return message

        async def answer(message: Message) -> None:
            # However the application handled the failed read, the client is told why.
            nonlocal replaced
            if replaced:
                return
            if exceeded and message["type"] == "http.response.start":
                replaced = True
                await self._refuse(send)
                return
            await send(message)

        await self.app(scope, limited, answer)

    def _error(self) -> RefusedError:
        return RefusedError("body_too_large", f"the request body is larger than {self.max_bytes} bytes")

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"error": self._error().to_dict()}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
