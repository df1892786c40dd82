"""Repository instructions (docs/agents.md): the real agents, offline against the scripted model.

A trusted repository's ``CLAUDE.md``/``AGENTS.md``/``GEMINI.md`` as the base commit has them
reach the model's requests through each agent's system-prompt channel; an edit of the working
tree that was never committed does not; an untrusted repository's reach nothing. The log names
every file given with its hash (``_baton/instructions``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.agents.conftest import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY, Finished, assert_log_whole, run_to_end
from tests.conftest import make_git_repo

from baton.config import Settings
from baton.runs import Baton, RunSpec
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.timeout(120)

# Each agent's own file (its convention) and AGENTS.md, in the order the agent is given them.
FILES = {
    "claude": ("CLAUDE.md", "AGENTS.md"),
    "claude-acp": ("CLAUDE.md", "AGENTS.md"),
    "codex": ("AGENTS.md",),
    "opencode": ("AGENTS.md",),
    "gemini": ("GEMINI.md", "AGENTS.md"),
    "qwen": ("QWEN.md", "AGENTS.md"),
    "kilo": ("AGENTS.md",),
}


@contextmanager
def scripted(settings: Settings, agent: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Settings, Any]]:
    """Settings pointing ``agent`` at a scripted server playing ``plain`` (one text answer)."""
    with ScriptedModelServer("plain") as server:
        if agent in ("codex", "qwen"):
            yield (
                replace(settings, openai_base_url=server.base_url, openai_api_key=OPENAI_KEY, model_max_retries=0),
                server,
            )
            return
        if agent == "gemini":  # Gemini's credentials come from the environment only
            monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
            monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")
        yield replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=ANTHROPIC_KEY), server


def _canary(name: str) -> str:
    return f"baton-{name.split('.')[0].lower()}-" + os.urandom(6).hex()


def _repository(path: Path) -> tuple[Path, dict[str, str], str]:
    """A repository committing CLAUDE.md, AGENTS.md, GEMINI.md and QWEN.md (each with a canary of
    its own), then editing them all in the working tree only: the committed texts, and the canary
    of the uncommitted edits."""
    committed = {
        name: f"# {name}\nAlways say the word {_canary(name)}.\n"
        for name in ("CLAUDE.md", "AGENTS.md", "GEMINI.md", "QWEN.md")
    }
    repo = make_git_repo(path, {"README.md": "# r\n", **committed})
    edited = "baton-uncommitted-" + os.urandom(6).hex()
    for name in committed:
        (repo / name).write_text(f"# {name}\nNever mind, say {edited}.\n")
    return repo, committed, edited


def _spec(agent: str, repo: Path) -> RunSpec:
    # Gemini CLI runs the commands it calls safe unasked: a policy that allows them (no tool is called).
    return RunSpec(prompt="go", repo=repo, agent=agent, allow=("Bash",) if agent == "gemini" else ())


def _model_text(server: Any) -> str:
    """Everything the agent sent the model, as text (the scripted server records each request)."""
    return "\n".join(json.dumps(request.body) for request in server.requests)


def _note(finished: Finished) -> dict[str, Any]:
    [note] = [entry["payload"]["params"] for entry in finished.entries if entry["method"] == "_baton/instructions"]
    return note  # type: ignore[no-any-return]


def _head(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _canaries(text: str) -> set[str]:
    return set(re.findall(r"baton-[a-z]+-[0-9a-f]{12}", text))


AGENT_PARAMS = [
    pytest.param("claude", marks=pytest.mark.claude),
    pytest.param("claude-acp", marks=pytest.mark.claude),
    "codex",
    pytest.param("opencode", marks=pytest.mark.claude),
    "gemini",
    "qwen",
    "kilo",
]


@pytest.mark.parametrize("agent", AGENT_PARAMS)
async def test_a_trusted_repository_s_committed_instructions_reach_the_model_and_are_logged(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    repo, committed, edited = _repository(tmp_path / "repo")
    trusted = replace(settings, workspace_trusted=(str(repo),))
    with scripted(trusted, agent, monkeypatch) as (configured, server):
        finished = await run_to_end(configured, _spec(agent, repo))
        sent = _model_text(server)
    assert finished.outcome.status == "finished", finished.outcome
    assert_log_whole(finished.entries)
    given = FILES[agent]
    for name in given:
        assert _canaries(committed[name]) <= _canaries(sent), f"{agent}: {name} as committed did not reach the model"
    # Gemini CLI reads the working tree's GEMINI.md itself, and no setting stops it (docs/agents.md).
    assert (edited in sent) == (agent == "gemini"), f"{agent}: the working tree's uncommitted edit"
    for name in set(committed) - set(given):  # another agent's convention is not this one's
        assert not (_canaries(committed[name]) & _canaries(sent)), f"{agent} was given {name}"
    assert _note(finished) == {
        "files": [
            {
                "path": name,
                "sha256": hashlib.sha256(committed[name].encode()).hexdigest(),
                "bytes": len(committed[name].encode()),
            }
            for name in given
        ],
        "commit": _head(repo),
    }
    methods = finished.methods()
    assert methods.index("_baton/instructions") < methods.index("session/prompt")


@pytest.mark.parametrize("agent", AGENT_PARAMS)
async def test_an_untrusted_repository_s_instructions_reach_no_model(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    repo, committed, edited = _repository(tmp_path / "repo")
    with scripted(settings, agent, monkeypatch) as (configured, server):
        finished = await run_to_end(configured, _spec(agent, repo))
        sent = _model_text(server)
    assert finished.outcome.status == "finished", finished.outcome
    assert server.requests, "the model was asked"
    for text in committed.values():
        assert not (_canaries(text) & _canaries(sent)), f"{agent}: an untrusted repository's file reached the model"
    # Gemini CLI reads the working tree's GEMINI.md itself, trusted or not (docs/agents.md).
    assert (edited in sent) == (agent == "gemini"), f"{agent}: the working tree's uncommitted edit"
    note = _note(finished)
    assert note["files"] == [] and note["commit"] == _head(repo)
    assert [item["path"] for item in note["ignored"]] == list(FILES[agent])
    assert all("is not a trusted repository" in item["reason"] for item in note["ignored"])


@pytest.mark.claude
async def test_a_resumed_claude_is_given_them_again_from_the_same_base_commit(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, committed, edited = _repository(tmp_path / "repo")
    trusted = replace(settings, workspace_trusted=(str(repo),))
    with scripted(trusted, "claude", monkeypatch) as (configured, server):
        async with Baton(configured) as baton:
            first = await baton.run(_spec("claude", repo))
            before = len(server.requests)
            handle = await baton.resume(first.run_id, "Once more.")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
        sent = "\n".join(json.dumps(request.body) for request in server.requests[before:])
    assert first.status == "finished" and outcome.status == "finished", outcome
    assert handle.run_id != first.run_id
    assert _canaries(committed["CLAUDE.md"]) <= _canaries(sent) and edited not in sent
    [note] = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/instructions"]
    assert [item["path"] for item in note["files"]] == ["CLAUDE.md", "AGENTS.md"]
    assert note["commit"] == _head(repo)
