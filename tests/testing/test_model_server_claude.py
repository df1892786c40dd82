"""The real Claude Code (bundled in claude-agent-sdk) against the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest

from baton.testing import ScriptedModelServer, copy_sample_repo

pytestmark = pytest.mark.claude

CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


@dataclass
class ClaudeRun:
    returncode: int
    messages: list[dict[str, Any]]

    @property
    def result(self) -> dict[str, Any]:
        (result,) = [message for message in self.messages if message["type"] == "result"]
        return result

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            block
            for message in self.messages
            if message["type"] == "user" and isinstance(message["message"]["content"], list)
            for block in message["message"]["content"]
            if block.get("type") == "tool_result"
        ]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def run_claude(server: ScriptedModelServer, cwd: Path, prompt: str, *args: str) -> ClaudeRun:
    home = cwd.parent / "home"
    home.mkdir(exist_ok=True)
    environment = {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": "sk-scripted-0123456789",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "PATH": os.environ["PATH"],
    }
    command = [str(CLAUDE), "-p", prompt, "--output-format", "stream-json", "--verbose", *args]
    done = subprocess.run(
        command,
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return ClaudeRun(done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()])


def test_write_and_run_writes_the_file_and_runs_the_command(workdir: Path) -> None:
    with ScriptedModelServer("write-and-run") as server:
        run = run_claude(server, workdir, "Create hello.txt and run echo hi", "--permission-mode", "acceptEdits")
    assert (workdir / "hello.txt").read_text() == "hello from baton\n"
    assert run.returncode == 0
    assert (run.result["subtype"], run.result["is_error"]) == ("success", False)
    assert run.result["result"] == "Created hello.txt and ran `echo hi`, which printed: hi"
    assert run.result["usage"]["input_tokens"] == 300  # three model calls of 100 tokens each
    scripted = [r for r in server.requests if r.scenario]
    assert [r.step for r in scripted] == [0, 1, 2]
    assert all(r.headers["x-api-key"] == "[redacted]" for r in server.requests)
    assert all(r.path == "/v1/messages?beta=true" and r.body["stream"] for r in scripted)


def test_an_overloaded_api_ends_the_run_with_an_error_result(workdir: Path) -> None:
    with ScriptedModelServer("api-error") as server:
        run = run_claude(server, workdir, "Run a step", "--permission-mode", "acceptEdits")
    assert run.returncode == 1
    assert (run.result["subtype"], run.result["is_error"]) == ("success", True)
    assert run.result["api_error_status"] == 529
    assert [r.step for r in server.requests if r.scenario] == [0, 1, 1]  # one retry


def test_the_demo_fixes_the_sample_repository(workdir: Path) -> None:
    copy_sample_repo(workdir)
    with ScriptedModelServer("demo") as server:
        run = run_claude(
            server,
            workdir,
            "Fix the failing test",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(node --test)",
        )
    assert run.result["is_error"] is False
    assert "return a + b;" in (workdir / "calc.js").read_text()
    first_test, second_test = (r for r in run.tool_results() if "# tests 2" in str(r["content"]))
    assert "# fail 1" in str(first_test["content"]) and first_test["is_error"] is True
    assert "# fail 0" in str(second_test["content"]) and not second_test.get("is_error")


def test_a_resumed_session_with_a_new_prompt_replays_the_scenario(workdir: Path) -> None:
    with ScriptedModelServer("needs-approval") as server:
        denied = run_claude(server, workdir, "Create approved.txt", "--permission-mode", "default")
        assert [d["tool_name"] for d in denied.result["permission_denials"]] == ["Bash"]
        assert not (workdir / "approved.txt").exists()
        resumed = run_claude(
            server,
            workdir,
            "The command is approved now; go on.",
            "--resume",
            denied.result["session_id"],
            "--allowedTools",
            "Bash(touch approved.txt)",
        )
    assert (workdir / "approved.txt").exists()
    assert resumed.result["is_error"] is False
    assert resumed.result["result"].startswith("The command finished. Tool result:")
    assert [r.step for r in server.requests if r.scenario] == [0, 1, 0, 1]
