"""The real ``gemini --acp`` under one native setting, driven by a recording ACP client (as for codex)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities
from tests.agents.codex.native import Recording, RecordingClient

from baton.agents.gemini import GeminiSetting, gemini_command
from baton.agents.registry import GEMINI
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.testing import Scenario, ScriptedModelServer

KEY = "native-gemini-key-0123456789abcdef"


async def run_native(
    setting: GeminiSetting, scenario: Scenario | str, workspace: Path, home: Path, *, approve: bool = True
) -> tuple[Recording, list[object]]:
    recording = Recording(approve=approve)
    executable = GEMINI.executable()
    assert executable is not None, "gemini-cli is not installed: run `make setup`"
    with ScriptedModelServer(scenario) as server:
        context = LaunchContext(
            run_id="native-" + os.urandom(4).hex(),
            workspace=workspace,
            agent_home=home,
            model=None,
            base_url=server.base_url,
            api_key=KEY,
            passthrough=(),
            parent=dict(os.environ),
            setting=setting,
            max_retries=0,
        )
        agent = SubprocessAgent("gemini", gemini_command(context, executable))
        try:
            conn = connect_to_agent(RecordingClient(recording), await agent.start())  # type: ignore[arg-type]
            capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False, write_text_file=False))
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            await conn.set_session_mode(session_id=session.session_id, mode_id=setting.mode)
            response = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), 60)
            recording.stop_reason = str(response.stop_reason)
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await agent.aclose()
        return recording, list(server.requests)
