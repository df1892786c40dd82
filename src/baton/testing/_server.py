"""The scripted model server: real HTTP on loopback, in a daemon thread.

Stdlib ``ThreadingHTTPServer``, so it serves sync and async tests alike. HTTP/1.1 with
keep-alive: JSON answers carry ``Content-Length``, streams use chunked encoding. With an
``ssl_context`` it speaks HTTPS (``CertificateAuthority.server_context()``), each connection's
handshake in that connection's thread.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from baton.cassettes import Mismatch
from baton.cassettes.rewrite import replay_events
from baton.errors import UsageError
from baton.testing import _anthropic, _chat, _gemini, _responses
from baton.testing._replay import CassettePlayer, ReplayTiming
from baton.testing._scenario import Failure, Scenario, TextBlock, load_scenario
from baton.testing._selection import (
    SIDE_REPLY_TEXT,
    Conversation,
    Reply,
    choose_step,
    plan_reply,
    scenario_marker,
)

__all__ = ["RecordedRequest", "ScriptedModelServer"]

_SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})
_REDACTED = "[redacted]"
_IDLE_TIMEOUT = 600.0  # seconds a keep-alive connection may idle before its thread gives up
_POLL_SECONDS = 1.0  # serve_forever's select timeout (stop() wakes it at once)
_ErrorBody = Callable[[Failure], tuple[int, dict[str, Any]]]  # an API's (status, body) for a scripted failure


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it; secret headers are masked, names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None  # the JSON body, None when there was none
    scenario: str | None = None  # the scenario that answered; None for side requests
    step: int | None = None  # the step that answered; None for final texts and side replies


class ScriptedModelServer:
    """Answers model requests from a scenario: ``with ScriptedModelServer("plain") as srv: ...``."""

    def __init__(
        self,
        scenario: str | Scenario,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        ssl_context: ssl.SSLContext | None = None,
        player: CassettePlayer | None = None,
    ) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        self.player = player  # replaying a cassette: POSTs are answered from it (baton.testing._replay)
        self._address = (host, port)
        self._ssl_context = ssl_context
        self._listener: _Listener | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._fired: dict[tuple[str, str, int], set[int]] = {}
        self._stopped = False

    @classmethod
    def replaying(
        cls, cassette: Path | str | CassettePlayer, *, timing: ReplayTiming = "fast", **kwargs: Any
    ) -> ScriptedModelServer:
        """A server that plays a cassette back (``timing`` real or fast) instead of a scenario."""
        player = cassette if isinstance(cassette, CassettePlayer) else CassettePlayer.load(cassette, timing=timing)
        return cls("plain", player=player, **kwargs)

    @property
    def base_url(self) -> str:
        if self._listener is None:
            raise RuntimeError("the model server is not started")
        host, port = self._listener.server_address[:2]
        return f"{'https' if self._ssl_context else 'http'}://{host!s}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` requests were recorded; ``TimeoutError`` otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= count, timeout):
                raise TimeoutError(f"{len(self._requests)} of {count} requests after {timeout} s")
            return list(self._requests)

    def start(self) -> Self:
        if self._listener is not None or self._stopped:
            raise RuntimeError("a model server starts once")
        self._listener = _Listener(self._address, self, self._ssl_context)
        self._thread = threading.Thread(
            target=self._listener.serve_forever, kwargs={"poll_interval": _POLL_SECONDS}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection; idempotent."""
        listener, self._listener, self._stopped = self._listener, None, True
        if listener is None:
            return
        # serve_forever looks at its stop flag when its select returns: a connection makes it
        # return at once, so it may wait long (idle, it costs nothing) and still stop at once.
        host, port = listener.server_address[:2]
        stopping = threading.Thread(target=listener.shutdown, daemon=True)
        stopping.start()
        while stopping.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection((str(host), int(port)), timeout=1).close()
            stopping.join(0.05)
        listener.close_connections()
        listener.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def _reply_to(self, conversation: Conversation) -> Reply:
        """The scenario's reply; side requests (no tools offered) never advance a scenario."""
        if not conversation.offers_tools:
            usage = self.scenario.usage_for(None)
            return Reply((TextBlock(SIDE_REPLY_TEXT),), "end_turn", usage)
        name = scenario_marker(conversation)
        scenario = self.scenario
        if name is not None and name != scenario.name:
            try:
                scenario = load_scenario(name)
            except UsageError as exc:
                return Reply((), "end_turn", {}, failure=Failure(400, str(exc)))
        key = (scenario.name, conversation.prompt, conversation.result_count)
        with self._lock:
            fired = self._fired.setdefault(key, set())
            index = choose_step(conversation, scenario, fired)
            if index is not None and scenario.steps[index].once:
                fired.add(index)
        return plan_reply(conversation, scenario, index)


def _error_body_for(path: str) -> _ErrorBody:
    if path == _responses.RESPONSES_PATH:
        return _responses.error_body
    if _gemini.is_gemini_path(path):
        return _gemini.error_body
    if path in _chat.CHAT_PATHS:
        return _chat.error_body
    return _anthropic.error_body


class _Listener(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], owner: ScriptedModelServer, ssl_context: ssl.SSLContext | None
    ) -> None:
        self.owner = owner
        self.ssl_context = ssl_context
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        if self.ssl_context is not None:  # the handshake happens on the first read, in the handler's thread
            connection = self.ssl_context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that goes away is ordinary here; anything else is reported as usual."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Wake threads idling on keep-alive connections, so stopping leaves nothing behind."""
        with self.connections_lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "baton-scripted-model"
    timeout = _IDLE_TIMEOUT
    server: _Listener

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the recorded requests are the log."""

    def do_HEAD(self) -> None:
        self._record(None)
        self._send_bytes(200, b"", "application/json", head=True)

    def do_GET(self) -> None:
        self._record(None)
        if urlsplit(self.path).path == "/":
            self._send_json(200, {"ok": True, "scenario": self.server.owner.scenario.name})
        else:
            self._send_failure(Failure(404))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        player = self.server.owner.player
        if player is not None and self._answer_replay(player, raw):
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._record(raw.decode("utf-8", "replace"))
            self._send_failure(Failure(400, "the body is not JSON"))
            return
        path = urlsplit(self.path).path
        if path == _anthropic.MESSAGES_PATH and isinstance(body, dict):
            self._answer_messages(body)
        elif path == _responses.RESPONSES_PATH and isinstance(body, dict):
            self._answer_responses(body)
        elif _gemini.is_gemini_path(path) and isinstance(body, dict):
            self._answer_gemini(body, path)
        elif path in _chat.CHAT_PATHS and isinstance(body, dict):
            self._answer_chat(body)
        elif path == f"{_anthropic.MESSAGES_PATH}/count_tokens":
            self._record(body)
            self._send_json(200, {"input_tokens": self.server.owner.scenario.usage["input_tokens"]})
        else:
            self._record(body)
            self._send_failure(Failure(404))

    def _answer_replay(self, player: CassettePlayer, raw: bytes) -> bool:
        """Answer from the cassette; False for a side request it does not hold (scripted instead)."""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        found = player.match(self.command, self.path, body)
        if isinstance(found, Mismatch):
            if player.is_lenient(found):
                return False
            self._record(body)
            _, error = _error_body_for(urlsplit(self.path).path)(Failure(400, found.message))
            self._send_bytes(400, json.dumps(error).encode(), "application/json", baton_error="replay_mismatch")
            return True
        self._record(body)
        content_type = found.response_headers.get("content-type", "application/json")
        if "text/event-stream" not in content_type:
            self._send_bytes(found.status, player.matcher.rewrite(found.response_body), content_type)
            return True
        events = replay_events(found.chunks, player.matcher.path_pairs())
        if player.timing == "fast":
            self._stream(iter([b"".join(event for _, event in events)]), status=found.status, content_type=content_type)
            return True
        started = time.monotonic()

        def paced() -> Iterator[bytes]:
            for at, event in events:
                time.sleep(max(0.0, started + at - time.monotonic()))
                yield event

        self._stream(paced(), status=found.status, content_type=content_type)
        return True

    def _scripted_reply(self, conversation: Conversation, body: dict[str, Any], error_body: _ErrorBody) -> Reply | None:
        """The scenario's reply, recorded, after its delay; None when it is a failure (then sent)."""
        reply = self.server.owner._reply_to(conversation)
        self._record(body, reply)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.failure is not None:
            self._send_failure(reply.failure, error_body)
            return None
        return reply

    def _answer_messages(self, body: dict[str, Any]) -> None:
        reply = self._scripted_reply(_anthropic.read_conversation(body), body, _anthropic.error_body)
        if reply is None:
            return
        reply = _anthropic.for_offered_tools(reply, body)
        model = str(body.get("model") or "claude-scripted")
        if not body.get("stream"):
            self._send_json(200, _anthropic.message_json(reply, model=model))
            return
        self._stream(_anthropic.sse_events(reply, model=model))

    def _answer_responses(self, body: dict[str, Any]) -> None:
        started = time.monotonic()
        reply = self._scripted_reply(_responses.read_conversation(body), body, _responses.error_body)
        if reply is not None and _responses.answers_a_tool_result(body):
            time.sleep(max(0.0, started + _responses.TOOL_RESULT_LATENCY - time.monotonic()))
        if reply is None:
            return
        if not body.get("stream"):
            items = _responses.response_items(reply, body)
            self._send_json(200, {"object": "response", "status": "completed", "output": items})
            return
        self._stream(_responses.sse_events(reply, body))

    def _answer_gemini(self, body: dict[str, Any], path: str) -> None:
        reply = self._scripted_reply(_gemini.read_conversation(body), body, _gemini.error_body)
        if reply is None:
            return
        reply = _gemini.for_offered_tools(reply, body)
        model = path.removeprefix(_gemini.MODELS_PREFIX).split(":", 1)[0]
        if path.endswith(":generateContent"):
            self._send_json(200, _gemini.response_json(reply, model))
            return
        self._stream(_gemini.sse_events(reply, model))

    def _answer_chat(self, body: dict[str, Any]) -> None:
        reply = self._scripted_reply(_chat.read_conversation(body), body, _chat.error_body)
        if reply is None:
            return
        if not body.get("stream"):
            self._send_json(200, _chat.response_json(reply, body))
            return
        self._stream(_chat.sse_events(reply, body))

    def _stream(
        self, events: Iterator[bytes], *, status: int = 200, content_type: str = "text/event-stream; charset=utf-8"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away mid-stream
            self.close_connection = True

    def _record(self, body: Any, reply: Reply | None = None) -> None:
        headers = {
            name.lower(): (_REDACTED if name.lower() in _SECRET_HEADERS else value)
            for name, value in self.headers.items()
        }
        scenario, step = (reply.scenario, reply.step) if reply else (None, None)
        self.server.owner._record(RecordedRequest(self.command, self.path, headers, body, scenario, step))

    def _send_failure(self, failure: Failure, error_body: _ErrorBody = _anthropic.error_body) -> None:
        if failure.drops_connection:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        status, body = error_body(failure)
        self._send_json(status, body)

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        self._send_bytes(status, json.dumps(body).encode(), "application/json")

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, *, head: bool = False, baton_error: str | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if baton_error is not None:
                self.send_header("X-Baton-Error", baton_error)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head:
                self.wfile.write(data)
        except OSError:
            self.close_connection = True
