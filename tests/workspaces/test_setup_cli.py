"""The workspace's setup as the terminal shows it: ``baton run``'s live view (the same renderer as
``baton logs --pretty``), its runner events in ``--json``, and ``baton show``; a failed setup's
message says its error code once; a skipped ``.baton/setup`` says how to have it run. Real
Claude Code on baton's scripted model, real git, the console script in a subprocess."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.conftest import make_git_repo

pytestmark = pytest.mark.claude

RUN = ("--scenario", "write-prompt-file", "--mode", "acceptEdits", "--workspace", "worktree")
RUN_ID = re.compile(r"\brun (run_[0-9a-z]+)\s*$", re.M)


def _cli(tmp_path: Path) -> BatonCLI:
    cli = BatonCLI(tmp_path / "home")
    cli.env["BATON_WORKSPACE"] = "worktree"
    return cli


@pytest.mark.slow(seconds=20)
def test_the_live_view_and_the_events_show_the_setup_and_baton_show_how_it_ended(tmp_path: Path, repo: Path) -> None:
    cli = _cli(tmp_path)
    setup = "echo installing; echo 'two [bold]lines[/bold]' >&2"
    shown = cli("run", "a.txt", "--repo", str(repo), *RUN, "--setup", setup)
    assert shown.returncode == 0, shown.describe()
    out = shown.stdout
    assert f"⚙ setup (--setup) {setup}" in out, out
    assert "│ installing" in out and "│ two [bold]lines[/bold]" in out  # stderr too, as text
    assert re.search(r"setup ok \(\d+\.\d s\)", out), out
    assert out.index("setup ok") < out.index("baton run") < out.index("■ finished")  # before the task starts
    [run_id] = RUN_ID.findall(out)

    as_json = cli("run", "b.txt", "--repo", str(repo), *RUN, "--setup", "echo one; echo two", "--json")
    assert as_json.returncode == 0, as_json.describe()
    stream = as_json.json_lines()
    types = [event["type"] for event in stream]
    assert types[:5] == ["setup.started", "setup.output", "setup.output", "setup.finished", "task.started"], types
    assert stream[0]["data"] == {"source": "option", "command": "echo one; echo two"}
    assert [event["data"]["text"] for event in stream[1:3]] == ["one", "two"]
    finished = stream[3]["data"]
    assert finished["status"] == "finished" and finished["exit_code"] == 0 and finished["output_lines_omitted"] == 0
    assert isinstance(finished["duration_ms"], int) and finished["duration_ms"] >= 0

    show = cli("show", run_id)
    assert re.search(r"^setup:\s+finished \(exit 0\) in \d+\.\d s$", show.stdout, re.M), show.describe()
    show_json = cli("show", stream[0]["run_id"], "--json").json_lines()[0]
    assert show_json["setup"]["status"] == "finished" and show_json["setup"]["exit_code"] == 0


@pytest.mark.slow(seconds=15)
def test_a_failed_setup_says_its_code_once(tmp_path: Path, repo: Path) -> None:
    cli = _cli(tmp_path)
    failed = cli("run", "a.txt", "--repo", str(repo), *RUN, "--setup", "echo about to fail; exit 3")
    assert failed.returncode != 0, failed.describe()
    both = failed.stdout + failed.stderr
    assert "│ about to fail" in failed.stdout and "setup failed (exit 3)" in failed.stdout, failed.describe()
    assert "■ failed workspace_setup_failed: the setup (echo about to fail; exit 3) exited 3: about to fail" in both
    assert both.count("workspace_setup_failed") == 1, both  # not "workspace_setup_failed: workspace_setup_failed: …"
    [run_id] = RUN_ID.findall(failed.stdout)
    body = cli("show", run_id, "--json").json_lines()[0]
    assert body["error_code"] == "workspace_setup_failed"
    assert body["error_message"] == "the setup (echo about to fail; exit 3) exited 3: about to fail"
    assert body["setup"] == {"status": "failed", "exit_code": 3, "duration_ms": body["setup"]["duration_ms"]}
    events = cli("logs", run_id, "--json").json_lines()
    assert [event["type"] for event in events] == ["setup.started", "setup.output", "setup.finished", "task.failed"]
    assert events[-1]["data"]["message"] == body["error_message"]


@pytest.mark.slow(seconds=15)
def test_a_skipped_setup_says_how_to_trust_the_repository(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "untrusted", {".baton/setup": "echo never\n", "README.md": "# r\n"})
    cli = _cli(tmp_path)
    ran = cli("run", "a.txt", "--repo", str(repo), *RUN)
    assert ran.returncode == 0, ran.describe()
    config = tmp_path / "home" / "baton.toml"
    hint = (
        f'to run it, trust the repository: add "{repo.resolve()}" to trusted under [workspace] in {config}; '
        "or give the run a setup command yourself: --setup CMD"
    )
    assert f"⚠ setup skipped: .baton/setup not run: {repo.resolve()} is not a trusted repository" in ran.stdout
    assert f"  hint: {hint}" in ran.stdout, ran.stdout
    assert "never" not in ran.stdout
    [run_id] = RUN_ID.findall(ran.stdout)
    show = cli("show", run_id)
    assert re.search(r"^setup:\s+skipped: \.baton/setup not run: .* is not a trusted repository", show.stdout, re.M)
    assert f"\nhint:              {hint}\n" in show.stdout, show.stdout
    assert cli("show", run_id, "--json").json_lines()[0]["setup"]["hint"] == hint
    pretty = cli("logs", run_id, "--pretty")
    assert f"  hint: {hint}" in pretty.stdout, pretty.describe()
    # Trusted as the hint says: the script runs.
    config.write_text(f'[workspace]\ntrusted = ["{repo.resolve()}"]\n')
    trusted = cli("run", "b.txt", "--repo", str(repo), *RUN)
    assert trusted.returncode == 0 and "│ never" in trusted.stdout and "setup skipped" not in trusted.stdout
