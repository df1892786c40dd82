"""The live view around gates and endings, as a human at a terminal sees it (the real Claude
Code, the scripted model): a gate is shown once, by its question; a park is not a finished
turn and the question is asked again below it; a denial is shown as one; a cancelled run ends
``■ cancelled``; the closing line counts the run's whole time."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.cli._terminal import run_in_terminal

pytestmark = [pytest.mark.claude, pytest.mark.timeout(180)]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    return _ANSI.sub("", text).replace("\r\n", "\n")


def closing_seconds(line: str) -> float:
    found = re.search(r" · (\d+\.\d) s · run ", line)
    assert found, line
    return float(found[1])


def test_a_parked_gate_is_asked_once_and_again_below_the_park(baton: BatonCLI, repo: Path) -> None:
    args = ("run", "go", "--repo", str(repo), "--scenario", "gate-park")
    replies = [("⏸ parked", lambda: None), ("approve?", "y")]  # answered once asked again below the park
    session = run_in_terminal(baton, args, replies, env={"BATON_GATE_GRACE_SECONDS": "1"})
    shown = plain(session.shown)
    assert session.returncode == 0 and session.answered == 2, session.describe()
    assert shown.count("? gate") == 1, shown
    before_park, _, after_park = shown.partition("⏸ parked")
    assert "turn finished" not in before_park, shown
    assert "\n⏸ parked" in shown and "approve? [y]es / [n]o / [e]dit / [a]lways: " in after_park, shown
    assert "a (always) = allow Bash(touch approved.txt:*) for the rest of this run" in shown
    assert "for this session" not in shown
    assert "✓ gate" in shown
    closing = shown.rstrip().splitlines()[-1]
    assert closing.startswith("■ finished (end_turn)"), closing
    assert closing_seconds(closing) >= 1.0, closing  # the grace period before the park, at least


def test_a_denial_is_shown_as_one(baton: BatonCLI, repo: Path) -> None:
    args = ("run", "go", "--repo", str(repo), "--scenario", "needs-approval")
    session = run_in_terminal(baton, args, [("approve?", "n")])
    shown = plain(session.shown)
    assert session.returncode == 0 and session.answered == 1, session.describe()
    assert "✗ gate" in shown and "deny (denied at the terminal)" in shown, shown
    assert "✓ gate" not in shown


def test_a_cancelled_interactive_run_ends_cancelled_with_its_whole_time(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = baton.start("run", "first", "--repo", str(repo), "--scenario", "plain", "--interactive")
    try:
        _, process = started
        assert process.stdout is not None
        first = process.stdout.readline()
        run_id = first.split(" baton run ")[1].split()[0]
        for line in process.stdout:  # the first turn ends; the run waits for messages
            if line.startswith("turn finished"):
                break
        assert baton.here(monkeypatch, "cancel", run_id).returncode == 0
        ended = baton.finish(started, timeout=60)
    finally:
        baton.stop([started])
    assert ended.returncode == 5, ended.describe()
    closing = ended.stdout.rstrip().splitlines()[-1]
    assert closing.startswith("■ cancelled · "), closing
    events = baton.here(monkeypatch, "logs", run_id).json_lines()
    begun, finished = events[0], events[-1]
    assert (begun["type"], finished["type"]) == ("task.started", "task.finished")
    took = datetime.fromisoformat(finished["ts"]) - datetime.fromisoformat(begun["ts"])
    assert closing_seconds(closing) == round(took.total_seconds(), 1), (closing, took)
