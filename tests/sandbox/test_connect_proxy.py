"""The allow-list proxy with real clients (httpx, curl) and servers on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from tests.sandbox._upstream import Upstream

from baton.errors import UsageError
from baton.sandbox import AllowList, ConnectProxy, NetDecision
from baton.testing import CertificateAuthority


@contextlib.asynccontextmanager
async def connect_proxy(*allowed: str) -> AsyncIterator[tuple[ConnectProxy, list[NetDecision], str]]:
    decisions: list[NetDecision] = []
    async with ConnectProxy(AllowList.parse(allowed), report=decisions.append, tcp=("127.0.0.1", 0)) as proxy:
        host, port = proxy.tcp_address
        yield proxy, decisions, f"http://{host}:{port}"


async def raw(proxy: ConnectProxy, request: bytes) -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_connection(*proxy.tcp_address)
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def authority() -> CertificateAuthority:
    return CertificateAuthority.create()


async def test_an_allowed_https_host_is_reached_through_a_tunnel(authority: CertificateAuthority) -> None:
    async with Upstream(ssl_context=authority.server_context()) as upstream:
        async with connect_proxy(f"127.0.0.1:{upstream.port}") as (_, decisions, proxy_url):
            verify = ssl.create_default_context(cadata=authority.pem.decode())
            async with httpx.AsyncClient(proxy=proxy_url, verify=verify) as client:
                answer = await client.get(f"{upstream.url}/simple/")
        assert answer.json() == {"ok": True}
        assert upstream.seen[0].target == "/simple/"
        assert decisions == [
            NetDecision("127.0.0.1", upstream.port, True, f"allowed by --allow-net 127.0.0.1:{upstream.port}")
        ]


async def test_an_allowed_plain_http_host_is_reached_with_an_absolute_url() -> None:
    async with Upstream() as upstream, connect_proxy("127.0.0.1") as (_, decisions, proxy_url):
        async with httpx.AsyncClient(proxy=proxy_url) as client:
            answer = await client.post(f"{upstream.url}/upload?x=1", content=b"a" * 100_000)
        assert answer.json() == {"ok": True} and answer.headers["connection"] == "close"
        (seen,) = upstream.seen
        assert (seen.target, seen.header("host")) == ("/upload?x=1", f"127.0.0.1:{upstream.port}")
        assert seen.body == b"a" * 100_000
        assert seen.header("proxy-connection") is None and seen.header("connection") == "close"
        assert [d.allowed for d in decisions] == [True]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_curl_with_https_proxy_in_its_environment_reaches_an_allowed_host(
    authority: CertificateAuthority, tmp_path: Path
) -> None:
    ca = authority.write_pem(tmp_path / "ca.pem")
    async with Upstream(ssl_context=authority.server_context()) as upstream:  # noqa: SIM117 - the port is needed
        async with connect_proxy(f"127.0.0.1:{upstream.port}") as (_, decisions, proxy_url):
            env = {"PATH": os.environ["PATH"], "HTTPS_PROXY": proxy_url}
            allowed = await asyncio.create_subprocess_exec(
                "curl", "-sS", "--cacert", str(ca), f"{upstream.url}/ok", env=env, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await asyncio.wait_for(allowed.communicate(), 30)
            refused = await asyncio.create_subprocess_exec(
                "curl", "-sS", "--cacert", str(ca), f"https://127.0.0.1:{free_port()}/", env=env,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(refused.communicate(), 30)
    assert (allowed.returncode, json.loads(out)) == (0, {"ok": True})
    assert refused.returncode != 0 and b"403" in err
    assert [d.allowed for d in decisions] == [True, False]


async def test_a_host_not_on_the_list_is_refused_with_403_and_reported() -> None:
    async with Upstream() as upstream, connect_proxy("pypi.org", f"127.0.0.1:{free_port()}") as (proxy, decisions, _):
        port = upstream.port
        status, body = await raw(proxy, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n".encode())
        assert status == 403
        assert body["error"] == {
            "type": "invalid_request_error",
            "code": "net_not_allowed",
            "message": f"127.0.0.1:{upstream.port} is not on the allow-list (--allow-net)",
        }
        status, _ = await raw(proxy, f"GET http://localhost:{upstream.port}/ HTTP/1.1\r\n\r\n".encode())
        assert status == 403
        assert upstream.connections == 0
    assert [(d.host, d.port, d.allowed) for d in decisions] == [
        ("127.0.0.1", port, False),
        ("localhost", port, False),
    ]


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NONSENSE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",  # origin-form: a server's request, not a proxy's
        b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",  # no port
        b"CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n",
        b"CONNECT bad_host!:443 HTTP/1.1\r\n\r\n",
        b"GET https://127.0.0.1/ HTTP/1.1\r\n\r\n",
        b"GET http://user:pw@127.0.0.1/ HTTP/1.1\r\n\r\n",
        b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nbroken\r\n\r\n",
    ],
)
async def test_malformed_requests_are_refused_cleanly_and_reported(request_bytes: bytes) -> None:
    async with connect_proxy("127.0.0.1") as (proxy, decisions, _):
        status, body = await raw(proxy, request_bytes)
    assert status == 400
    assert isinstance(body["error"], dict) and body["error"]["code"] == "request_invalid"
    assert [(d.host, d.port, d.allowed) for d in decisions] == [(None, None, False)]


async def test_an_allowed_host_that_cannot_be_reached_is_a_502() -> None:
    port = free_port()
    async with connect_proxy(f"127.0.0.1:{port}") as (proxy, decisions, _):
        status, body = await raw(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert status == 502
    assert isinstance(body["error"], dict) and body["error"]["code"] == "upstream_unreachable"
    assert [d.allowed for d in decisions] == [True]


async def test_a_large_transfer_comes_through_whole_both_ways() -> None:
    size = 48 << 20

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    blob = os.urandom(1 << 20)
    async with server, connect_proxy(f"127.0.0.1:{port}") as (proxy, _, _):
        reader, writer = await asyncio.open_connection(*proxy.tcp_address)
        writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection Established\r\n\r\n"

        async def send() -> str:
            digest = hashlib.sha256()
            for index in range(size // len(blob)):
                piece = blob[index:] + blob[:index]
                digest.update(piece)
                writer.write(piece)
                await writer.drain()
            writer.write_eof()  # the half-close reaches the echo server, whose close comes back
            return digest.hexdigest()

        async def receive() -> tuple[int, str]:
            digest, count = hashlib.sha256(), 0
            while data := await reader.read(1 << 18):
                digest.update(data)
                count += len(data)
            return count, digest.hexdigest()

        sent, (count, received) = await asyncio.wait_for(asyncio.gather(send(), receive()), 60)
        writer.close()
    assert (count, received) == (size, sent)


def test_allow_list_entries() -> None:
    allow = AllowList.parse(["PyPI.org.", "*.pythonhosted.org:443", "127.0.0.1:8080", "[::1]:9000", "::2"])
    assert [str(rule) for rule in allow.rules] == [
        "pypi.org",
        "*.pythonhosted.org:443",
        "127.0.0.1:8080",
        "[::1]:9000",
        "[::2]",
    ]
    cases = {
        ("pypi.org", 443): True,
        ("PYPI.ORG.", 8443): True,  # no port: every port
        ("evil-pypi.org", 443): False,
        ("pypi.org.evil.com", 443): False,
        ("files.pythonhosted.org", 443): True,
        ("pythonhosted.org", 443): False,  # a wildcard is for names under it
        ("files.pythonhosted.org", 80): False,
        ("127.0.0.1", 8080): True,
        ("127.0.0.1", 8081): False,
        ("::1", 9000): True,
        ("0:0:0:0:0:0:0:1", 9000): True,  # one address, however written
        ("::2", 1): True,
    }
    assert {target: allow.decide(*target).allowed for target in cases} == cases
    assert AllowList().decide("pypi.org", 443).reason == "pypi.org:443 is not on the allow-list (--allow-net)"


@pytest.mark.parametrize("entry", ["", "pypi.org:0", "pypi.org:http", "*.127.0.0.1", "a b", "[::1", "host:1:2x", "..a"])
def test_a_bad_allow_list_entry_is_a_clear_error(entry: str) -> None:
    with pytest.raises(UsageError) as caught:
        AllowList.parse([entry])
    assert caught.value.code == "invalid_argument" and "--allow-net" in caught.value.message


def test_a_decision_is_logged_as_host_port_allowed_reason() -> None:
    decision = AllowList.parse(["pypi.org:443"]).decide("pypi.org", 443)
    reason = "allowed by --allow-net pypi.org:443"
    assert decision.to_dict() == {"host": "pypi.org", "port": 443, "allowed": True, "reason": reason}
