"""``Baton.fork``: a three-turn run forked at turn 2 gives a new run whose first model request
carries exactly turns 1 and 2 (rebuilt from the log) and whose workspace is snapshot 2; the
original is untouched (baton.runs.forking)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tests.conftest import make_git_repo

from baton.cassettes import load_cassette
from baton.config import Settings
from baton.errors import UsageError
from baton.runs import Baton, RunSpec

pytestmark = [pytest.mark.claude, pytest.mark.slow(seconds=60)]

TURNS = ["echo one > one.txt", "echo two > two.txt", "echo three > three.txt"]


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


async def test_a_fork_at_turn_2_carries_turns_1_and_2_and_starts_on_snapshot_2(tmp_path: Path) -> None:
    environ = {"BATON_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", ""), "BATON_WORKSPACE": "in-place"}
    settings = Settings.load(environ)
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# a repository\n"})
    cassette = tmp_path / "fork.cassette.jsonl"
    async with Baton(settings) as baton:
        spec = RunSpec(prompt=TURNS[0], repo=repo, scenario="bash-prompt", run_mode="interactive", allow=("Bash",))
        handle = await baton.start(spec)
        for text in TURNS[1:]:
            await handle.send(text)
        await handle.close()
        original = await asyncio.wait_for(handle.wait(), 90)
        assert original.status == "finished", original
        original_log = await baton.log.read(handle.run_id)
        snapshots = await baton.queries.snapshots(handle.run_id)
        assert [s["id"] for s in snapshots] == ["s1", "s2", "s3"]

        with pytest.raises(UsageError) as no_such_turn:
            await baton.fork(handle.run_id, turn=4, repo=tmp_path / "never")
        fork_repo = tmp_path / "fork"
        forked = await baton.fork(
            handle.run_id, "What did you do?", turn=2, repo=fork_repo, scenario="plain", record=cassette,
            run_mode="background",
        )  # fmt: skip
        outcome = await asyncio.wait_for(forked.wait(), 90)
        fork_record = await baton.store.get_run(forked.run_id)
        fork_log = await baton.log.read(forked.run_id)
        assert await baton.log.read(handle.run_id) == original_log  # the original is only read

    assert no_such_turn.value.code == "invalid_argument" and "3 finished turns" in no_such_turn.value.message
    assert outcome.status == "finished", outcome
    forked_from = {"run_id": handle.run_id, "seq": forked_from_seq(original_log, 2), "turn": 2, "snapshot_id": "s2"}
    [started] = [e["payload"]["params"] for e in fork_log if e["method"] == "_baton/run_started"]
    assert started["forked_from"] == forked_from
    assert fork_record.request is not None and fork_record.request["forked_from"] == forked_from
    # The fork's workspace: snapshot 2 (turns 1 and 2's files, not turn 3's).
    assert _files(fork_repo) == {"README.md": "# a repository\n", "one.txt": "one\n", "two.txt": "two\n"}
    assert _files(repo)["three.txt"] == "three\n"  # the original's tree is left alone
    # The fork's first model request carries turns 1 and 2: prompts, calls and their results.
    first = next(e for e in load_cassette(cassette).exchanges if e.body and e.body.get("tools"))
    sent = str(first.body["messages"])
    assert TURNS[0] in sent and TURNS[1] in sent and TURNS[2] not in sent
    assert "What did you do?" in sent


def forked_from_seq(entries: list[dict[str, object]], turn: int) -> int:
    from baton.events.project import project

    return [e["log_seq"] for e in project(entries) if e["type"] == "turn.finished"][turn - 1]  # type: ignore[arg-type]
