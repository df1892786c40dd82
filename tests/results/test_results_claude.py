"""A real scripted Claude run's result as a branch: made at the end of the run (before
``task.finished``), pushed to a bare repository, handed to a script standing in for ``gh``, then
``baton branch``/``merge``/``push`` after the run, over the CLI and over HTTP.

The run works in a detached ``git worktree`` of the user's repository, as a worktree run does,
in place (config ``result.branch_in_place``): the user's own checkout, HEAD, index and refs stay
byte-identical; the repository gains objects, the branch and its remote-tracking ref.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.cli._baton_cli import BatonCLI, Invocation
from tests.conftest import make_git_repo
from tests.server._server import running_server
from tests.snapshots.conftest import hash_every_file

from baton.config import Settings

pytestmark = [pytest.mark.claude, pytest.mark.timeout(240)]

URL = "https://github.example/acme/repo/pull/7"
PROMPT = "Create hello.txt and run echo hi"
ALLOWED = (".git/objects/", ".git/refs/heads/baton", ".git/logs/refs/heads/baton", ".git/worktrees/",
           ".git/refs/remotes/origin/baton", ".git/logs/refs/remotes/origin/baton")  # fmt: skip


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=True)
    return done.stdout.decode()


def changed_outside(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Paths that differ, other than the objects, the new refs and the worktree's admin entry."""
    changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    return sorted(path for path in changed if not path.startswith(ALLOWED))


@dataclass
class Delivered:
    cli: BatonCLI
    user: Path  # the user's repository, main checked out at base
    worktree: Path  # the run's workspace: a detached worktree of it
    origin: Path  # a bare repository, the user's `origin`
    base: str
    run: Invocation
    events: list[dict[str, Any]]
    run_id: str
    branch: str
    hook_calls: Path
    state_before: dict[str, Any]
    plain_run_id: str


@pytest.fixture(scope="module")
def delivered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Delivered]:
    base_dir = tmp_path_factory.mktemp("results")
    user = make_git_repo(base_dir / "user", {"README.md": "# a repository\n", "notes.txt": "notes\n"})
    origin = base_dir / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(user), str(origin)], check=True)
    git(user, "remote", "add", "origin", str(origin))
    git(user, "fetch", "-q", "origin")
    worktree = base_dir / "workspace"
    git(user, "worktree", "add", "-q", "--detach", str(worktree))
    calls = base_dir / "gh-calls.txt"
    gh = base_dir / "gh"
    gh.write_text(
        "#!/bin/sh\n"
        f'printf "%s %s %s %s\\n" "$*" "$BATON_RUN_ID" "$BATON_BRANCH" "$BATON_BASE" >> {calls}\n'
        'echo "Creating pull request for $BATON_BRANCH into main"\n'
        f"echo {URL}\n"
    )
    gh.chmod(0o755)
    cli = BatonCLI(base_dir / "home")
    cli.home.mkdir()
    (cli.home / "baton.toml").write_text(
        "[result]\n"
        "branch_in_place = true\n"
        "push = true\n"
        'author = "Baton Bot <bot@baton.invalid>"\n'
        f"on_branch = '{gh} pr create --head \"$BATON_BRANCH\"'\n"
    )
    before = hash_every_file(user)
    args = ("--scenario", "write-and-run", "--mode", "acceptEdits", "--allow", "Bash(echo:*)", "--json")
    run = cli("run", PROMPT, "--repo", str(worktree), *args, timeout=180)
    assert run.returncode == 0, run.describe()
    events = run.json_lines()
    run_id = events[0]["run_id"]
    nothing = make_git_repo(base_dir / "untouched", {"README.md": "# nothing to do\n"})
    plain = cli("run", "Say hello", "--repo", str(nothing), "--scenario", "plain", "--json", timeout=180)
    assert plain.returncode == 0, plain.describe()
    yield Delivered(
        cli=cli,
        user=user,
        worktree=worktree,
        origin=origin,
        base=git(user, "rev-parse", "HEAD").strip(),
        run=run,
        events=events,
        run_id=run_id,
        branch=f"baton/{run_id[-8:]}",
        hook_calls=calls,
        state_before=before,
        plain_run_id=plain.json_lines()[0]["run_id"],
    )


def test_the_branch_holds_exactly_the_runs_change_and_nothing_else_moved(delivered: Delivered) -> None:
    user, branch = delivered.user, delivered.branch
    types = [event["type"] for event in delivered.events]
    assert types[-1] == "task.finished" and types.count("branch.created") == 1
    (created,) = [event for event in delivered.events if event["type"] == "branch.created"]
    assert types.index("branch.created") > types.index("turn.finished")
    assert created["data"] == {
        "branch": branch,
        "commit": git(user, "rev-parse", branch).strip(),
        "base": delivered.base,
        "files_changed": 1,
        "insertions": 1,
        "deletions": 0,
        "skipped": [],
    }
    assert git(user, "rev-parse", f"{branch}^").strip() == delivered.base
    assert git(user, "diff", "--name-status", delivered.base, branch) == "A\thello.txt\n"
    assert git(user, "show", f"{branch}:hello.txt") == "hello from baton\n"
    message = git(user, "log", "-1", "--format=%an <%ae>%n%B", branch)
    assert message.startswith(f"Baton Bot <bot@baton.invalid>\n{PROMPT}\n\n")
    assert "Created hello.txt and ran `echo hi`" in message  # the agent's last message
    assert message.rstrip().endswith(f"Baton-Run: {delivered.run_id}")
    # The user's checkout: HEAD, index, working tree, config and other refs as they were.
    assert changed_outside(delivered.state_before, hash_every_file(user)) == []
    assert git(user, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


def test_pushed_and_the_hook_url_is_the_runs_pull_request(
    delivered: Delivered, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = git(delivered.user, "rev-parse", delivered.branch).strip()
    assert git(delivered.origin, "rev-parse", delivered.branch).strip() == commit
    calls = delivered.hook_calls.read_text().splitlines()
    assert calls[0] == f"pr create --head {delivered.branch} {delivered.run_id} {delivered.branch} {delivered.base}"
    shown = delivered.cli.here(monkeypatch, "show", delivered.run_id, "--json")
    assert shown.returncode == 0, shown.describe()
    assert json.loads(shown.stdout)["workspace"] == {
        "kind": "in-place",
        "path": str(delivered.worktree.resolve()),
        "base_commit": delivered.base,
        "branch": delivered.branch,
        "head_commit": commit,
        "pull_request_url": URL,
    }
    entries = delivered.cli.here(monkeypatch, "logs", delivered.run_id, "--view", "acp").json_lines()
    methods = [entry["method"] for entry in entries]
    at = methods.index("_baton/branch_created")
    assert methods[at : at + 4] == ["_baton/branch_created", "_baton/branch_pushed", "_baton/pull_request",
                                    "_baton/status"]  # fmt: skip
    assert entries[at + 2]["payload"]["params"]["url"] == URL
    pretty = delivered.cli.here(monkeypatch, "logs", delivered.run_id, "--pretty")
    assert f"⎇ branch {delivered.branch} {commit[:12]} · 1 files, +1 -0" in pretty.stdout


def test_a_run_that_changed_nothing_makes_no_branch(delivered: Delivered, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = delivered.plain_run_id
    entries = delivered.cli.here(monkeypatch, "logs", run_id, "--view", "acp").json_lines()
    (note,) = [entry for entry in entries if entry["method"] == "_baton/no_branch"]
    assert note["payload"]["params"]["reason"] == "no_changes"
    made = delivered.cli.here(monkeypatch, "branch", run_id)
    assert made.returncode == 0 and made.stdout == f"run {run_id} changed nothing: no branch made\n"
    shown = json.loads(delivered.cli.here(monkeypatch, "show", run_id, "--json").stdout)
    assert shown["workspace"]["branch"] is None


def test_an_existing_branch_is_refused_and_another_name_is_made_after_the_run(
    delivered: Delivered, monkeypatch: pytest.MonkeyPatch
) -> None:
    again = delivered.cli.here(monkeypatch, "branch", delivered.run_id, "--json")
    assert again.returncode == 3 and json.loads(again.stderr)["error"]["code"] == "branch_exists"
    monkeypatch.setenv("PATH", os.environ["PATH"])
    other = delivered.cli.here(monkeypatch, "branch", delivered.run_id, "--name", "baton/second", "--json")
    assert other.returncode == 0, other.describe()
    body = json.loads(other.stdout)
    assert body["branch"] == "baton/second" and body["pushed_to"] == "origin" and body["pull_request_url"] == URL
    assert git(delivered.user, "rev-parse", "baton/second^{tree}") == git(
        delivered.user, "rev-parse", f"{delivered.branch}^{{tree}}"
    )
    # Made after the run ended: logged after its final status, under its lock; no runner event.
    entries = delivered.cli.here(monkeypatch, "logs", delivered.run_id, "--view", "acp").json_lines()
    finals = [i for i, entry in enumerate(entries) if entry["method"] == "_baton/status"]
    assert entries[-3]["method"] == "_baton/branch_created" and len(entries) - 3 > finals[-1]
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    events = delivered.cli.here(monkeypatch, "logs", delivered.run_id).json_lines()
    assert events[-1]["type"] == "task.finished"
    failed = delivered.cli.here(monkeypatch, "push", delivered.run_id, "--remote", "nowhere", "--json")
    assert failed.returncode == 3 and json.loads(failed.stderr)["error"]["code"] == "push_failed"
    assert "nowhere" in json.loads(failed.stderr)["error"]["message"]


def test_merge_dirty_conflict_fast_forward_and_merge_commit(
    delivered: Delivered, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, run_id = delivered.user, delivered.run_id
    commit = git(user, "rev-parse", "baton/second").strip()  # the run's latest branch

    def merge(*args: str) -> Invocation:
        return delivered.cli.here(monkeypatch, "merge", run_id, *args, "--json")

    (user / "hello.txt").write_text("the user's own hello\n")  # untracked, in a file the merge adds
    before = hash_every_file(user)
    dirty = merge()
    assert dirty.returncode == 3 and json.loads(dirty.stderr)["error"]["code"] == "workspace_dirty"
    assert hash_every_file(user) == before
    (user / "hello.txt").unlink()

    git(user, "checkout", "-q", "-b", "conflicting")
    (user / "hello.txt").write_text("theirs\n")
    git(user, "add", "hello.txt")
    git(user, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "conflicting hello")
    before = hash_every_file(user)
    conflict = merge()
    assert conflict.returncode == 3, conflict.describe()
    error = json.loads(conflict.stderr)["error"]
    assert error["code"] == "merge_conflict" and error["details"]["paths"] == ["hello.txt"]
    assert changed_outside(before, hash_every_file(user)) == []

    git(user, "checkout", "-q", "main")
    forward = merge()
    assert forward.returncode == 0, forward.describe()
    expected = {"branch": "baton/second", "into": "main", "kind": "fast-forward", "commit": commit}
    assert json.loads(forward.stdout) == {**expected, "before": delivered.base}
    assert git(user, "rev-parse", "HEAD").strip() == commit and (user / "hello.txt").read_text() == "hello from baton\n"
    assert git(user, "status", "--porcelain") == ""

    git(user, "checkout", "-q", "-b", "feature", delivered.base)
    (user / "other.txt").write_text("the user's work\n")
    git(user, "add", "other.txt")
    git(user, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "other work")
    joined = merge()
    assert joined.returncode == 0, joined.describe()
    assert json.loads(joined.stdout)["kind"] == "merge"
    assert git(user, "rev-parse", "HEAD^2").strip() == commit
    assert sorted(git(user, "ls-files").split()) == ["README.md", "hello.txt", "notes.txt", "other.txt"]
    entries = delivered.cli.here(monkeypatch, "logs", run_id, "--view", "acp").json_lines()
    merged = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/branch_merged"]
    assert [(note["into"], note["kind"]) for note in merged] == [("main", "fast-forward"), ("feature", "merge")]


def test_over_http(delivered: Delivered) -> None:
    settings = Settings.load({"BATON_HOME": str(delivered.cli.home), "PATH": os.environ.get("PATH", "")})
    with running_server(settings) as server, httpx.Client(base_url=server.base_url, headers=server.headers()) as client:
        path = f"/v1/runs/{delivered.run_id}"
        made = client.post(f"{path}/branch", json={"name": "baton/over-http"})
        assert made.status_code == 200, made.text
        assert made.json()["branch"] == "baton/over-http" and made.json()["files_changed"] == 1
        taken = client.post(f"{path}/branch", json={"name": "baton/over-http"})
        assert taken.status_code == 409 and taken.json()["error"]["code"] == "branch_exists"
        pushed = client.post(f"{path}/push", json={"remote": "origin"})
        assert pushed.status_code == 200 and pushed.json()["pushed_to"] == "origin"
        refused = client.post(f"{path}/push", json={"remote": "nowhere"})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "push_failed"
        merged = client.post(f"{path}/merge", json={"into": "release-none"})
        assert merged.status_code == 400 and merged.json()["error"]["code"] == "invalid_argument"
        shown = client.get(path).json()
        assert shown["workspace"]["branch"] == "baton/over-http" and shown["workspace"]["pull_request_url"] == URL
        missing = client.post("/v1/runs/run_nope/branch")
        assert missing.status_code == 404
        document = client.get("/openapi.json").json()
        for name in ("branch", "push", "merge"):
            assert "post" in document["paths"][f"/v1/runs/{{run_id}}/{name}"]
