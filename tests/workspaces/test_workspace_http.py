"""Workspaces over HTTP: ``workspace``, ``base``, ``include_uncommitted`` and a git URL as
``repo`` in the run body; the run object's ``workspace``; which URLs a server clones."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server._server import RunningServer, running_server
from tests.workspaces.conftest import bare_clone, fingerprint, git

from baton.config import Settings
from baton.errors import RefusedError
from baton.server import ServerConfig
from baton.server.routes._access import allowed_repository_url
from baton.testing import ScriptedModelServer

MODEL_KEY = "sk-scripted-model-key-0123456789abcdef"


@contextmanager
def serving(settings: Settings, scenario: str) -> Iterator[RunningServer]:
    with ScriptedModelServer(scenario) as model:
        configured = replace(settings, anthropic_base_url=model.base_url, anthropic_api_key=MODEL_KEY)
        with running_server(configured) as server:
            yield server


async def _ended(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    for _ in range(400):
        run: dict[str, Any] = (await client.get(f"/v1/runs/{run_id}")).json()
        if run["finished_at"] is not None:
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end")


def test_a_server_clones_any_url_on_loopback_and_only_listed_ones_otherwise() -> None:
    assert allowed_repository_url("https://example.invalid/a.git", ServerConfig()) == "https://example.invalid/a.git"
    listed = ServerConfig(host="10.0.0.1", repository_urls=("https://git.example.invalid/team/",))
    assert allowed_repository_url("https://git.example.invalid/team/app.git", listed)
    for config in (listed, ServerConfig(host="10.0.0.1")):
        with pytest.raises(RefusedError) as refused:
            allowed_repository_url("https://elsewhere.invalid/app.git", config)
        assert refused.value.code == "repository_not_allowed"
    env = ServerConfig.load(
        Settings.load({"BATON_HOME": "/nonexistent"}), {"BATON_REPOSITORY_URLS": "file:///srv/, ssh://git@h/"}
    )
    assert env.repository_urls == ("file:///srv/", "ssh://git@h/")


@pytest.mark.claude
@pytest.mark.slow(seconds=25)
async def test_runs_started_over_http_get_a_worktree_a_clone_or_the_folder_itself(
    ws_settings: Settings, tmp_path: Path, repo: Path
) -> None:
    (repo / "wip.txt").write_text("uncommitted\n")
    before = fingerprint(repo)
    bare = bare_clone(repo, tmp_path / "upstream.git")
    with serving(ws_settings, "plain") as server:
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
            bodies = [
                {"prompt": "go", "repo": str(repo), "include_uncommitted": True},
                {"prompt": "go", "repo": f"file://{bare}", "base": "main"},
                {"prompt": "go", "repo": str(repo), "workspace": "in-place"},
            ]
            created = [await client.post("/v1/runs", json=body) for body in bodies]
            assert [response.status_code for response in created] == [201, 201, 201], [r.text for r in created]
            runs = [await _ended(client, response.json()["id"]) for response in created]
            missing = await client.post("/v1/runs", json={"prompt": "go", "repo": str(repo), "base": "nope"})
            wrong = await client.post("/v1/runs", json={"prompt": "go", "repo": str(repo), "workspace": "elsewhere"})
    worktree, clone, in_place = (run["workspace"] for run in runs)
    assert [run["status"] for run in runs] == ["finished"] * 3
    assert worktree["kind"] == "worktree" and (Path(worktree["path"]) / "wip.txt").read_text() == "uncommitted\n"
    assert runs[0]["repo"] == str(repo.resolve())
    assert clone["kind"] == "clone" and runs[1]["repo"] == f"file://{bare}"
    assert clone["base_commit"] == git(repo, "rev-parse", "HEAD")
    assert in_place == {
        "kind": "in-place",
        "path": str(repo.resolve()),
        "base_commit": git(repo, "rev-parse", "HEAD"),
        "branch": None,
        "head_commit": None,
        "pull_request_url": None,
    }
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "ref_not_found"
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "request_invalid"
    assert fingerprint(repo) == before
