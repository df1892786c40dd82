"""Spawning, the line transport and failure paths, with a tiny ACP agent script as the agent.

Every run goes through ``Baton.start`` and the real spawning code; the autouse fixture checks
that no process of the run survives the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import assert_log_whole, first_entry, run_to_end

from baton.config import Settings
from baton.runs import RunSpec

pytestmark = pytest.mark.timeout(30)


async def test_garbage_on_stdout_is_logged_line_by_line_and_the_run_goes_on(
    openai_settings: Settings, repo: Path, script_agent: Callable[..., str]
) -> None:
    done = await run_to_end(openai_settings, RunSpec(prompt="go", repo=repo, agent=script_agent("garbage")))
    assert done.outcome.status == "finished", done.outcome
    assert_log_whole(done.entries)
    malformed = [e for e in done.entries if e["method"] == "_baton/malformed_line"]
    assert [e["payload"]["params"]["line"] for e in malformed] == [
        "this line is not JSON",
        '{"jsonrpc": "2.0", "method": "session/upd',
        "[1, 2, 3]",
    ]
    assert {e["direction"] for e in malformed} == {"from_agent"}
    console = [e["payload"]["params"] for e in done.entries if e["method"] == "_baton/console"]
    assert {"level": "stderr", "message": "a line on stderr"} in console
    messages = [event["data"] for event in done.events if event["type"] == "message"]
    assert [m["text"] for m in messages if m.get("malformed")] == [e["payload"]["params"]["line"] for e in malformed]
    assert {"role": "agent", "text": "still here"} in messages
    # The lines keep their wire order: the garbage comes before the chunk that followed it.
    order = [e["method"] for e in done.entries if e["direction"] == "from_agent"]
    assert order.index("_baton/malformed_line") < order.index("session/update")


async def test_an_agent_that_exits_mid_turn_fails_the_run_with_status_and_stderr(
    openai_settings: Settings, repo: Path, script_agent: Callable[..., str]
) -> None:
    done = await run_to_end(openai_settings, RunSpec(prompt="go", repo=repo, agent=script_agent("exit")))
    assert done.outcome.status == "failed" and done.outcome.code == "agent_exited"
    assert "exited with status 3" in (done.outcome.message or "")
    assert "fatal: the agent lost its mind\nsecond line of the report" in (done.outcome.message or "")
    assert_log_whole(done.entries)
    assert done.types()[-1] == "task.failed"
    failed = done.events[-1]["data"]
    assert failed["code"] == "agent_exited" and "second line of the report" in failed["message"]
    # Everything the agent said before dying is in the log, in order.
    assert "about to fail" in json.dumps([e["payload"] for e in done.entries if e["method"] == "session/update"])


async def test_an_agent_that_never_answers_initialize_times_out(
    openai_settings: Settings, repo: Path, script_agent: Callable[..., str]
) -> None:
    settings = replace(openai_settings, agent_start_timeout_seconds=1.0)
    done = await run_to_end(settings, RunSpec(prompt="go", repo=repo, agent=script_agent("silent")))
    assert done.outcome.status == "failed" and done.outcome.code == "agent_start_timeout"
    assert_log_whole(done.entries)
    assert [e["method"] for e in done.entries if e["direction"] != "baton"] == ["initialize"]
    assert done.types() == ["task.failed"]


async def test_fs_requests_outside_the_workspace_are_refused_and_logged(
    openai_settings: Settings, repo: Path, tmp_path: Path, script_agent: Callable[..., str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (repo / "link").symlink_to(outside)
    (repo / "notes.txt").write_text("inside\n")
    orders = "\n".join(
        [
            f"read {repo}/../../etc/passwd",
            "read ../../etc/passwd",
            f"read {repo}/link/secret.txt",
            f"write {repo}/link/planted.txt",
            f"read {repo}/notes.txt",
            f"write {repo}/made-by-agent.txt",
        ]
    )
    done = await run_to_end(openai_settings, RunSpec(prompt=orders, repo=repo, agent=script_agent("fs")))
    assert done.outcome.status == "finished", done.outcome
    answers = {}
    asked = {}
    for entry in done.entries:
        if entry["method"] in ("fs/read_text_file", "fs/write_text_file"):
            payload = entry["payload"]
            if entry["direction"] == "from_agent":
                asked[payload["id"]] = payload["params"]["path"]
            else:
                answers[asked[payload["id"]]] = payload
    refused = {path for path, answer in answers.items() if "error" in answer}
    assert refused == {
        f"{repo}/../../etc/passwd",
        "../../etc/passwd",
        f"{repo}/link/secret.txt",
        f"{repo}/link/planted.txt",
    }
    for path in refused:
        assert answers[path]["error"]["data"]["code"] == "path_outside_workspace"
    assert answers[f"{repo}/notes.txt"]["result"]["content"] == "inside\n"
    assert (repo / "made-by-agent.txt").read_text() == "written by the agent\n"
    assert not (outside / "planted.txt").exists()
    assert "top secret" not in json.dumps(done.entries)
    assert "root:" not in json.dumps(done.entries)


async def test_the_agent_gets_only_the_allow_listed_environment(
    openai_settings: Settings, repo: Path, script_agent: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_TEST_CANARY", "canary-value-123456")
    from baton.agents.processes import RUN_ID_VARIABLE
    from baton.runs import Baton
    from baton.sandbox.network import proxy_environment
    from baton.sandbox.port_forward import PORT_BASE_VARIABLE

    async with Baton(replace(openai_settings, agent_start_timeout_seconds=3.0)) as baton:
        handle = await baton.start(RunSpec(prompt="go", repo=repo, agent=script_agent("silent")))
        await first_entry(baton.entries(handle.run_id), lambda entry: entry["method"] == "initialize")
        process = handle._execution._agent.process  # type: ignore[attr-defined]
        environ = Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")
        cwd = Path(f"/proc/{process.pid}/cwd").resolve()
        outcome = await handle.wait()
    assert outcome.code == "agent_start_timeout"
    names = {item.split(b"=", 1)[0].decode() for item in environ if item}
    # The sandbox's allow-list proxy is named too (where the sandbox isolates the network), and
    # the run's ports (docs/workspaces.md "Setup, and ports").
    assert names - set(proxy_environment()) == {"PATH", RUN_ID_VARIABLE, PORT_BASE_VARIABLE}
    assert cwd == repo.resolve()


HOLDER = """
import asyncio, sys
from pathlib import Path
from baton.agents.subprocess import AgentCommand, SubprocessAgent

async def main():
    argv = (sys.executable, sys.argv[1], "silent")
    agent = SubprocessAgent("silent", AgentCommand(argv, {"PATH": "/usr/bin:/bin"}, Path.cwd(), sys.argv[2]))
    await agent.start()
    print(agent.process.pid, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def test_the_agent_dies_with_baton(tmp_path: Path) -> None:
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.agents.conftest import SCRIPT

    from baton.agents.processes import run_process_ids

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(SCRIPT), "run_dies_with_baton"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert holder.stdout is not None
    assert Path(f"/proc/{int(holder.stdout.readline())}").exists()

    def agent_running() -> bool:  # the agent itself, past bwrap (or setpriv), which set the death signal
        for pid in run_process_ids("run_dies_with_baton"):
            with contextlib.suppress(OSError):
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
                if not argv0.endswith(("bwrap", "setpriv")):
                    return True
        return False

    # The death signal is set in the child before it execs the agent: a parent killed before
    # that (a few ms after the spawn, longer under load) would leave none. Wait for the agent.
    started = time.monotonic() + 10
    while not agent_running():
        assert time.monotonic() < started, "the agent did not start"
        time.sleep(0.01)
    os.kill(holder.pid, signal.SIGKILL)  # baton dies without a chance to close anything
    holder.wait()
    holder.stdout.close()
    deadline = time.monotonic() + 5
    while run_process_ids("run_dies_with_baton") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not run_process_ids("run_dies_with_baton"), "the agent outlived the process that started it"
