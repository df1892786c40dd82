"""The sandbox end to end: the agent's own Bash tool tries to get out, through the console script.

The user's home, ``BATON_HOME`` and the repository are laid out as on a workstation (the
repository and ``BATON_HOME`` under the home directory, the run's agent home inside
``BATON_HOME``), so the binds that make the run work sit right beside what must stay invisible.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.conftest import make_git_repo

from baton.sandbox.bwrap import BWRAP_VARIABLE, containment

pytestmark = [pytest.mark.claude, pytest.mark.timeout(240)]
SCRIPTED = ("--scenario", "bash-prompt", "--mode", "acceptEdits", "--allow", "Bash")
needs_bwrap = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot make namespaces here")


def _workstation(tmp_path: Path) -> tuple[BatonCLI, Path, Path]:
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- SECRET-KEY\n")
    (home / ".bashrc").write_text("# the user's own\n")
    (home / "outside").mkdir()
    baton = BatonCLI(home / ".local" / "share" / "baton")
    baton.env["HOME"] = str(home)
    repo = make_git_repo(home / "src" / "repo", {"README.md": "hi\n"})
    (repo / "escape").symlink_to(home / "outside")
    return baton, home, repo


@needs_bwrap
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_the_agents_own_bash_cannot_get_out(tmp_path: Path, agent: str) -> None:
    baton, home, repo = _workstation(tmp_path)
    attempts = "; ".join(
        [
            f"cat {home}/.ssh/id_ed25519",
            f"echo evil >> {home}/.bashrc",
            f"cat {baton.home}/baton.db",
            "echo evil > ../beside.txt",
            "echo evil > escape/planted.txt",
            "echo inside > inside.txt",
            "echo ATTEMPTS-DONE",
        ]
    )
    done = baton("run", attempts, "--repo", str(repo), "--agent", agent, *SCRIPTED)
    assert done.returncode == 0, done.describe()
    assert "ATTEMPTS-DONE" in done.stdout, done.describe()
    assert "SECRET-KEY" not in done.stdout
    assert (home / ".bashrc").read_text() == "# the user's own\n"
    assert not (home / "src" / "beside.txt").exists() and not (home / "outside" / "planted.txt").exists()
    assert (repo / "inside.txt").read_text() == "inside\n"
    # The refusals are the commands' own errors, shown to the model and the human alike.
    assert "No such file or directory" in done.stdout or "Read-only file system" in done.stdout, done.describe()
    (sandbox,) = baton.notes("_baton/sandbox")
    assert sandbox["mode"] == "bwrap" and sandbox["containment"] == "pid_namespace"
    assert str(repo) in sandbox["writable"]
    assert not any(str(home / ".ssh") in path or path == str(home) for path in sandbox["read_only"])


@needs_bwrap
def test_mounts_and_sandbox_none_are_the_runs_own_and_baton_show_says_so(tmp_path: Path) -> None:
    baton, home, repo = _workstation(tmp_path)
    shared = home / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("NOTES-READ\n")
    done = baton("run", f"cat {shared}/notes.txt", "--repo", str(repo), *SCRIPTED, "--mount-ro", str(shared))
    assert done.returncode == 0 and "NOTES-READ" in done.stdout, done.describe()
    run_id = baton.notes("_baton/run_started")[0]["run_id"]
    assert baton.notes("_baton/run_started")[0]["mount_ro"] == [str(shared)]
    shown = baton("show", str(run_id))
    assert "sandbox:" in shown.stdout and "bwrap (bubblewrap" in shown.stdout, shown.describe()
    body = json.loads(baton("show", str(run_id), "--json").stdout)
    assert body["sandbox"]["read_only"].count(str(shared)) == 1
    none = baton("run", f"cat {home}/.ssh/id_ed25519", "--repo", str(repo), *SCRIPTED, "--sandbox", "none")
    assert none.returncode == 0 and "SECRET-KEY" in none.stdout, none.describe()  # asked for: everything visible
    refused = baton("run", "x", "--repo", str(repo), *SCRIPTED, "--mount-rw", "relative/path")
    assert refused.returncode == 2 and "invalid_argument" in refused.stderr, refused.describe()


def test_without_bubblewrap_the_run_says_containment_unavailable(tmp_path: Path) -> None:
    baton, _home, repo = _workstation(tmp_path)
    baton.env[BWRAP_VARIABLE] = str(tmp_path / "no-such-bwrap")
    done = baton("run", "echo uncontained", "--repo", str(repo), *SCRIPTED)
    assert done.returncode == 0, done.describe()
    (sandbox,) = baton.notes("_baton/sandbox")
    assert sandbox["code"] == "containment_unavailable" and sandbox["containment"] == "none"
    assert "not installed" in str(sandbox["message"])
    refused = baton("run", "x", "--repo", str(repo), *SCRIPTED, "--sandbox", "bwrap")
    assert refused.returncode == 3 and "sandbox_unavailable" in refused.stderr, refused.describe()
    agents = baton("agents")
    assert "containment_unavailable" in agents.stdout, agents.describe()
    listed = json.loads(baton("agents", "--json").stdout)
    assert all(agent["containment"]["code"] == "containment_unavailable" for agent in listed)
