"""The host against the real codex-acp (0.16.0, on the scripted model): its sessions listed by
``cwd`` through ``session/list``, closed with ``session/close``, a ``select`` config option set
through the host, and its ``usage_update`` (context window only, no cost) as the turn's usage.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities
from tests.agents.native import KEY
from tests.conftest import make_git_repo

from baton.acp.host import AgentNormalizer, BatonHost
from baton.acp.replay import ReplayTagger
from baton.acp.sessions import close_agent_session, list_agent_sessions, set_config_option
from baton.acp.tap import TappingTransport
from baton.agents.registry import CODEX
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.config import Settings
from baton.gates import Gatekeeper, Policy
from baton.runs import Baton
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.timeout(90)

ASK_ALL = next(setting for setting in CODEX.settings if setting.name == "ask-all")


async def test_codex_sessions_are_listed_by_cwd_closed_and_configured(settings: Settings, tmp_path: Path) -> None:
    workspaces = [make_git_repo(tmp_path / name, {"README.md": "# a repository\n"}) for name in ("one", "two")]
    executable = CODEX.executable()
    assert executable is not None and CODEX.launch is not None, "codex-acp is not installed: run `make setup`"
    with ScriptedModelServer("plain") as server:
        context = LaunchContext(
            run_id="host-" + os.urandom(4).hex(),
            workspace=workspaces[0],
            agent_home=tmp_path / "home",
            model=None,
            base_url=server.base_url,
            api_key=KEY,
            passthrough=(),
            parent=dict(os.environ),
            setting=ASK_ALL.config,
            max_retries=0,
        )
        agent = SubprocessAgent(CODEX.name, CODEX.launch(context, executable))
        meta = dict(agent.command.session_meta or {})
        async with Baton(settings) as baton:
            run_id = (await baton.store.create_run(agent=CODEX.name, cwd=str(workspaces[0]))).id
            baton.log.open_run(run_id)
            try:
                tap = TappingTransport(ReplayTagger(AgentNormalizer(await agent.start(), CODEX)), baton.log, run_id)

                async def wait_logged() -> None:
                    await baton.log.wait_committed(run_id, tap.last_seq)

                host = BatonHost(Gatekeeper(Policy.build("default"), workspaces[0]), wait_logged, agent=CODEX)
                conn = connect_to_agent(host, tap)
                capabilities = ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False)
                )
                init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
                offered = init.agent_capabilities
                made = []
                for workspace in workspaces:
                    session = await conn.new_session(cwd=str(workspace), mcp_servers=[], **meta)
                    made.append(session.session_id)
                    host.session.take_response(session)
                    host.turn_started()
                    answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("hello")])
                    assert answer.stop_reason == "end_turn"
                usage = host.turn_usage(answer)
                listed = await list_agent_sessions(conn, offered)
                here = await list_agent_sessions(conn, offered, cwd=str(workspaces[0]))
                effort = host.session.option("reasoning_effort")
                assert effort is not None and effort["type"] == "select"
                choices = [c["value"] for c in effort["options"] if c["value"] != effort["currentValue"]]
                await set_config_option(conn, host.session, made[1], "reasoning_effort", choices[0])
                closed = await close_agent_session(conn, offered, made[1])
                await conn.close()
            finally:
                await agent.aclose()
            await baton.log.flush()
            entries = await baton.log.read(run_id)
    assert {made[0], made[1]} <= {info.session_id for info in listed}
    assert [info.session_id for info in here if info.session_id in made] == [made[0]]
    assert all(info.cwd == str(workspaces[0]) for info in here)
    assert host.session.option("reasoning_effort")["currentValue"] == choices[0]  # type: ignore[index]
    assert closed
    answered = [e for e in entries if e["method"] == "session/close" and e["direction"] == "from_agent"]
    assert answered and "error" not in answered[0]["payload"]
    # Codex reports only the context window: the turn's usage is its used/size, and no cost.
    assert set(usage) == {"usage"} and set(usage["usage"]) == {"used", "size"}
    assert usage["usage"]["size"] > 0
