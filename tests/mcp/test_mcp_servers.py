"""A run's MCP servers: ``[mcp.NAME]`` in baton.toml, ``--mcp`` entries, and a trusted
repository's servers read from HEAD (never the working tree); refusals come before anything is
recorded."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import run_to_end
from tests.cli._baton_cli import invoke_in_process
from tests.conftest import make_git_repo
from tests.mcp.conftest import SERVER

from baton.config import Settings
from baton.errors import UsageError
from baton.events.project import project
from baton.mcp import repository_mcp_servers, resolve_mcp_servers
from baton.runs import RunSpec

pytestmark = pytest.mark.timeout(120)


def test_baton_toml_names_servers_and_the_log_sees_only_the_names_of_their_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "baton.toml").write_text(
        '[mcp.tracker]\ncommand = ["node", "t.js"]\nenv = { TOKEN = "s3cret-value-0001" }\n'
        '[mcp.docs]\nurl = "https://mcp.example/mcp"\ntransport = "sse"\nheaders = { Authorization = "Bearer x" }\n'
    )
    settings = Settings.load({"BATON_HOME": str(home)})
    tracker, docs = settings.mcp_servers
    assert (tracker.transport, tracker.command, tracker.source) == ("stdio", ("node", "t.js"), "config")
    assert (docs.transport, docs.url) == ("sse", "https://mcp.example/mcp")
    assert tracker.describe() == {
        "name": "tracker",
        "transport": "stdio",
        "source": "config",
        "command": ["node", "t.js"],
        "env": ["TOKEN"],
    }
    assert "s3cret" not in repr(tracker) and tracker.secrets() == ("s3cret-value-0001",)


@pytest.mark.parametrize(
    "table",
    [
        '[mcp.a]\ncommand = ["x"]\nurl = "https://x"\n',
        "[mcp.a]\n",
        '[mcp.a]\nurl = "ftp://x"\n',
        '[mcp.a]\ncommand = ["x"]\ntransport = "http"\n',
        '[mcp.a]\nurl = "https://x"\nenv = { A = "b" }\n',
        '[mcp.a]\ncommand = ["x"]\ntimeout_seconds = 0\n',
        '[mcp.a]\ncommand = ["x"]\ncwd = "/"\n',
        '[mcp."a__b"]\ncommand = ["x"]\n',
    ],
)
def test_a_server_table_that_is_wrong_is_config_invalid(tmp_path: Path, table: str) -> None:
    (tmp_path / "baton.toml").write_text(table)
    with pytest.raises(UsageError) as refused:
        Settings.load({"BATON_HOME": str(tmp_path)})
    assert refused.value.code == "config_invalid" and "mcp.a" in refused.value.message


def test_entries_name_define_or_are_refused() -> None:
    configured = Settings.load({"BATON_HOME": "/nonexistent"}).mcp_servers
    url, command = resolve_mcp_servers(["web=https://mcp.example/mcp", "local=python3 -m srv --flag 'a b'"], configured)
    assert (url.transport, url.url, url.source) == ("http", "https://mcp.example/mcp", "run")
    assert command.command == ("python3", "-m", "srv", "--flag", "a b")
    for entries, words in (
        (["nope"], "no MCP server of that name"),
        (["a=x", "a=y"], "named twice"),
        (["a="], "no command"),
    ):
        with pytest.raises(UsageError) as refused:
            resolve_mcp_servers(entries, configured)
        assert refused.value.code == "invalid_argument" and words in refused.value.message


def test_a_repository_server_is_read_from_head_only(tmp_path: Path) -> None:
    committed = '[mcp.r]\ncommand = ["python3", "committed.py"]\n'
    repo = make_git_repo(tmp_path / "repo", {".baton/policy.toml": committed})
    (repo / ".baton" / "policy.toml").write_text('[mcp.r]\ncommand = ["python3", "edited.py"]\n')  # not committed
    [server] = repository_mcp_servers(repo)
    assert (server.command, server.source) == (("python3", "committed.py"), "repository")
    assert repository_mcp_servers(make_git_repo(tmp_path / "plain", {"README.md": "x"})) == ()


async def test_a_trusted_repositorys_server_is_used_an_untrusted_ones_refused(
    settings: Settings, tmp_path: Path, mcp_agent: Callable[..., str]
) -> None:
    policy = f"[mcp.r]\ncommand = {json.dumps([sys.executable, str(SERVER)])}\n"
    repo = make_git_repo(tmp_path / "trusted", {".baton/policy.toml": policy})
    spec = RunSpec(
        prompt='call r echo {"text": "committed"}', repo=repo, agent=mcp_agent(), mcp=("r",), allow=("mcp__r",)
    )
    configured = replace(settings, openai_api_key="sk-scripted-openai-key-0123456789", agent_start_timeout_seconds=20)
    with pytest.raises(UsageError) as refused:
        await run_to_end(configured, spec)
    assert refused.value.code == "invalid_argument" and "r:" in refused.value.message
    done = await run_to_end(replace(configured, workspace_trusted=(str(repo),)), spec)
    assert done.outcome.status == "finished", done.outcome
    [finished] = [e["data"] for e in project(done.entries) if e["type"] == "mcp.finished"]
    assert finished["output"] == "echo: committed"


def test_baton_run_refuses_an_unknown_server_before_anything_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = invoke_in_process(monkeypatch, tmp_path / "home", "run", "go", "--repo", str(repo), "--mcp", "nope")
    assert done.returncode == 2, done
    assert done.stderr.startswith("baton: invalid_argument: --mcp nope: no MCP server of that name"), done.stderr
