"""Making workspaces with real git, without an agent (baton.workspaces): the kind a repository
gets, worktrees at a base, carried changes, ``.baton/worktree-include``, clones through the
mirror cache, submodules, ports — and the user's repository byte-identical throughout."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from tests.conftest import make_git_repo
from tests.workspaces.conftest import GIT, fingerprint, git

from baton.config import Settings
from baton.errors import UsageError, WorkspaceError
from baton.sandbox.bwrap import containment
from baton.sandbox.plan import plan_sandbox
from baton.workspaces.create import make_workspace, plan_workspace, recreate_workspace
from baton.workspaces.mirror import mirror_path
from baton.workspaces.ports import PORT_BLOCK, claim_ports, release_ports

needs_bwrap = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot make namespaces here")


def _make(settings: Settings, repo: str | Path, run_id: str, **asked: object) -> tuple[Path, dict[str, object]]:
    plan = plan_workspace(settings, str(repo), kind=asked.pop("kind", None), **asked)  # type: ignore[arg-type]
    record = make_workspace(settings, plan, run_id)
    return Path(record.path), record.to_json()


def test_a_local_repository_gets_a_detached_worktree_at_its_head_and_nothing_of_it_changes(
    ws_settings: Settings, repo: Path
) -> None:
    before = fingerprint(repo)
    path, record = _make(ws_settings, repo, "run_a")
    assert record["kind"] == "worktree" and record["repo"] == str(repo.resolve())
    assert path == ws_settings.home / "workspaces" / "run_a"
    assert record["base_commit"] == git(repo, "rev-parse", "HEAD") == git(path, "rev-parse", "HEAD")
    assert git(path, "symbolic-ref", "-q", "--short", "HEAD", check=False) == ""  # detached
    assert (path / "README.md").read_text() == "# a repository\n"
    assert str(path) in git(repo, "worktree", "list")
    assert fingerprint(repo) == before


def test_the_kind_follows_the_repository_unless_asked(ws_settings: Settings, tmp_path: Path, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert plan_workspace(ws_settings, str(plain), kind=None).kind == "in-place"
    assert plan_workspace(ws_settings, str(repo), kind="in-place").kind == "in-place"
    assert plan_workspace(ws_settings, str(repo / "."), kind=None).kind == "worktree"
    (repo / "sub").mkdir()
    assert plan_workspace(ws_settings, str(repo / "sub"), kind=None).kind == "in-place"
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    assert plan_workspace(ws_settings, str(bare), kind=None).kind == "clone"
    assert plan_workspace(ws_settings, f"file://{bare}", kind=None).kind == "clone"
    configured = Settings.load({"BATON_HOME": str(ws_settings.home), "BATON_WORKSPACE": "in-place"})
    assert plan_workspace(configured, str(repo), kind=None).kind == "in-place"


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ({"kind": "worktree", "repo": "plain"}, "is not a git repository"),
        ({"kind": "worktree", "repo": "bare"}, "is a bare repository (no working tree): use --workspace clone"),
        ({"kind": "in-place", "repo": "bare"}, "is a bare repository"),
        ({"kind": "worktree", "repo": "url"}, "is a URL: it can only be cloned"),
        ({"kind": "in-place", "base": "main"}, "--base needs a worktree or a clone"),
        ({"kind": "clone", "include_uncommitted": True}, "--include-uncommitted applies to a worktree"),
        ({"kind": "somewhere"}, "--workspace must be one of worktree, clone, in-place"),
    ],
)
def test_what_a_repository_cannot_have_is_refused_before_anything_is_made(
    ws_settings: Settings, tmp_path: Path, repo: Path, asked: dict[str, object], message: str
) -> None:
    (tmp_path / "plain").mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(tmp_path / "bare")], check=True)
    target = {"plain": tmp_path / "plain", "bare": tmp_path / "bare", "url": "https://example.invalid/r.git"}
    where = target.get(str(asked.pop("repo", "")), repo)
    with pytest.raises(UsageError) as caught:
        plan_workspace(ws_settings, str(where), kind=asked.pop("kind"), **asked)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_argument" and message in caught.value.message
    assert not (ws_settings.home / "workspaces").exists()


def test_a_base_that_does_not_exist_is_ref_not_found_and_leaves_nothing(ws_settings: Settings, repo: Path) -> None:
    before = fingerprint(repo)
    with pytest.raises(WorkspaceError) as caught:
        _make(ws_settings, repo, "run_b", base="no-such-branch")
    assert caught.value.code == "ref_not_found" and "--base no-such-branch" in caught.value.message
    assert not (ws_settings.home / "workspaces" / "run_b").exists()
    assert fingerprint(repo) == before


def test_a_worktree_starts_at_its_base(ws_settings: Settings, repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    (repo / "later.txt").write_text("later\n")
    git(repo, "add", "later.txt")
    git(repo, "commit", "-qm", "later")
    path, record = _make(ws_settings, repo, "run_c", base=first)
    assert record["base_commit"] == first and not (path / "later.txt").exists()
    path, record = _make(ws_settings, repo, "run_d", base="main")
    assert (path / "later.txt").is_file()


def test_include_uncommitted_carries_staged_unstaged_and_new_files_without_touching_the_users_index(
    ws_settings: Settings, tmp_path: Path
) -> None:
    repo = make_git_repo(
        tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n", "gone.txt": "gone\n", ".gitignore": "*.log\n"}
    )
    (repo / "a.txt").write_text("a staged\n")
    git(repo, "add", "a.txt")
    (repo / "a.txt").write_text("a staged, then changed\n")  # staged and unstaged
    (repo / "b.txt").write_text("b unstaged\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "noise.log").write_text("ignored\n")
    (repo / "gone.txt").unlink()
    before = fingerprint(repo)
    status = git(repo, "status", "--porcelain")
    path, record = _make(ws_settings, repo, "run_e", include_uncommitted=True)
    assert fingerprint(repo) == before
    assert git(path, "status", "--porcelain") == status
    assert git(path, "diff", "--cached", "--", "a.txt").count("+a staged") == 1
    assert (path / "a.txt").read_text() == "a staged, then changed\n"
    assert (path / "new.txt").read_text() == "new\n" and not (path / "noise.log").exists()
    assert not (path / "gone.txt").exists()
    assert record["carried"] == {
        "staged": ["a.txt"],
        "unstaged": ["a.txt", "b.txt", "gone.txt"],
        "untracked": ["new.txt"],
    }


def test_worktree_include_copies_the_listed_untracked_files(ws_settings: Settings, tmp_path: Path) -> None:
    repo = make_git_repo(
        tmp_path / "repo", {".gitignore": ".env\nbuild/\n", ".baton/worktree-include": ".env\n# not build/\n"}
    )
    (repo / ".env").write_text("TOKEN=local\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.bin").write_text("big\n")
    before = fingerprint(repo)
    path, record = _make(ws_settings, repo, "run_f")
    assert (path / ".env").read_text() == "TOKEN=local\n"
    assert not (path / "build").exists()
    assert record["included"] == [".env"]
    assert fingerprint(repo) == before


def test_submodules_are_recorded_not_checked_out(ws_settings: Settings, tmp_path: Path) -> None:
    library = make_git_repo(tmp_path / "library", {"lib.txt": "lib\n"})
    repo = make_git_repo(tmp_path / "repo", {"README.md": "app\n"})
    subprocess.run(
        [
            *GIT,
            "-C",
            str(repo),
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            str(library),
            "vendor/lib",
        ],
        check=True,
    )
    git(repo, "commit", "-qm", "a submodule")
    before = fingerprint(repo)
    path, record = _make(ws_settings, repo, "run_g")
    assert record["submodules"] == ["vendor/lib"]
    assert (path / "vendor" / "lib").is_dir() and not any((path / "vendor" / "lib").iterdir())
    assert fingerprint(repo) == before


def test_a_url_is_cloned_through_the_mirror_and_keeps_the_url_as_origin(
    ws_settings: Settings, tmp_path: Path, repo: Path
) -> None:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    git(repo, "tag", "v1")
    url = f"file://{bare}"
    path, record = _make(ws_settings, url, "run_h")
    mirror = mirror_path(ws_settings.home, url)
    assert record["kind"] == "clone" and record["repo"] == url and record["mirror"] == str(mirror)
    assert git(path, "remote", "get-url", "origin") == url
    assert (path / ".git" / "objects" / "info" / "alternates").read_text().strip() == str(mirror / "objects")
    assert record["base_commit"] == git(repo, "rev-parse", "HEAD")
    # The upstream moves on: the next clone fetches the mirror first.
    pushed = tmp_path / "pusher"
    subprocess.run(["git", "clone", "-q", url, str(pushed)], check=True)
    (pushed / "two.txt").write_text("two\n")
    git(pushed, "add", "two.txt")
    git(pushed, "commit", "-qm", "two")
    git(pushed, "push", "-q", "origin", "main")
    second, again = _make(ws_settings, url, "run_i")
    assert (second / "two.txt").is_file() and again["mirror"] == str(mirror)
    older, at_ref = _make(ws_settings, url, "run_j", ref=record["base_commit"])
    assert not (older / "two.txt").exists() and at_ref["ref"] == record["base_commit"]


def test_the_mirror_is_fetched_only_when_the_remote_has_moved_or_the_commit_is_missing(
    ws_settings: Settings, tmp_path: Path, repo: Path
) -> None:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    url = f"file://{bare}"
    _, first = _make(ws_settings, url, "run_m1")
    mirror = mirror_path(ws_settings.home, url)
    fetched = mirror / "FETCH_HEAD"  # written by a fetch, never by the mirror's clone
    # The remote's refs are the mirror's: no fetch, and the default branch is the remote's tip.
    _, same = _make(ws_settings, url, "run_m2")
    assert not fetched.exists() and same["base_commit"] == first["base_commit"]
    # The remote moves on: a branch name resolves to its new tip, fetched.
    pushed = tmp_path / "pusher"
    subprocess.run(["git", "clone", "-q", url, str(pushed)], check=True)
    (pushed / "two.txt").write_text("two\n")
    git(pushed, "add", "two.txt")
    git(pushed, "commit", "-qm", "two")
    git(pushed, "push", "-q", "origin", "main")
    moved, at_branch = _make(ws_settings, url, "run_m3", ref="main")
    assert fetched.exists() and (moved / "two.txt").is_file()
    assert at_branch["base_commit"] == git(pushed, "rev-parse", "HEAD")
    # A commit the mirror holds needs no remote at all (a run continued at its base commit).
    bare.rename(tmp_path / "gone.git")
    older, at_commit = _make(ws_settings, url, "run_m4", ref=first["base_commit"])
    assert at_commit["base_commit"] == first["base_commit"] and not (older / "two.txt").exists()
    # A branch needs the remote's current tip: without the remote it is clone_failed, not a stale tip.
    with pytest.raises(WorkspaceError) as caught:
        _make(ws_settings, url, "run_m5", ref="main")
    assert caught.value.code == "clone_failed"


def test_a_url_that_cannot_be_cloned_is_clone_failed(ws_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as caught:
        _make(ws_settings, f"file://{tmp_path}/missing.git", "run_k")
    assert caught.value.code == "clone_failed"
    assert not (ws_settings.home / "workspaces" / "run_k").exists()


def test_a_removed_worktree_is_made_again_at_its_base(ws_settings: Settings, repo: Path) -> None:
    path, raw = _make(ws_settings, repo, "run_l")
    from baton.workspaces.record import workspace_of
    from baton.workspaces.worktree import remove_worktree

    remove_worktree(repo, path)
    assert not path.exists() and str(path) not in git(repo, "worktree", "list")
    found = workspace_of({"workspace": raw})
    assert found is not None
    assert recreate_workspace(ws_settings, found, "run_l") == path
    assert git(path, "rev-parse", "HEAD") == raw["base_commit"]


def test_each_run_gets_its_own_block_of_free_ports(tmp_path: Path) -> None:
    first, second = claim_ports(tmp_path, "run_1"), claim_ports(tmp_path, "run_2")
    assert abs(first - second) >= PORT_BLOCK
    assert claim_ports(tmp_path, "run_1") == first  # its own claim again
    release_ports(tmp_path, "run_1")
    assert not (tmp_path / "ports" / str(first)).exists() and (tmp_path / "ports" / str(second)).exists()


def test_a_port_left_in_time_wait_counts_as_free(tmp_path: Path) -> None:
    """A dev server of an earlier run closed its connections first: its port waits in
    ``TIME_WAIT``, which servers setting ``SO_REUSEADDR`` do not mind; the block is still given."""
    probe = tmp_path / "probe"
    base = claim_ports(probe, "run_tw")  # the block this run id hashes to (nothing else claimed)
    with socket.create_server(("127.0.0.1", base)) as server:
        client = socket.create_connection(("127.0.0.1", base))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end of the connection waits
        client.close()
    with socket.socket() as plain, pytest.raises(OSError):  # without SO_REUSEADDR it still looks taken
        plain.bind(("127.0.0.1", base))
    assert claim_ports(tmp_path, "run_tw") == base


def test_no_block_of_ports_left_is_a_workspace_error(tmp_path: Path) -> None:
    folder = tmp_path / "ports"
    folder.mkdir()
    for base in range(20000, 50000, PORT_BLOCK):
        (folder / str(base)).write_text("run_other\n")
    with pytest.raises(WorkspaceError) as raised:
        claim_ports(tmp_path, "run_new")
    assert raised.value.code == "workspace_failed" and "baton gc" in str(raised.value)


@needs_bwrap
def test_a_commit_inside_a_worktree_workspace_works_under_the_sandbox(ws_settings: Settings, repo: Path) -> None:
    before = fingerprint(repo)
    path, _ = _make(ws_settings, repo, "run_m")
    agent_home = ws_settings.run_dir("run_m") / "agent-home"
    plan = plan_sandbox("bwrap", workspace=path, agent_home=agent_home, baton_home=ws_settings.home)
    script = (
        "echo change > change.txt && git add change.txt && "
        "git -c user.name=agent -c user.email=agent@baton.invalid commit -qm 'from the sandbox' && echo COMMITTED;"
        f" echo x > {repo}/.git/refs/heads/main || echo REFS-READ-ONLY"
    )
    done = subprocess.run(plan.wrap(["sh", "-c", script], path), capture_output=True, text=True, timeout=30)
    assert "COMMITTED" in done.stdout and "REFS-READ-ONLY" in done.stdout, done
    assert git(path, "log", "-1", "--format=%s") == "from the sandbox"
    assert fingerprint(repo) == before
