"""The sandbox plan run for real: bubblewrap contains a command, confines its filesystem, and a
machine without bubblewrap gets ``containment_unavailable`` instead of a pretence."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from baton.agents.processes import run_process_ids
from baton.errors import RefusedError, UsageError
from baton.sandbox.bwrap import BWRAP_VARIABLE, containment
from baton.sandbox.plan import SandboxPlan, plan_sandbox

pytestmark = pytest.mark.timeout(60)
needs_bwrap = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot make namespaces here")


def _layout(root: Path) -> dict[str, Path]:
    home = root / "user"
    baton_home = home / ".local" / "share" / "baton"
    paths = {
        "home": home,
        "baton_home": baton_home,
        "agent_home": baton_home / "runs" / "run_x" / "agent-home",
        "workspace": home / "src" / "repo",
        "other_repo": home / "src" / "other",
    }
    for path in paths.values():
        path.mkdir(parents=True, exist_ok=True)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("SECRET-KEY\n")
    (baton_home / "baton.db").write_text("DATABASE\n")
    (paths["other_repo"] / "code.py").write_text("OTHER\n")
    return paths


def _plan(paths: dict[str, Path], mode: str | None = None, **extra: list[Path]) -> SandboxPlan:
    return plan_sandbox(
        mode,
        workspace=paths["workspace"],
        agent_home=paths["agent_home"],
        baton_home=paths["baton_home"],
        read_only=extra.get("read_only", []),
        writable=extra.get("writable", []),
    )


def _sh(plan: SandboxPlan, script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(plan.wrap(["sh", "-c", script], cwd), capture_output=True, text=True, timeout=30, check=False)


@needs_bwrap
def test_the_sandbox_shows_the_workspace_and_the_agent_home_and_nothing_else_of_the_user(tmp_path: Path) -> None:
    paths = _layout(tmp_path)
    plan = _plan(paths)
    assert plan.filesystem and plan.describe()["containment"] == "pid_namespace"
    done = _sh(
        plan,
        f"echo in > in.txt; echo home > {paths['agent_home']}/h.txt; cat {paths['home']}/.ssh/id_ed25519;"
        f" cat {paths['baton_home']}/baton.db; ls {paths['other_repo']}; echo x > {paths['home']}/.bashrc;"
        " echo x > ../beside.txt; echo x > /etc/x; echo tmp > /tmp/t && cat /tmp/t;"
        " tr '\\0' ' ' < /proc/1/cmdline; echo",
        paths["workspace"],
    )
    assert (paths["workspace"] / "in.txt").read_text() == "in\n"
    assert (paths["agent_home"] / "h.txt").read_text() == "home\n"
    assert "SECRET-KEY" not in done.stdout and "DATABASE" not in done.stdout and "code.py" not in done.stdout
    assert not (paths["home"] / ".bashrc").exists() and not (paths["home"] / "src" / "beside.txt").exists()
    assert not Path("/etc/x").exists() and not (tmp_path / "t").exists()
    assert "tmp\n" in done.stdout  # a private /tmp
    assert "bwrap" in done.stdout  # pid 1 of the namespace is bubblewrap
    assert done.stderr.count("No such file or directory") >= 3, done.stderr
    assert "Read-only file system" in done.stderr, done.stderr


@needs_bwrap
def test_a_symlink_planted_in_the_workspace_leads_nowhere(tmp_path: Path) -> None:
    paths = _layout(tmp_path)
    outside = paths["home"] / "outside"
    outside.mkdir()
    (paths["workspace"] / "escape").symlink_to(outside)
    done = _sh(_plan(paths), "echo x > escape/planted.txt", paths["workspace"])
    assert done.returncode != 0 and not (outside / "planted.txt").exists(), done


@needs_bwrap
def test_mounts_ro_and_rw_are_bound_at_their_own_paths(tmp_path: Path) -> None:
    paths = _layout(tmp_path)
    shared, scratch = paths["home"] / "shared", paths["home"] / "scratch"
    shared.mkdir()
    scratch.mkdir()
    (shared / "data.txt").write_text("DATA\n")
    plan = _plan(paths, read_only=[shared], writable=[scratch])
    done = _sh(plan, f"cat {shared}/data.txt; echo x > {shared}/no.txt; echo y > {scratch}/yes.txt", paths["workspace"])
    assert "DATA" in done.stdout and not (shared / "no.txt").exists() and (scratch / "yes.txt").exists()
    with pytest.raises(UsageError) as missing:
        _plan(paths, read_only=[tmp_path / "missing"])
    assert missing.value.code == "invalid_argument"


@needs_bwrap
def test_mode_none_is_contained_but_sees_everything(tmp_path: Path) -> None:
    paths = _layout(tmp_path)
    plan = _plan(paths, "none")
    assert not plan.filesystem and plan.contained
    done = _sh(plan, f"cat {paths['home']}/.ssh/id_ed25519; tr '\\0' ' ' < /proc/1/cmdline", paths["workspace"])
    assert "SECRET-KEY" in done.stdout and "bwrap" in done.stdout


@needs_bwrap
def test_what_a_killed_parent_started_dies_with_it(tmp_path: Path) -> None:
    """The parent (baton) is SIGKILLed: the kernel ends the namespace, grandchildren in sessions
    of their own included."""
    paths = _layout(tmp_path)
    holder = (
        "import subprocess, sys, time\n"
        "subprocess.Popen(sys.argv[1:], env={'BATON_RUN_ID': 'run_killed_parent', 'PATH': '/usr/bin:/bin'})\n"
        "time.sleep(60)\n"
    )
    argv = _plan(paths).wrap(["sh", "-c", "setsid sleep 50 & sleep 40 & wait"], paths["workspace"])
    parent = subprocess.Popen([sys.executable, "-c", holder, *argv])
    _wait_for(lambda: len(run_process_ids("run_killed_parent")) >= 3)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    _wait_for(lambda: not run_process_ids("run_killed_parent"), seconds=1.0)


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(), reason="needs root to become nobody")
@needs_bwrap
def test_an_unprivileged_user_is_contained_too() -> None:
    """As ``nobody`` (no capabilities; bubblewrap makes a user namespace), with the system Python
    and this checkout's ``src``: the probe, the filesystem sandbox, death with the parent."""
    root = Path(tempfile.mkdtemp(prefix="baton-nobody-"))  # pytest's own tmp is root's alone
    try:
        _as_nobody(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _as_nobody(root: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    script = (
        "import os, subprocess, sys, time\n"
        f"sys.path.insert(0, {str(src)!r})\n"
        "from pathlib import Path\n"
        "from baton.sandbox.plan import plan_sandbox\n"
        "root = Path(sys.argv[1])\n"
        "home = root / 'home'\n"
        "plan = plan_sandbox(None, workspace=root / 'ws', agent_home=home / 'agent', baton_home=home)\n"
        "print(plan.mode, flush=True)\n"
        "argv = plan.wrap(['sh', '-c', 'cat ' + str(root / 'secret') + '; echo ok > ok.txt; sleep 40'], root / 'ws')\n"
        "subprocess.Popen(argv, env={'BATON_RUN_ID': 'run_nobody', 'PATH': '/usr/bin:/bin'})\n"
        "time.sleep(60)\n"
    )
    (root / "ws").mkdir(parents=True)
    (root / "home").mkdir()
    (root / "secret").write_text("SECRET\n")
    (root / "secret").chmod(0o644)
    for path in (root, root / "ws", root / "home"):
        path.chmod(0o777)
    setpriv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    with subprocess.Popen(
        [*setpriv, "/usr/bin/python3", "-c", script, str(root)], stdout=subprocess.PIPE, text=True, cwd="/"
    ) as parent:
        assert parent.stdout is not None
        try:
            assert parent.stdout.readline().strip() == "bwrap"
            _wait_for(lambda: (root / "ws" / "ok.txt").exists() and bool(run_process_ids("run_nobody")))
        finally:
            os.kill(parent.pid, signal.SIGKILL)
    _wait_for(lambda: not run_process_ids("run_nobody"), seconds=1.0)


def test_without_bubblewrap_containment_is_unavailable_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BWRAP_VARIABLE, str(tmp_path / "no-bwrap"))
    found = containment()
    assert not found.available and "not installed" in (found.reason or "")
    paths = _layout(tmp_path)
    plan = _plan(paths)
    assert plan.mode == "none" and not plan.contained
    described = plan.describe()
    assert described["code"] == "containment_unavailable" and described["containment"] == "none"
    assert plan.wrap(["true"], paths["workspace"])[0] in (shutil.which("setpriv"), "true")
    with pytest.raises(RefusedError) as refused:
        _plan(paths, "bwrap")
    assert refused.value.code == "sandbox_unavailable"
    with pytest.raises(UsageError):
        _plan(paths, "docker")


def test_a_bubblewrap_that_cannot_make_namespaces_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a machine without user namespaces: bubblewrap runs, and refuses."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && echo "bubblewrap 0.8.0" && exit 0\n'
        'echo "bwrap: No permissions to create new namespace" >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv(BWRAP_VARIABLE, str(fake))
    found = containment()
    assert not found.available and "No permissions to create new namespace" in (found.reason or "")
    assert found.version == "bubblewrap 0.8.0"


def _wait_for(condition: object, seconds: float = 20.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        time.sleep(0.01)


@needs_bwrap
def test_a_command_named_through_a_system_link_runs(tmp_path: Path) -> None:
    """``/bin/sh`` (``/bin`` a link into ``/usr``) is already there: no second link is made."""
    paths = _layout(tmp_path)
    plan = _plan(paths).with_read_only([Path("/bin/sh"), Path(sys.executable)])
    done = subprocess.run(
        plan.wrap(["/bin/sh", "-c", "echo linked"], paths["workspace"]), capture_output=True, text=True
    )
    assert done.stdout == "linked\n", done.stderr


@needs_bwrap
def test_a_worktree_workspace_reads_its_repository_and_writes_only_objects(tmp_path: Path) -> None:
    """A workspace made by ``git worktree add``: git works in it (status, new objects); the
    repository's refs and its other worktrees stay read-only, so a commit's ref update fails."""
    paths = _layout(tmp_path)
    main = paths["home"] / "src" / "main"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(main)], check=True)
    subprocess.run([*git, "-C", str(main), "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    worktree = paths["home"] / "src" / "feature"
    subprocess.run([*git, "-C", str(main), "worktree", "add", "-q", "-b", "feature", str(worktree)], check=True)
    plan = plan_sandbox(None, workspace=worktree, agent_home=paths["agent_home"], baton_home=paths["baton_home"])
    assert str(main / ".git") in plan.describe()["read_only"]
    assert str(main / ".git" / "objects") in plan.describe()["writable"]
    script = (
        "git status --short && echo STATUS-OK; echo new > new.txt; git hash-object -w new.txt && echo OBJECT-OK;"
        f" echo x > {main}/.git/refs/heads/main || echo REFS-READ-ONLY; ls {main}/README 2>&1 | head -1"
    )
    done = _sh(plan, script, worktree)
    assert "STATUS-OK" in done.stdout and "OBJECT-OK" in done.stdout and "REFS-READ-ONLY" in done.stdout, done
