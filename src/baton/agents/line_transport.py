"""ACP over a child's stdio, line by line, with nothing dropped.

The ACP SDK's own stdio transport skips lines that are not JSON. Baton's log must hold every
line an agent writes, so this transport reads the child's stdout itself: each line that is a
JSON object is handed on as the message it is; any other line (garbage, a truncated object, a
JSON value that is not an object) becomes a synthetic notification

    {"jsonrpc": "2.0", "method": "_baton/malformed_line", "params": {"line": …, "stream": "stdout"}}

and the child's stderr lines become ``_baton/console`` notifications (``{"level": "stderr",
"message": …}``), so the tapping transport logs them, in arrival order, as ``from_agent``
entries (adapters never write storage; docs/internals.md). The connection routes them to
the host's ``ext_notification``, which ignores them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from typing import Any

from baton.acp.wire import decode_json

__all__ = ["CONSOLE_LINE_LIMIT", "MALFORMED_LINE_LIMIT", "LineTransport"]

MALFORMED_LINE_LIMIT = 64 * 1024  # characters of a malformed line kept in its entry
CONSOLE_LINE_LIMIT = 8 * 1024  # characters of one stderr line kept in its entry
_STREAM_LIMIT = 64 * 1024 * 1024  # longest stdout line read (a whole file in fs/write_text_file)
_STDERR_TAIL = 20  # stderr lines kept for the report of an agent that exited
_STDERR_GRACE = 1.0  # seconds stderr may stay open after stdout ended (a tool holding it)
_STDOUT_END = object()
_STDERR_END = object()


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def malformed_line(text: str, stream: str = "stdout") -> dict[str, Any]:
    return _notification("_baton/malformed_line", {"line": text[:MALFORMED_LINE_LIMIT], "stream": stream})


class LineTransport:
    """The host's end of ACP over a child's stdin/stdout (and its stderr, as console lines)."""

    def __init__(
        self,
        stdout: asyncio.StreamReader,
        stdin: asyncio.StreamWriter,
        stderr: asyncio.StreamReader | None = None,
        *,
        console_limit: int = 2000,
    ) -> None:
        self._stdin = stdin
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._console_budget = console_limit  # console entries per run: stderr can be endless
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        self._write_lock = asyncio.Lock()
        self._closed = False
        self._stdout_open = True
        self._stderr_open = stderr is not None
        self._readers = [asyncio.create_task(self._read_stdout(stdout), name="baton-agent-stdout")]
        if stderr is not None:
            self._readers.append(asyncio.create_task(self._read_stderr(stderr), name="baton-agent-stderr"))

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            self._stdin.write(data)
            await self._stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None once stdout has ended and stderr too (or after a grace)."""
        while self._stdout_open or self._stderr_open:
            if self._stdout_open:
                item = await self._queue.get()
            else:
                try:
                    item = await asyncio.wait_for(self._queue.get(), _STDERR_GRACE)
                except TimeoutError:
                    self._stderr_open = False
                    break
            if item is _STDOUT_END:
                self._stdout_open = False
            elif item is _STDERR_END:
                self._stderr_open = False
            else:
                message: dict[str, Any] = item
                return message
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._stdin.close()
        for reader in self._readers:
            reader.cancel()
        for reader in self._readers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        self._queue.put_nowait(_STDOUT_END)  # wake a receive() waiting on the queue
        self._queue.put_nowait(_STDERR_END)

    async def _read_stdout(self, stdout: asyncio.StreamReader) -> None:
        put = self._queue.put_nowait
        loads = decode_json
        try:
            while True:
                try:
                    raw = await stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    raw = exc.partial  # the last line had no newline (the child died mid-line)
                    if raw.strip():
                        put(_parse(raw, loads))
                    return
                except asyncio.LimitOverrunError as exc:
                    chunk = await stdout.readexactly(exc.consumed)
                    put(malformed_line(chunk.decode("utf-8", "replace") + " … [line too long]"))
                    continue
                if raw.strip():
                    put(_parse(raw, loads))
        finally:
            put(_STDOUT_END)

    async def _read_stderr(self, stderr: asyncio.StreamReader) -> None:
        put = self._queue.put_nowait
        try:
            async for raw in stderr:
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not text.strip():
                    continue
                self.stderr_tail.append(text[:CONSOLE_LINE_LIMIT])
                if self._console_budget > 0:
                    self._console_budget -= 1
                    put(_notification("_baton/console", {"level": "stderr", "message": text[:CONSOLE_LINE_LIMIT]}))
        except (ValueError, asyncio.LimitOverrunError):
            pass  # a stderr line beyond the stream limit: the rest of stderr is not worth the log
        finally:
            put(_STDERR_END)


def _parse(raw: bytes, loads: Any) -> dict[str, Any]:
    try:
        message = loads(raw)
    except ValueError:
        message = None
    if type(message) is dict:
        return message
    return malformed_line(raw.decode("utf-8", "replace").rstrip("\r\n"))


def stream_limit() -> int:
    """The ``limit`` to give ``asyncio.create_subprocess_exec`` for the child's stdout."""
    return _STREAM_LIMIT
