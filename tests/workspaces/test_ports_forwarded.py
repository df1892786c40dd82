"""A run's ``BATON_PORT_BASE`` under the sandbox, end to end: real Claude Code on baton's scripted
model runs a Bash command in bubblewrap that starts ``python3 -m http.server $BATON_PORT_BASE``;
the host reaches it at the same port while the run lasts, and nothing listens there after."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from tests.sandbox.test_port_forward import _get, _refused

from baton.config import Settings
from baton.runs import Baton, RunSpec
from baton.sandbox.bwrap import containment
from baton.sandbox.netns import netns_unavailable

pytestmark = [
    pytest.mark.claude,
    pytest.mark.skipif(not containment().available, reason="bubblewrap cannot make namespaces here"),
    pytest.mark.skipif(netns_unavailable() is not None, reason="baton may not enter a namespace here"),
]


def _port_base(record_request: object) -> int:
    assert isinstance(record_request, dict)
    base = record_request["workspace"]["port_base"]
    assert isinstance(base, int)
    return base


@pytest.mark.slow(seconds=30)
@pytest.mark.timeout(180)
async def test_a_dev_server_the_agent_starts_in_the_sandbox_is_reachable_from_the_host(
    ws_settings: Settings, repo: Path
) -> None:
    command = (
        'python3 -m http.server "$BATON_PORT_BASE" --bind 127.0.0.1 > /dev/null 2>&1 & '
        "while [ ! -f release ]; do sleep 0.05; done; echo SERVED"
    )
    spec = RunSpec(
        prompt=command,
        repo=repo,
        scenario="bash-prompt",
        permission_mode="acceptEdits",
        allow=("Bash",),
        sandbox="bwrap",
    )
    async with Baton(ws_settings) as baton:
        handle = await baton.start(spec)
        base = _port_base((await baton.store.get_run(handle.run_id)).request)
        answer = b""
        for _ in range(3000):  # until the agent's server listens in the sandbox
            with contextlib.suppress(ConnectionRefusedError):  # the agent's sandbox is not up yet
                answer = await asyncio.to_thread(_get, base)
            if answer:
                break
            await asyncio.sleep(0.02)
        (ws_settings.workspace_dir(handle.run_id) / "release").write_text("")  # the agent's command ends
        outcome = await handle.wait()
        entries = [dict(e) for e in await baton.log.read(handle.run_id)]
    assert outcome.status == "finished" and "SERVED" in str(outcome.result), outcome
    assert answer.startswith(b"HTTP/1.0 200 OK"), answer[:200]
    [sandbox] = [e["payload"]["params"] for e in entries if e["method"] == "_baton/sandbox"]  # type: ignore[index]
    assert sandbox["network"]["mode"] == "isolated"  # the server was in the sandbox's own namespace
    assert _refused(base)  # the run ended: nothing listens on the host's port any more
