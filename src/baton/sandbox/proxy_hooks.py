"""What the model proxy tells the rest of baton: one :class:`ModelExchange` per request.

Record/replay and observability build on :class:`ModelObserver`: the proxy calls
``observer.exchange(...)`` once per request when it is over (answered, failed, or abandoned by
the client), with the request as the agent sent it — secrets redacted — and the response's
status and body pieces as they arrived, each with its time. The observer is called on the
proxy's event loop and must return quickly (hand slow work to a task or a queue of its own);
an observer that raises is logged and the proxy goes on.

:class:`ModelSource` is where a run's model answers came from, for the run's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["REDACTED", "ExchangeOutcome", "ModelChunk", "ModelExchange", "ModelObserver", "ModelSource"]

REDACTED = "[redacted]"

# completed: the whole response reached the agent; upstream_error: the endpoint failed (before the
# head: the agent got a 502; after: its connection was cut); client_gone: the agent went away
# and the upstream request was abandoned; refused: the proxy answered it (bad request, wrong key).
ExchangeOutcome = Literal["completed", "upstream_error", "client_gone", "refused"]


@dataclass(frozen=True)
class ModelChunk:
    """A piece of the response body as it came from upstream (a chunk of an SSE stream)."""

    at: float  # seconds since the request reached the proxy
    data: bytes


@dataclass(frozen=True)
class ModelExchange:
    method: str
    path: str  # as the agent sent it, query included (a ``key=`` redacted)
    headers: tuple[tuple[str, str], ...]  # as the agent sent them; credentials redacted
    body: bytes
    started: float  # time.time() when the request reached the proxy
    outcome: ExchangeOutcome
    status: int | None = None  # the status the agent got; None when it got none
    response_headers: tuple[tuple[str, str], ...] = ()
    chunks: tuple[ModelChunk, ...] = ()
    error_code: str | None = None  # the baton error code, for any outcome but completed
    duration: float = 0.0  # seconds until the exchange was over

    @property
    def response_body(self) -> bytes:
        return b"".join(chunk.data for chunk in self.chunks)


class ModelObserver(Protocol):
    def exchange(self, exchange: ModelExchange) -> None:
        """One request through the proxy, over; called on the proxy's loop (return quickly)."""


@dataclass(frozen=True)
class ModelSource:
    """Where a run's model answers come from: a live endpoint, a scripted scenario, a cassette.

    Logged once per run (``to_dict``); each field is None when it does not apply.
    """

    endpoint: str | None = None  # the upstream URL the proxy forwards to (no credentials in it)
    scenario: str | None = None  # the scripted scenario answering (``--scenario``)
    cassette: str | None = None  # the recording replayed or recorded (record/replay)

    def to_dict(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "scenario": self.scenario, "cassette": self.cassette}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSource:
        return cls(
            endpoint=_optional_str(data.get("endpoint")),
            scenario=_optional_str(data.get("scenario")),
            cassette=_optional_str(data.get("cassette")),
        )


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)
