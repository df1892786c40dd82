"""URL MCP servers: the test server run as a real streamable-HTTP server and as an SSE server on
127.0.0.1, configured with a header secret; a run's agent (``mcp_acp_agent.py``) calls each
through baton's proxy, which reaches the server with the header; the secret, echoed back by the
server, reaches the log redacted and never the agent's environment."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import run_to_end
from tests.mcp.conftest import SERVER
from tests.mcp.mcp_acp_agent import TOKEN
from tests.mcp.test_mcp_runs import mcp_events, said

from baton.config import McpServerConfig, Settings
from baton.runs import RunSpec

pytestmark = pytest.mark.timeout(120)

PATHS = {"http": "/mcp", "sse": "/sse"}


@pytest.fixture(params=["http", "sse"])
def url_server(request: pytest.FixtureRequest) -> Iterator[McpServerConfig]:
    """The test server listening on 127.0.0.1 (streamable HTTP or SSE), as baton's configuration
    names it (``u``, ``Authorization: Bearer TOKEN``)."""
    transport: str = request.param
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argument = "streamable-http" if transport == "http" else "sse"
    process = subprocess.Popen(
        [sys.executable, str(SERVER), argument, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while True:  # until it listens (the test's timeout bounds this)
            assert process.poll() is None, "the test MCP server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(0.05)
        yield McpServerConfig(
            name="u",
            transport=transport,
            url=f"http://127.0.0.1:{port}{PATHS[transport]}",
            headers={"Authorization": f"Bearer {TOKEN}"},
            source="config",
        )
    finally:
        process.terminate()
        process.wait(10)


async def test_a_url_server_is_called_through_the_proxy_with_its_header_redacted(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str], url_server: McpServerConfig
) -> None:
    settings = replace(mcp_settings, mcp_servers=(url_server,))
    prompt = 'servers\ncall u echo {"text": "over the url"}\ncall u header {}\ncall u crash {}\nenv'
    spec = RunSpec(
        prompt=prompt,
        repo=repo,
        agent=mcp_agent(),
        mcp=("u",),
        sandbox="none",
        allow=("mcp__u__echo", "mcp__u__header"),
        deny=("mcp__u__cr*",),
    )
    done = await run_to_end(settings, spec)
    assert done.outcome.status == "finished", done.outcome
    lines = said(done.entries)
    assert lines[0].startswith("servers: u http http://127.0.0.1:") and lines[0].endswith("/u/mcp"), lines[0]
    assert lines[1:] == [
        "u.echo error=false: echo: over the url",
        "u.header error=false: authorization=[REDACTED]",  # the server got the header; the log keeps none of it
        "u.crash error=true: mcp__u__crash is denied by the rule mcp__u__cr*.",
        "env: none",
    ]
    finished = [data for kind, data in mcp_events(done.entries) if kind == "mcp.finished"]
    assert [(f["tool"], f["denied"]) for f in finished] == [("echo", False), ("header", False), ("crash", True)]
    assert TOKEN not in json.dumps([entry["payload"] for entry in done.entries])
    [servers] = [e["payload"]["params"] for e in done.entries if e["method"] == "_baton/mcp_servers"]
    assert servers["servers"] == [
        {
            "name": "u",
            "transport": url_server.transport,
            "source": "config",
            "url": url_server.url,
            "headers": ["Authorization"],
        }
    ]
