"""Runs in workspaces, end to end: real Claude Code on baton's scripted model, real git.

Four runs at once on one repository each in a worktree of its own; a clone by URL through the
mirror; the setup step (``--setup``, a trusted ``.baton/setup``, an untrusted one skipped, a
failing one); a resume after the workspace was deleted. The user's repository stays
byte-identical (HEAD, index, working tree, refs)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from tests.conftest import make_git_repo
from tests.workspaces.conftest import bare_clone, fingerprint, git, load_settings

from baton.config import Settings
from baton.runs import Baton, RunSpec
from baton.sandbox.bwrap import containment

pytestmark = pytest.mark.claude

needs_bwrap = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot make namespaces here")
WRITE = {"scenario": "write-prompt-file", "permission_mode": "acceptEdits"}


def _notes(entries: list[dict[str, object]], method: str) -> list[dict[str, object]]:
    return [entry["payload"]["params"] for entry in entries if entry["method"] == method]  # type: ignore[index]


@pytest.mark.slow(seconds=60)
@pytest.mark.timeout(240)
async def test_four_runs_at_once_on_one_repository_each_hold_exactly_their_change(
    ws_settings: Settings, repo: Path
) -> None:
    (repo / "draft.txt").write_text("the user's own work in progress\n")  # never seen by the runs
    before = fingerprint(repo)
    names = ["one.txt", "two.txt", "three.txt", "four.txt"]
    async with Baton(ws_settings) as baton:
        handles = [await baton.start(RunSpec(prompt=name, repo=repo, **WRITE)) for name in names]  # type: ignore[arg-type]
        outcomes = await asyncio.gather(*(handle.wait() for handle in handles))
        records = [await baton.store.get_run(handle.run_id) for handle in handles]
    assert [outcome.status for outcome in outcomes] == ["finished"] * 4, outcomes
    paths = set()
    for name, record in zip(names, records, strict=True):
        shown = record.to_dict()
        workspace = shown["workspace"]
        assert shown["repo"] == str(repo.resolve()) and workspace["kind"] == "worktree"
        assert workspace["path"] == str(ws_settings.workspace_dir(record.id)) == record.cwd
        assert workspace["base_commit"] == git(repo, "rev-parse", "HEAD")
        # its result as a branch of the user's repository holding exactly its change
        branch, head = workspace["branch"], workspace["head_commit"]
        assert branch.startswith("baton/") and workspace["pull_request_url"] is None
        assert git(repo, "rev-parse", f"refs/heads/{branch}") == head
        assert git(repo, "diff", "--name-status", workspace["base_commit"], head) == f"A\t{name}"
        path = Path(workspace["path"])
        assert git(path, "status", "--porcelain") == f"?? {name}"  # exactly its change
        assert (path / name).read_text() == f"written for {name}\n"
        paths.add(path)
    assert len(paths) == 4
    assert fingerprint(repo) == before
    assert not any((repo / name).exists() for name in names)


@pytest.mark.slow(seconds=20)
async def test_a_url_is_cloned_and_the_run_works_in_the_clone(
    ws_settings: Settings, tmp_path: Path, repo: Path
) -> None:
    bare = bare_clone(repo, tmp_path / "upstream.git")
    upstream = fingerprint_bare(bare)
    async with Baton(ws_settings) as baton:
        outcome = await baton.run(RunSpec(prompt="cloned.txt", repo=Path(), repo_url=f"file://{bare}", **WRITE))  # type: ignore[arg-type]
        shown = (await baton.store.get_run(outcome.run_id)).to_dict()
    assert outcome.status == "finished", outcome
    assert shown["repo"] == f"file://{bare}" and shown["workspace"]["kind"] == "clone"
    clone = Path(shown["workspace"]["path"])
    assert (clone / "cloned.txt").is_file() and git(clone, "remote", "get-url", "origin") == f"file://{bare}"
    # The upstream gains only the run's branch (a clone's result is pushed by default,
    # docs/workspaces.md "Results"); every ref it had is as it was.
    branch = shown["workspace"]["branch"]
    assert branch is not None and branch.startswith("baton/")
    after = fingerprint_bare(bare).splitlines()
    assert [line for line in after if not line.startswith(f"refs/heads/{branch} ")] == upstream.splitlines()
    assert git(bare, "show", f"{branch}:cloned.txt") == "written for cloned.txt"


def fingerprint_bare(bare: Path) -> str:
    return git(bare, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.slow(seconds=30)
async def test_the_setup_runs_before_the_agent_and_its_failure_fails_the_run(tmp_path: Path) -> None:
    repo = make_git_repo(
        tmp_path / "repo", {".baton/setup": "echo from the repository\necho $BATON_PORT_BASE > port.txt\n"}
    )
    untrusted = load_settings(tmp_path / "home-a")
    async with Baton(untrusted) as baton:
        given = await baton.run(RunSpec(prompt="a.txt", repo=repo, setup="echo given; touch made-by-setup", **WRITE))  # type: ignore[arg-type]
        skipped = await baton.run(RunSpec(prompt="b.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        given_log = [dict(e) for e in await baton.log.read(given.run_id)]
        skipped_log = [dict(e) for e in await baton.log.read(skipped.run_id)]
    assert given.status == "finished" and skipped.status == "finished"
    setup = _notes(given_log, "_baton/setup")
    assert setup[0] == {"status": "started", "source": "option", "command": "echo given; touch made-by-setup"}
    assert {"status": "output", "text": "given"} in setup
    assert setup[-1] == {"status": "finished", "exit_code": 0, "duration_ms": setup[-1]["duration_ms"]}
    assert isinstance(setup[-1]["duration_ms"], int)
    methods = [entry["method"] for entry in given_log]
    assert methods.index("_baton/setup") < methods.index("session/prompt")  # before the agent's first turn
    assert (untrusted.workspace_dir(given.run_id) / "made-by-setup").is_file()
    [note] = _notes(skipped_log, "_baton/setup")
    assert note["status"] == "skipped" and "is not a trusted repository" in str(note["reason"])
    assert "--setup CMD" in str(note["hint"]) and f'add "{repo.resolve()}" to trusted' in str(note["hint"])

    trusted = load_settings(tmp_path / "home-b", workspace_trusted=(str(repo),))
    async with Baton(trusted) as baton:
        ran = await baton.run(RunSpec(prompt="c.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        ran_record = await baton.store.get_run(ran.run_id)
    assert ran.status == "finished"
    port = int((trusted.workspace_dir(ran.run_id) / "port.txt").read_text())
    assert port == ran_record.request["workspace"]["port_base"]  # type: ignore[index]

    failing_repo = make_git_repo(tmp_path / "failing", {".baton/setup": "echo about to fail\nexit 3\n"})
    trusted = load_settings(tmp_path / "home-c", workspace_trusted=(str(failing_repo),))
    async with Baton(trusted) as baton:
        failed = await baton.run(RunSpec(prompt="d.txt", repo=failing_repo, **WRITE))  # type: ignore[arg-type]
        failed_log = [dict(e) for e in await baton.log.read(failed.run_id)]
    assert failed.status == "failed" and failed.code == "workspace_setup_failed", failed
    assert str(failed.message).startswith("the setup (.baton/setup) exited 3: about to fail"), failed.message
    assert _notes(failed_log, "_baton/setup")[-1]["status"] == "failed"
    assert not any(entry["method"] == "session/prompt" for entry in failed_log)  # the agent never got the task


@pytest.mark.slow(seconds=30)
async def test_a_resume_after_the_workspace_was_deleted_makes_it_again_from_the_last_snapshot(
    ws_settings: Settings, repo: Path
) -> None:
    before = fingerprint(repo)
    async with Baton(ws_settings) as baton:
        first = await baton.run(RunSpec(prompt="kept.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        workspace = ws_settings.workspace_dir(first.run_id)
        assert (workspace / "kept.txt").is_file()
        shutil.rmtree(workspace)  # gone, as after `baton gc --force` or by hand
        handle = await baton.resume(first.run_id, "again", scenario="plain")
        again = await handle.wait()
        record = await baton.store.get_run(again.run_id)
    assert again.status == "finished", again
    assert record.resumed_from == first.run_id and record.cwd == str(workspace)
    assert (workspace / "kept.txt").read_text() == "written for kept.txt\n"  # from the snapshot
    assert git(workspace, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")
    assert record.to_dict()["workspace"]["kind"] == "worktree"
    assert fingerprint(repo) == before


@pytest.mark.slow(seconds=20)
async def test_an_imported_worktree_run_gets_a_worktree_in_the_new_home(tmp_path: Path, repo: Path) -> None:
    before = fingerprint(repo)
    exported = tmp_path / "run.baton"
    async with Baton(load_settings(tmp_path / "home-a")) as baton:
        first = await baton.run(RunSpec(prompt="moved.txt", repo=repo, **WRITE))  # type: ignore[arg-type]
        await baton.export_run(first.run_id, exported)
    here = load_settings(tmp_path / "home-b")
    async with Baton(here) as baton:
        imported = await baton.import_run(exported)
        record = await baton.store.get_run(first.run_id)
    workspace = here.workspace_dir(first.run_id)
    assert imported.repo == workspace and record.cwd == str(workspace)
    assert record.to_dict()["workspace"]["path"] == str(workspace) and record.to_dict()["repo"] == str(repo.resolve())
    assert (workspace / "moved.txt").read_text() == "written for moved.txt\n"
    assert git(workspace, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")
    assert fingerprint(repo) == before


@needs_bwrap
@pytest.mark.slow(seconds=20)
async def test_the_agent_commits_inside_its_worktree_under_the_sandbox(ws_settings: Settings, repo: Path) -> None:
    before = fingerprint(repo)
    command = (
        "echo work > work.txt && git add work.txt && "
        "git -c user.name=agent -c user.email=agent@baton.invalid commit -qm 'agent commit' && echo COMMITTED"
    )
    spec = RunSpec(
        prompt=command,
        repo=repo,
        scenario="bash-prompt",
        permission_mode="acceptEdits",
        allow=("Bash",),
        sandbox="bwrap",
    )
    async with Baton(ws_settings) as baton:
        outcome = await baton.run(spec)
        entries = [dict(e) for e in await baton.log.read(outcome.run_id)]
    assert outcome.status == "finished" and "COMMITTED" in str(outcome.result), outcome
    [sandbox] = _notes(entries, "_baton/sandbox")
    assert sandbox["mode"] == "bwrap"
    workspace = ws_settings.workspace_dir(outcome.run_id)
    assert git(workspace, "log", "-1", "--format=%s") == "agent commit"
    assert fingerprint(repo) == before  # the commit's objects are shared; no ref of the user's moved


@pytest.mark.slow(seconds=20)
async def test_a_clone_by_url_pushes_its_branch_back_and_stores_the_hooks_pull_request(
    tmp_path: Path, repo: Path
) -> None:
    bare = bare_clone(repo, tmp_path / "upstream.git")
    calls = tmp_path / "gh-calls.txt"
    gh = tmp_path / "gh"
    gh.write_text(
        "#!/bin/sh\n"
        f'printf "%s|%s|%s|%s|%s\\n" "$PWD" "$BATON_RUN_ID" "$BATON_BRANCH" "$BATON_BASE" "$BATON_REMOTE" >> {calls}\n'
        'echo "Creating pull request for $BATON_BRANCH"\n'
        'echo "https://example.invalid/pr/$BATON_BRANCH"\n'
    )
    gh.chmod(0o755)
    settings = load_settings(tmp_path / "home", result_on_branch=f'{gh} pr create --head "$BATON_BRANCH"')
    async with Baton(settings) as baton:
        outcome = await baton.run(RunSpec(prompt="pr.txt", repo=Path(), repo_url=f"file://{bare}", **WRITE))  # type: ignore[arg-type]
        shown = (await baton.store.get_run(outcome.run_id)).to_dict()
        log = [dict(e) for e in await baton.log.read(outcome.run_id)]
    assert outcome.status == "finished", outcome
    workspace = shown["workspace"]
    branch, clone = workspace["branch"], Path(workspace["path"])
    assert workspace["kind"] == "clone" and branch == f"baton/{outcome.run_id[-8:]}"
    # pushed back to the bare repository it was cloned from (the clone's origin is the URL)
    assert git(bare, "rev-parse", f"refs/heads/{branch}") == workspace["head_commit"]
    assert git(bare, "show", f"{branch}:pr.txt") == "written for pr.txt"
    [pushed] = _notes(log, "_baton/branch_pushed")
    assert pushed["branch"] == branch and pushed["remote"] == "origin"
    # the hook ran in the clone, after the push, and its last line is the run's pull request
    url = f"https://example.invalid/pr/{branch}"
    assert workspace["pull_request_url"] == url
    assert _notes(log, "_baton/pull_request") == [{"url": url, "branch": branch}]
    [call] = calls.read_text().splitlines()
    assert call == f"{clone}|{outcome.run_id}|{branch}|{workspace['base_commit']}|origin"
    methods = [entry["method"] for entry in log]
    assert methods.index("_baton/branch_pushed") < methods.index("_baton/pull_request") < len(methods) - 1
