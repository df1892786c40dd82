"""The model proxy against real endpoints on loopback: the scripted model server over HTTPS
with a throwaway CA, and scripted upstreams (tests/sandbox/_upstream.py) that answer at the
test's pace and record the real key."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from tests.sandbox._upstream import Seen, Upstream

from baton.sandbox import ModelExchange, ModelProxy, ModelSource, ModelUpstream
from baton.testing import CertificateAuthority, ScriptedModelServer

CANARY = "sk-ant-real-CANARY-7f3a9c"  # the real key: must reach the endpoint and nothing else
MESSAGES = {
    "model": "claude-scripted",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "Say hello"}],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
}


class Recorder:
    def __init__(self) -> None:
        self.exchanges: list[ModelExchange] = []
        self.arrived = asyncio.Event()

    def exchange(self, exchange: ModelExchange) -> None:
        self.exchanges.append(exchange)
        self.arrived.set()

    async def next(self) -> ModelExchange:
        await asyncio.wait_for(self.arrived.wait(), 10)
        return self.exchanges[-1]


@contextlib.asynccontextmanager
async def proxied(
    url: str, *, key: str = CANARY, ca_bundle: Path | None = None, observer: Recorder | None = None
) -> AsyncIterator[tuple[ModelProxy, httpx.AsyncClient]]:
    upstream = ModelUpstream(url, key, ca_bundle=ca_bundle)
    async with ModelProxy(upstream, tcp=("127.0.0.1", 0), observer=observer) as proxy:
        host, port = proxy.tcp_address
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=10) as client:
            yield proxy, client


async def raw_exchange(proxy: ModelProxy, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(*proxy.tcp_address)
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def events(text: str) -> list[str]:
    return [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")]


@pytest.fixture(scope="module")
def authority() -> CertificateAuthority:
    return CertificateAuthority.create()


@pytest.fixture
def ca_file(authority: CertificateAuthority, tmp_path: Path) -> Path:
    return authority.write_pem(tmp_path / "ca.pem")


async def test_a_stream_from_an_https_endpoint_comes_through_as_the_endpoint_sent_it(
    authority: CertificateAuthority, ca_file: Path
) -> None:
    recorder = Recorder()
    with ScriptedModelServer("plain", ssl_context=authority.server_context()) as server:
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca_file)) as direct:
            expected = (await direct.post(f"{server.base_url}/v1/messages", json=MESSAGES)).text
        async with proxied(server.base_url, ca_bundle=ca_file, observer=recorder) as (proxy, client):
            key = {"x-api-key": proxy.placeholder}
            answer = await client.post("/v1/messages?beta=true", json=MESSAGES, headers=key)
            exchange = await recorder.next()
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert events(answer.text) == events(expected) and "message_stop" in events(answer.text)
    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages?beta=true"]
    assert (exchange.method, exchange.path, exchange.status, exchange.outcome) == (
        "POST",
        "/v1/messages?beta=true",
        200,
        "completed",
    )
    assert json.loads(exchange.body) == MESSAGES
    assert dict(exchange.headers)["x-api-key"] == "[redacted]"
    assert exchange.response_body.decode() == answer.text
    times = [chunk.at for chunk in exchange.chunks]
    assert len(times) > 1 and times == sorted(times)


async def test_an_endpoint_whose_certificate_is_not_trusted_is_a_502_upstream_tls(
    authority: CertificateAuthority, tmp_path: Path
) -> None:
    other = CertificateAuthority.create("another CA").write_pem(tmp_path / "other.pem")
    with ScriptedModelServer("plain", ssl_context=authority.server_context()) as server:
        for bundle in (other, None):  # a bundle that does not hold the endpoint's CA; the system's store
            async with proxied(server.base_url, ca_bundle=bundle) as (proxy, client):
                answer = await client.post("/v1/messages", json=MESSAGES, headers={"x-api-key": proxy.placeholder})
            assert answer.status_code == 502
            assert answer.json()["error"]["code"] == "upstream_tls"
            assert "certificate verify failed" in answer.json()["error"]["message"]
    assert server.requests == []


@pytest.mark.parametrize(
    ("place", "sent", "forwarded"),
    [
        ("x-api-key", lambda key: {"x-api-key": key}, lambda seen: seen.header("x-api-key")),
        ("bearer", lambda key: {"authorization": f"Bearer {key}"}, lambda seen: seen.header("authorization")),
        ("x-goog-api-key", lambda key: {"x-goog-api-key": key}, lambda seen: seen.header("x-goog-api-key")),
    ],
)
async def test_the_placeholder_is_replaced_by_the_real_key_which_only_the_endpoint_sees(
    place: str, sent: object, forwarded: object
) -> None:
    recorder = Recorder()
    async with Upstream() as upstream, proxied(upstream.url, observer=recorder) as (proxy, client):
        assert callable(sent) and callable(forwarded)
        answer = await client.post("/v1/messages", json=MESSAGES, headers=sent(proxy.placeholder))
        exchange = await recorder.next()
    assert answer.status_code == 200
    (seen,) = upstream.seen
    assert forwarded(seen) == (f"Bearer {CANARY}" if place == "bearer" else CANARY)
    assert proxy.placeholder not in json.dumps(seen.headers)
    agent_side = repr(answer.headers) + answer.text + repr(exchange) + repr(proxy) + repr(proxy.upstream)
    assert CANARY not in agent_side


async def test_a_gemini_key_in_the_query_is_replaced_and_redacted() -> None:
    recorder = Recorder()
    async with Upstream() as upstream, proxied(upstream.url, observer=recorder) as (proxy, client):
        path = f"/v1beta/models/gemini:streamGenerateContent?alt=sse&key={proxy.placeholder}"
        answer = await client.post(path, json={"contents": []})
        exchange = await recorder.next()
    assert answer.status_code == 200
    assert upstream.seen[0].target == f"/v1beta/models/gemini:streamGenerateContent?alt=sse&key={CANARY}"
    assert exchange.path == "/v1beta/models/gemini:streamGenerateContent?alt=sse&key=[redacted]"


async def test_a_key_that_is_not_the_placeholder_is_refused_and_never_forwarded() -> None:
    recorder = Recorder()
    async with Upstream() as upstream, proxied(upstream.url, observer=recorder) as (_, client):
        for headers in ({"x-api-key": CANARY}, {"authorization": "Basic dXNlcjpwYXNz"}, {"x-goog-api-key": "nope"}):
            answer = await client.post("/v1/messages", json=MESSAGES, headers=headers)
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "token_invalid"
        assert {e.outcome for e in recorder.exchanges} == {"refused"}
    assert upstream.seen == []


async def test_a_request_without_a_key_is_forwarded_without_one_and_an_empty_real_key_adds_none() -> None:
    async with Upstream() as upstream:
        authority = f"127.0.0.1:{upstream.port}"
        async with proxied(upstream.url) as (proxy, client):
            assert (await client.get("/v1/models")).status_code == 200
        async with proxied(upstream.url, key="") as (proxy, client):
            assert (await client.post("/v1/messages", json={}, headers={"x-api-key": proxy.placeholder})).is_success
    assert [seen.header("x-api-key") for seen in upstream.seen] == [None, None]
    assert upstream.seen[0].header("host") == authority


async def test_the_stream_reaches_the_agent_piece_by_piece() -> None:
    release = asyncio.Event()

    async def two_events(seen: Seen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"e\r\nevent: first\n\n\r\n")
        await writer.drain()
        await release.wait()  # the second event is sent only once the agent has the first
        writer.write(b"d\r\nevent: last\n\n\r\n0\r\n\r\n")
        await writer.drain()

    async with Upstream(two_events) as upstream, proxied(upstream.url) as (proxy, client):
        key = {"x-api-key": proxy.placeholder}
        async with client.stream("POST", "/v1/messages", json=MESSAGES, headers=key) as streamed:
            pieces = streamed.aiter_raw()
            first = await asyncio.wait_for(anext(pieces), 10)
            release.set()
            rest = b"".join([piece async for piece in pieces])
    assert (first, rest) == (b"event: first\n\n", b"event: last\n\n")


@pytest.mark.parametrize("when", ["before the head", "mid-stream"])
async def test_the_agent_hanging_up_abandons_the_upstream_request(when: str) -> None:
    recorder = Recorder()

    async def slow(seen: Seen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if when == "mid-stream":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
            await writer.drain()
        await reader.read()  # until the proxy hangs up: the model would still be generating

    async with Upstream(slow) as upstream, proxied(upstream.url, observer=recorder) as (proxy, _):
        reader, writer = await asyncio.open_connection(*proxy.tcp_address)
        body = json.dumps(MESSAGES).encode()
        writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        if when == "mid-stream":
            assert b"first" in await asyncio.wait_for(reader.readuntil(b"first"), 10)
        else:
            await asyncio.wait_for(upstream.arrived.wait(), 10)
        writer.close()
        await upstream.wait_hung_up()
        exchange = await recorder.next()
    assert (exchange.outcome, exchange.error_code) == ("client_gone", "client_gone")


async def test_an_unreachable_endpoint_is_a_502_with_a_stable_code() -> None:
    with socket.socket() as placeholder:  # a port nothing listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    recorder = Recorder()
    async with proxied(f"http://127.0.0.1:{port}", observer=recorder) as (proxy, client):
        answer = await client.post("/v1/messages", json=MESSAGES, headers={"x-api-key": proxy.placeholder})
        exchange = await recorder.next()
    assert answer.status_code == 502
    assert answer.headers["x-baton-error"] == "upstream_unreachable"
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert error["error"]["code"] == "upstream_unreachable" and f"127.0.0.1:{port}" in error["error"]["message"]
    assert (exchange.outcome, exchange.status) == ("upstream_error", 502)


@pytest.mark.parametrize(
    "reply",
    [
        b"",
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",  # a head, then the connection closes
    ],
)
async def test_an_endpoint_that_answers_nothing_or_nonsense_is_a_502_upstream_failed(reply: bytes) -> None:
    async def bad(seen: Seen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(reply)
        await writer.drain()
        writer.close()

    async with Upstream(bad) as upstream, proxied(upstream.url) as (proxy, client):
        answer = await client.post("/v1/messages", json=MESSAGES, headers={"x-api-key": proxy.placeholder})
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "upstream_failed"


async def test_an_endpoint_that_breaks_off_mid_stream_cuts_the_agents_connection() -> None:
    recorder = Recorder()

    async def breaks_off(seen: Seen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        writer.transport.abort()

    async with Upstream(breaks_off) as upstream, proxied(upstream.url, observer=recorder) as (proxy, client):
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post("/v1/messages", json=MESSAGES, headers={"x-api-key": proxy.placeholder})
        exchange = await recorder.next()
    assert (exchange.outcome, exchange.error_code) == ("upstream_error", "upstream_failed")
    assert exchange.response_body == b"first"


async def test_connections_to_the_endpoint_are_kept_alive_and_a_stale_one_replaced() -> None:
    async with Upstream() as upstream, proxied(upstream.url) as (proxy, client):
        for _ in range(3):
            assert (await client.post("/v1/messages", json={}, headers={"x-api-key": proxy.placeholder})).is_success
    assert upstream.connections == 1

    async def then_close(seen: Seen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # an endpoint's idle timeout: the pooled connection is dead when reused

    async with Upstream(then_close) as upstream, proxied(upstream.url) as (proxy, client):
        for _ in range(3):
            answer = await client.post("/v1/messages", json={}, headers={"x-api-key": proxy.placeholder})
            assert answer.text == "ok"
            await asyncio.wait_for(upstream.hung_up.wait(), 10)
    assert upstream.connections == 3


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"NONSENSE\r\n\r\n", 400, "request_invalid"),
        (b"GET http://elsewhere.example/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request_invalid"),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400, "request_invalid"),
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "request_invalid"),
        (b"GET / HTTP/1.1\r\n folded: header\r\n\r\n", 400, "request_invalid"),
        (b"POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n", 413, "body_too_large"),
        (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", 431, "headers_too_large"),
    ],
)
async def test_malformed_requests_are_refused_with_a_code(request_bytes: bytes, status: int, code: str) -> None:
    async with Upstream() as upstream:  # noqa: SIM117 - the URL is needed
        async with ModelProxy(ModelUpstream(upstream.url, CANARY), tcp=("127.0.0.1", 0), body_limit=1000) as proxy:
            answered, body = await raw_exchange(proxy, request_bytes)
    assert (answered, json.loads(body)["error"]["code"]) == (status, code)
    assert upstream.seen == []


async def test_the_proxy_listens_on_a_unix_socket_only_its_owner_may_open(tmp_path: Path) -> None:
    path = tmp_path / "model.sock"
    async with Upstream() as upstream:
        async with ModelProxy(ModelUpstream(upstream.url, CANARY), unix_path=path) as proxy:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            transport = httpx.AsyncHTTPTransport(uds=str(path))
            async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as client:
                answer = await client.post("/v1/messages", json={}, headers={"x-api-key": proxy.placeholder})
            with pytest.raises(RuntimeError):
                _ = proxy.tcp_address
        assert answer.json() == {"ok": True} and upstream.seen[0].header("x-api-key") == CANARY
    assert not path.exists()


async def test_a_proxy_starts_once_and_closes_idempotently() -> None:
    proxy = ModelProxy(ModelUpstream("http://127.0.0.1:9", CANARY), tcp=("127.0.0.1", 0))
    async with proxy:
        with pytest.raises(RuntimeError):
            await proxy.start()
    await proxy.aclose()
    with pytest.raises(RuntimeError):
        await proxy.start()


async def test_an_observer_that_raises_does_not_break_the_proxy() -> None:
    class Broken:
        def exchange(self, exchange: ModelExchange) -> None:
            raise ValueError("observer bug")

    async with Upstream() as upstream:  # noqa: SIM117 - the URL is needed
        async with ModelProxy(ModelUpstream(upstream.url, CANARY), tcp=("127.0.0.1", 0), observer=Broken()) as proxy:
            host, port = proxy.tcp_address
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                for _ in range(2):
                    answer = await client.post("/v1/messages", json={}, headers={"x-api-key": proxy.placeholder})
                    assert answer.is_success


def test_bad_endpoint_configuration_is_a_clear_error(tmp_path: Path) -> None:
    from baton.errors import UsageError

    for url in ("ftp://host", "https://user:pw@host", "https://host/?key=1", "api.anthropic.com"):
        with pytest.raises(UsageError) as caught:
            ModelUpstream(url, CANARY)
        assert caught.value.code == "config_invalid"
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(UsageError) as caught:
        ModelProxy(ModelUpstream("https://host", CANARY, ca_bundle=tmp_path / "bad.pem"), tcp=("127.0.0.1", 0))
    assert caught.value.code == "config_invalid"
    assert CANARY not in repr(ModelUpstream("https://host", CANARY))


def test_a_model_source_round_trips_through_its_log_form() -> None:
    source = ModelSource(endpoint="https://api.anthropic.com", scenario=None, cassette="runs/x.cassette")
    assert ModelSource.from_dict(source.to_dict()) == source
    assert source.to_dict() == {
        "endpoint": "https://api.anthropic.com",
        "scenario": None,
        "cassette": "runs/x.cassette",
    }
