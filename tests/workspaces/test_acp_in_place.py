"""``baton acp`` works on the editor's own files, always in place: even where the configuration
makes worktrees the default (``BATON_WORKSPACE=worktree``, ``[workspace] kind``), the session's
run works in the folder the editor named and no workspace is made. Real ``baton acp``, real
Claude Code on baton's scripted model, real git."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from tests.acp_server.test_baton_acp import KEY, EditorClient, spawn_baton_acp, stop
from tests.cli._baton_cli import cli_environment
from tests.workspaces.conftest import fingerprint, load_settings

from baton.runs import Baton
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude


@pytest.mark.slow(seconds=15)
async def test_baton_acp_works_in_place_whatever_the_configured_kind(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "baton.toml").write_text('[workspace]\nkind = "worktree"\n')
    before = fingerprint(repo)
    client = EditorClient()
    with ScriptedModelServer("plain") as server:
        env = cli_environment(home) | {
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": KEY,
            "BATON_WORKSPACE": "worktree",
        }
        process, transport = await spawn_baton_acp(env)
        try:
            conn = connect_to_agent(client, transport)  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("[scenario:needs-approval] go")])
            assert done.stop_reason == "end_turn" and done.field_meta is not None
            run_id = done.field_meta["baton"]["run_id"]
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await stop(process, transport)
    assert (repo / "approved.txt").exists()  # the editor's own folder
    async with Baton(load_settings(home)) as baton:
        record = await baton.store.get_run(run_id)
    workspace = record.to_dict()["workspace"]
    assert workspace["kind"] == "in-place" and workspace["path"] == str(repo.resolve()) == record.cwd
    assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())
    after = fingerprint(repo)
    assert {key: after[key] for key in after if key != "tree"} == {key: before[key] for key in before if key != "tree"}
