"""``baton agent-server`` through the console script, with the real Claude Code against the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.cli._baton_cli import BatonCLI, Invocation, Started, invoke_in_process
from tests.server._server import SseReader, make_key_pair, running_server, sign, wait_until

from baton.cli.agent_server import read_task_file
from baton.config import Settings
from baton.errors import UsageError
from baton.gates.ledger import GateLedger
from baton.store import Store
from baton.testing import ScriptedModelServer
from baton.testing._scenario import Scenario
from baton.testing.postgres import TemporaryPostgres

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-agent-server-0123456789"

# A Write, then a final answer the model takes 2 s to give: the run lasts long enough to watch it.
SLOW_WRITE = Scenario.from_dict(
    {
        "steps": [
            {
                "text": "Writing it.",
                "tools": [{"name": "Write", "input": {"file_path": "{cwd}/out.txt", "content": "x\n"}}],
            },
            {"text": "Wrote out.txt.", "delay": 2},
        ]
    },
    name="slow-write",
)


@contextmanager
def agent_server(
    home: Path, scenario: str | Scenario, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[Started, str, str]]:
    """A running ``baton agent-server``, its URL and run id (read from its announcement)."""
    with ScriptedModelServer(scenario) as model:
        cli = BatonCLI(home)
        cli.env.update({"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": MODEL_KEY, **(env or {})})
        started = cli.start("agent-server", "--port", "0", *args)
        _, process = started
        try:
            assert process.stderr is not None
            for line in process.stderr:
                if match := re.search(r"baton agent-server: (http://127\.0\.0\.1:\d+) run (run_\w+)", line):
                    break
            else:
                pytest.fail(f"baton agent-server did not start: {process.communicate(timeout=30)}")
            yield started, match.group(1), match.group(2)
        finally:
            BatonCLI.stop([started])


class Watcher:
    """Reads a server-sent event stream in a thread until the server closes it."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.messages: list[Any] = []
        self.status: int | None = None
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()

    def _read(self, url: str, headers: dict[str, str]) -> None:
        reader = SseReader()
        with httpx.stream("GET", url, headers=headers, timeout=60) as response:
            self.status = response.status_code
            for line in response.iter_lines():
                message = reader.feed(line)
                if message is not None:
                    self.messages.append(message)

    def types(self) -> list[str]:
        return [message.event for message in self.messages]

    def join(self, timeout: float = 60) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the event stream did not end"


def finish(started: Started, timeout: float = 60) -> tuple[int, str]:
    _, process = started
    try:
        _, rest = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        _, rest = process.communicate(timeout=30)
        pytest.fail(f"baton agent-server did not exit:\n{rest}")
    return process.returncode, rest


def test_background_serves_the_run_with_sandbox_tokens_and_exits_with_its_code(tmp_path: Path, repo: Path) -> None:
    key = make_key_pair()
    public = key.write_public(tmp_path / "sandbox.pem")
    env = {"BATON_JWT_PUBLIC_KEYS": str(public)}
    args = ("--repo", str(repo), "--prompt", "write it", "--run-id", "run_sandbox0001", "--mode", "acceptEdits")
    with agent_server(tmp_path / "home", SLOW_WRITE, *args, env=env) as (started, url, run_id):
        assert run_id == "run_sandbox0001"
        health = httpx.get(url + "/health").json()
        assert health["run_id"] == run_id and health["status"] == "ok"

        def events(token: str) -> httpx.Response:
            return httpx.get(url + "/events?after=999999", headers={"Authorization": f"Bearer {token}"}, timeout=1)

        assert events(sign(key, aud="baton")).json()["error"]["code"] == "token_audience"
        other_run = events(sign(key, aud="baton:sandbox", run_id="run_other"))
        assert other_run.status_code == 404 and other_run.json()["error"]["code"] == "run_not_found"
        no_token = httpx.post(url + "/command", json={"jsonrpc": "2.0", "id": 1, "method": "cancel"})
        assert no_token.status_code == 401
        token = sign(key, aud="baton:sandbox", run_id=run_id)
        watcher = Watcher(url + "/events", {"Authorization": f"Bearer {token}"})
        message = {"jsonrpc": "2.0", "id": 1, "method": "user_message", "params": {"content": "more"}}
        refused = httpx.post(url + "/command", json=message, headers={"Authorization": f"Bearer {token}"})
        assert refused.json()["error"]["data"]["code"] == "run_not_interactive"
        code, stderr = finish(started)
        watcher.join()
    assert code == 0, stderr
    assert watcher.status == 200
    assert watcher.types()[0] == "task.started" and watcher.types()[-1] == "task.finished"
    assert "file.changed" in watcher.types()
    assert [m.id for m in watcher.messages] == list(range(1, len(watcher.messages) + 1))
    assert (repo / "out.txt").read_text() == "x\n"


def test_interactive_takes_two_messages_then_a_cancel_and_exits_5(tmp_path: Path, repo: Path) -> None:
    args = ("--repo", str(repo), "--prompt", "first", "--run-mode", "interactive")
    with agent_server(tmp_path / "home", "plain", *args) as (started, url, run_id):
        assert httpx.get(url + "/health").json()["run_id"] == run_id
        token = (tmp_path / "home" / "api-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        watcher = Watcher(url + "/events", headers)
        acp = Watcher(url + "/events?view=acp", headers)

        def command(method: str, **params: Any) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": method, "method": method, "params": params}
            answer: dict[str, Any] = httpx.post(url + "/command", json=body, headers=headers).json()
            return answer

        def turns() -> int:
            return watcher.types().count("turn.finished")

        wait_until(lambda: turns() == 1, 60, "the first turn")
        assert command("user_message", content="second")["result"]["status"] == "queued"
        wait_until(lambda: turns() == 2, 60, "the second turn")
        assert command("user_message", content="third")["result"]["status"] == "queued"
        wait_until(lambda: turns() == 3, 60, "the third turn")
        assert httpx.get(url + "/health").json()["run_status"] == "running"  # it stays up, waiting
        assert command("cancel", reason="enough")["result"]["status"] == "queued"
        code, stderr = finish(started)
        watcher.join()
        acp.join()
    assert code == 5, stderr
    assert watcher.types()[-1] == "task.finished"
    assert watcher.messages[-1].data["data"]["stop_reason"] == "cancelled"
    prompts = [
        m.data["payload"]["params"]["prompt"][0]["text"]
        for m in acp.messages
        if m.data["method"] == "session/prompt" and m.data["direction"] == "to_agent"
    ]
    assert prompts == ["first", "second", "third"]
    taken = [m.data["payload"]["params"]["kind"] for m in acp.messages if m.data["method"] == "_baton/inbox"]
    assert taken == ["user_message", "user_message", "cancel"]
    assert token not in json.dumps([m.data for m in acp.messages])


@pytest.mark.parametrize("grace", ["30", pytest.param("0.5", marks=pytest.mark.slow)], ids=["waiting", "parked"])
def test_a_run_on_a_gate_keeps_the_process_until_it_is_decided_from_another_process(
    tmp_path: Path, repo: Path, grace: str
) -> None:
    """The gate is decided through the ledger from this (another) process; the run then finishes."""
    home = tmp_path / "home"
    env = {"BATON_GATE_GRACE_SECONDS": grace}
    with agent_server(home, "gate-park", "--repo", str(repo), "--prompt", "touch it", env=env) as running:
        started, url, _ = running
        token = (home / "api-token").read_text().strip()
        watcher = Watcher(url + "/events", {"Authorization": f"Bearer {token}"})
        wait_until(lambda: "gate.opened" in watcher.types(), 60, "the gate")
        opened = watcher.messages[watcher.types().index("gate.opened")].data["data"]
        wait_until(lambda: httpx.get(url + "/health").json()["run_status"] == "paused", 30, "the run to pause")
        if grace != "30":
            time.sleep(float(grace) + 1)  # past the grace period: the run parks, the process stays
        assert started[1].poll() is None

        async def approve() -> None:
            store = Store.open(
                Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)}).resolved_database_url
            )
            async with store:
                body = {
                    "decision": "approve",
                    "bound_call_id": opened["bound_call_id"],
                    "bound_input_hash": opened["bound_input_hash"],
                }
                await GateLedger(store).decide(opened["gate_id"], body, decided_by="reviewer")

        asyncio.run(approve())
        code, stderr = finish(started, 90)
        watcher.join()
    assert code == 0, stderr
    assert "gate.resolved" in watcher.types() and watcher.types()[-1] == "task.finished"
    assert (repo / "approved.txt").exists()


@pytest.mark.slow  # the seconds budget itself: tests/runs/test_budget_claude.py, every run
def test_max_seconds_stops_the_long_turn_and_a_denied_budget_gate_ends_the_process(tmp_path: Path, repo: Path) -> None:
    """--max-seconds (built into the run as `baton run` builds it): `sleep 20` is interrupted when the
    budget runs out; the process waits on the resource_limit gate, and a denial ends it (exit 1)."""
    home = tmp_path / "home"
    rules = ("--allow", "Bash(sleep:*)", "--allow", "Bash(echo:*)")
    args = ("--repo", str(repo), "--prompt", "wait", *rules, "--max-seconds", "2")
    with agent_server(home, "long-command", *args) as (started, url, run_id):
        wait_until(lambda: httpx.get(url + "/health").json()["run_status"] == "paused", 60, "the budget gate")
        assert started[1].poll() is None

        async def deny() -> dict[str, Any]:
            store = Store.open(
                Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)}).resolved_database_url
            )
            async with store:
                ledger = GateLedger(store)
                [gate] = await ledger.list(run_id=run_id)
                await ledger.decide(gate.id, {"decision": "deny", "reason": "enough"}, decided_by="reviewer")
                record = await store.get_run(run_id)
                return {"gate": gate.to_json(), "budget_seconds": record.budget_seconds}

        shown = asyncio.run(deny())
        code, stderr = finish(started, 60)
    assert shown["budget_seconds"] == 2 and shown["gate"]["kind"] == "resource_limit"
    assert shown["gate"]["input"]["limits"] == ["seconds"]
    assert code == 1, stderr

    async def ended() -> str | None:
        store = Store.open(
            Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)}).resolved_database_url
        )
        async with store:
            return (await store.get_run(run_id)).error_code

    assert asyncio.run(ended()) == "budget_exhausted"


@pytest.mark.slow
def test_with_a_shared_postgres_baton_serve_sees_and_streams_the_sandboxed_run(
    tmp_path: Path, repo: Path, postgres_server: TemporaryPostgres
) -> None:
    """The run executes in the agent-server; another BATON_HOME's `baton serve` on the same database streams it."""
    database = postgres_server.create_database()
    env = {"BATON_DATABASE_URL": database}
    args = ("--repo", str(repo), "--prompt", "write it", "--mode", "acceptEdits", "--run-id", "run_shared0001")
    serve_settings = Settings.load(
        {
            "BATON_WORKSPACE": "in-place",
            "BATON_HOME": str(tmp_path / "serve-home"),
            "BATON_DATABASE_URL": database,
            "PATH": os.environ["PATH"],
        }
    )
    with (
        agent_server(tmp_path / "sandbox-home", SLOW_WRITE, *args, env=env) as (started, _, run_id),
        running_server(serve_settings) as server,
    ):
        headers = server.headers()
        run = httpx.get(f"{server.base_url}/v1/runs/{run_id}", headers=headers).json()
        assert run["id"] == run_id and run["repo"] == str(repo.resolve())
        watcher = Watcher(f"{server.base_url}/v1/runs/{run_id}/events", headers)
        watcher.join()
        code, stderr = finish(started)
    assert code == 0, stderr
    assert watcher.types()[0] == "task.started" and watcher.types()[-1] == "task.finished"
    assert "file.changed" in watcher.types()
    assert (repo / "out.txt").exists()


def test_refusals_before_listening(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo: Path) -> None:
    def cli(*args: str) -> Invocation:
        return invoke_in_process(monkeypatch, tmp_path / "home", "agent-server", "--repo", str(repo), *args)

    both = cli("--prompt", "a", "--task-id", "task_x", "--port", "0")
    assert both.returncode == 2 and "exactly one of --prompt" in both.stderr
    (tmp_path / "task.json").write_text('{"title": "no prompt"}')
    bad_file = cli("--task-file", str(tmp_path / "task.json"), "--port", "0")
    assert bad_file.returncode == 2 and "invalid_argument" in bad_file.stderr
    bad_mode = cli("--prompt", "go", "--run-mode", "sometimes", "--port", "0")
    assert bad_mode.returncode == 2 and "--run-mode" in bad_mode.stderr
    no_task = cli("--task-id", "task_nope", "--port", "0")
    assert no_task.returncode == 1 and "task_not_found" in no_task.stderr
    no_key = cli("--prompt", "go", "--port", "0")
    assert no_key.returncode == 3 and "model_credentials_missing" in no_key.stderr
    elsewhere = cli("--prompt", "go", "--host", "0.0.0.0")
    assert elsewhere.returncode == 2 and "invalid_argument" in elsewhere.stderr


def test_a_task_file_holds_the_prompt(tmp_path: Path) -> None:
    (tmp_path / "task.json").write_text(json.dumps({"prompt": "fix it", "title": "t"}))
    (tmp_path / "task.md").write_text("do the thing\n")
    assert read_task_file(tmp_path / "task.json") == ("fix it", {"prompt": "fix it", "title": "t"})
    assert read_task_file(tmp_path / "task.md") == ("do the thing\n", {})
    for name, text in [("empty.md", "  \n"), ("broken.json", "{"), ("list.json", "[1]")]:
        (tmp_path / name).write_text(text)
        with pytest.raises(UsageError):
            read_task_file(tmp_path / name)
    with pytest.raises(UsageError):
        read_task_file(tmp_path / "missing.md")
