"""The setup's gate through the installed ``baton`` command: ``baton run --no-wait`` parks on an
untrusted repository's ``.baton/setup`` (``[workspace] untrusted_setup = "ask"``), ``baton gates``
shows the script, ``baton approve`` from another process, ``baton resume`` runs the setup and then
the agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.cli._terminal import run_in_terminal
from tests.conftest import make_git_repo

pytestmark = pytest.mark.claude

SCRIPT = "echo setting up\necho ran > made-by-setup.txt\n"


@pytest.mark.slow(seconds=30)
def test_run_parks_on_the_setup_gate_and_resume_after_approve_sets_up_first(
    baton: BatonCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n", ".baton/setup": SCRIPT})
    baton.home.mkdir(parents=True, exist_ok=True)
    (baton.home / "baton.toml").write_text('[workspace]\nuntrusted_setup = "ask"\n')
    baton.env["BATON_WORKSPACE"] = "worktree"
    args = ("--repo", str(repo), "--scenario", "write-prompt-file", "--mode", "acceptEdits", "--json")
    run = baton("run", "e.txt", *args, "--no-wait")
    assert run.returncode == 4, run.describe()
    events = run.json_lines()
    assert "gate.opened" in [event["type"] for event in events] and "task.finished" not in [e["type"] for e in events]
    run_id = events[0]["run_id"]
    [gate] = json.loads(baton.here(monkeypatch, "gates", "--status", "pending", "--json").stdout)
    assert gate["run_id"] == run_id and gate["tool_name"] == "baton_setup"
    assert gate["input"]["script"] == SCRIPT and gate["input"]["path"] == ".baton/setup"
    shown = json.loads(baton.here(monkeypatch, "show", run_id, "--json").stdout)
    workspace = Path(shown["workspace"]["path"])
    assert shown["status"] == "paused" and not (workspace / "made-by-setup.txt").exists()
    approved = baton("approve", gate["id"])
    assert approved.returncode == 0, approved.describe()
    resumed = baton("resume", run_id, "--scenario", "write-prompt-file", "--json")
    assert resumed.returncode == 0, resumed.describe()
    assert resumed.json_lines()[-1]["type"] == "task.finished"
    assert (workspace / "made-by-setup.txt").read_text() == "ran\n" and (workspace / "e.txt").is_file()
    statuses = [note["status"] for note in baton.notes("_baton/setup")]
    assert statuses[:2] == ["gated", "started"] and statuses[-1] == "finished"


@pytest.mark.slow(seconds=20)
def test_baton_run_at_a_terminal_shows_the_whole_script_and_approving_runs_it(
    baton: BatonCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n", ".baton/setup": SCRIPT})
    baton.home.mkdir(parents=True, exist_ok=True)
    (baton.home / "baton.toml").write_text('[workspace]\nuntrusted_setup = "ask"\n')
    baton.env["BATON_WORKSPACE"] = "worktree"
    args = ("run", "f.txt", "--repo", str(repo), "--scenario", "write-prompt-file", "--mode", "acceptEdits")
    session = run_in_terminal(baton, args, [("approve?", "y")])
    assert session.returncode == 0 and session.answered == 1, session.describe()
    assert "baton_setup" in session.shown and "echo setting up\r\n" in session.shown  # the script, verbatim
    assert "echo ran > made-by-setup.txt\r\n" in session.shown and "(approved at its gate)" in session.shown
    assert "[e]dit" not in session.shown and "[a]lways" not in session.shown  # it runs as shown, or not
    [gate] = json.loads(baton.here(monkeypatch, "gates", "--json").stdout)
    assert gate["status"] == "approved" and gate["decided_by"] == "terminal"
    assert gate["input"]["sha256"][:12] in session.shown
    shown = json.loads(baton.here(monkeypatch, "show", gate["run_id"], "--json").stdout)
    workspace = Path(shown["workspace"]["path"])
    assert (workspace / "made-by-setup.txt").read_text() == "ran\n" and (workspace / "f.txt").is_file()
