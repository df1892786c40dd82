"""The real Claude Code (bundled in claude-agent-sdk) reaching an HTTPS model endpoint only
through the model proxy, with the placeholder for a key."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import claude_agent_sdk
import pytest

from baton.sandbox import ModelExchange, ModelProxy, ModelUpstream
from baton.testing import CertificateAuthority, Scenario, ScriptedModelServer

pytestmark = pytest.mark.claude

CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
CANARY = "sk-ant-real-CANARY-c1a0de"
PRINT_ENV = Scenario.from_yaml(
    """
steps:
  - text: "Let me look at my environment."
    tools:
      - name: Bash
        input: {command: env, description: Print the environment}
  - text: "My environment: {last_result}"
""",
    name="print-env",
)


async def test_claude_code_works_through_the_proxy_and_its_tools_never_see_the_key(tmp_path: Path) -> None:
    authority = CertificateAuthority.create()
    exchanges: list[ModelExchange] = []

    class Recorder:
        def exchange(self, exchange: ModelExchange) -> None:
            exchanges.append(exchange)

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    upstream_ca = authority.write_pem(tmp_path / "ca.pem")
    with ScriptedModelServer(PRINT_ENV, ssl_context=authority.server_context()) as server:
        upstream = ModelUpstream(server.base_url, CANARY, ca_bundle=upstream_ca)
        async with ModelProxy(upstream, tcp=("127.0.0.1", 0), observer=Recorder()) as proxy:
            host, port = proxy.tcp_address
            environment = {
                "HOME": str(home),
                "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                "ANTHROPIC_BASE_URL": f"http://{host}:{port}",
                "ANTHROPIC_API_KEY": proxy.placeholder,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_MAX_RETRIES": "1",
                "PATH": os.environ["PATH"],
            }
            claude = await asyncio.create_subprocess_exec(
                str(CLAUDE), "-p", "Print your environment", "--output-format", "stream-json", "--verbose",
                "--allowedTools", "Bash(env)",
                cwd=work, env=environment, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(claude.communicate(), 120)
    messages = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    (result,) = [m for m in messages if m["type"] == "result"]
    assert claude.returncode == 0, err.decode()[-2000:]
    assert result["is_error"] is False
    assert f"ANTHROPIC_API_KEY={proxy.placeholder}" in result["result"]  # the tool ran and printed the env
    assert CANARY.encode() not in out + err
    scripted = [r for r in server.requests if r.scenario]
    assert [r.step for r in scripted] == [0, 1]
    assert all(r.path == "/v1/messages?beta=true" for r in scripted)
    streamed = [e for e in exchanges if json.loads(e.body or b"{}").get("stream")]
    assert len(streamed) >= 2 and all((e.outcome, e.status) == ("completed", 200) for e in streamed)
    assert all(CANARY not in repr(e) for e in exchanges)
