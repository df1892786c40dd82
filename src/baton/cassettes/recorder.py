"""Recording: a model proxy observer that writes every exchange to a cassette.

``CassetteRecorder`` is a :class:`~baton.sandbox.ModelObserver`: the proxy calls ``exchange()``
once per request when it is over. Only answered requests are kept (``outcome: completed``);
a request the proxy refused or the agent abandoned has nothing to replay. Each line is written
and flushed when its exchange ends (a crashed run leaves the exchanges before the crash).

Secrets never reach the file: the proxy already gives the credential headers as
``[redacted]``; every line then goes through the run's :class:`~baton.store.redact.Redactor`
(the real key, every secret baton registered, bearer tokens), and the credential headers are
masked again here for an observer fed by anything else.

``continue_file()`` makes a recorder append to the cassette an earlier execution of the same
run wrote (a resume records on): its header is kept, ``seq`` and ``at`` go on after its last
exchange, and this execution's workspace and agent home are written as the header's paths (a run
continuing an ended one has an agent home of its own), so the file reads as one recording.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import IO

from baton.cassettes.format import CassettePaths, exchange_record, header_record, load_cassette
from baton.sandbox.proxy_hooks import REDACTED, ModelExchange
from baton.store.redact import Redactor, encode_json

__all__ = ["CassetteRecorder"]

_SECRET_HEADERS = frozenset({"x-api-key", "x-goog-api-key", "authorization", "proxy-authorization", "cookie"})


class CassetteRecorder:
    """``ModelProxy(upstream, observer=CassetteRecorder(path, redactor=...))``; ``close()`` at the end."""

    def __init__(
        self,
        path: Path,
        *,
        redactor: Redactor,
        agent: str | None = None,
        endpoint: str | None = None,
        paths: CassettePaths | None = None,
    ) -> None:
        self.path = Path(path)
        self.paths = paths or CassettePaths()
        self._redactor = redactor
        self._agent = agent
        self._endpoint = endpoint
        self._start = time.time()
        self._seq = 0
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._closed = False
        self._continued: CassettePaths | None = None  # appending: the paths the file's header names

    @property
    def recorded(self) -> int:
        """How many exchanges were written."""
        return self._seq

    def exchange(self, exchange: ModelExchange) -> None:
        if exchange.outcome != "completed" or exchange.status is None:
            return
        with self._lock:
            if self._closed:
                return
            record = exchange_record(
                seq=self._seq,
                at=max(0.0, exchange.started - self._start),
                method=exchange.method,
                path=exchange.path,
                headers=_headers(exchange.headers),
                body=exchange.body,
                status=exchange.status,
                response_headers=_headers(exchange.response_headers),
                chunks=[(chunk.at, chunk.data) for chunk in exchange.chunks],
                duration=exchange.duration,
            )
            self._write(record)
            self._seq += 1

    def continue_file(self) -> CassetteRecorder:
        """Append to the cassette already at ``path`` (``cassette_invalid`` if it is not one); a
        missing file is written anew. Call it before the first exchange."""
        with self._lock:
            if self._file is not None or not self.path.exists():
                return self
            earlier = load_cassette(self.path)
            self._seq = max((e.seq for e in earlier.exchanges), default=-1) + 1
            ended = max((e.at + e.duration for e in earlier.exchanges), default=0.0)
            self._start = time.time() - ended - 0.001  # this execution's first request comes after
            self._continued = earlier.paths
        return self

    def open(self) -> CassetteRecorder:
        """Create the file and write its header (done by the first exchange otherwise)."""
        with self._lock:
            self._ensure_open()
        return self

    def close(self) -> None:
        """Write the header if no exchange did, and close the file; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._ensure_open()
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None

    def _ensure_open(self) -> IO[str]:
        if self._file is None and self._continued is not None:
            self._file = self.path.open("a", encoding="utf-8")
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")
            recorded_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._start))
            header = header_record(
                recorded_at=recorded_at, agent=self._agent, endpoint=self._endpoint, paths=self.paths
            )
            self._file.write(encode_json(header) + "\n")
            self._file.flush()
        return self._file

    def _write(self, record: dict[str, object]) -> None:
        file = self._ensure_open()
        text, _ = self._redactor.redact_json(record)
        if self._continued is not None:
            for mine, recorded in self.paths.pairs(self._continued):
                text = text.replace(json.dumps(mine)[1:-1], json.dumps(recorded)[1:-1])
        file.write(text + "\n")
        file.flush()


def _headers(pairs: tuple[tuple[str, str], ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in pairs:
        lower = name.lower()
        value = REDACTED if lower in _SECRET_HEADERS else value
        headers[lower] = f"{headers[lower]}, {value}" if lower in headers else value
    return headers
