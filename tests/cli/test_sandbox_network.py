"""The sandbox's network end to end: the agent's own Bash tool tries to reach what it may not.

Each run's agent is in a network namespace of its own where only baton's two proxies listen
(docs/sandbox.md "The network"). A server the test runs on the host's loopback stands for
everything else on the machine and beyond: the agent reaches it only through the allow-list
proxy, and only when ``--allow-net`` names it. The model endpoint is reached through the
model proxy, which holds the real key.
"""

from __future__ import annotations

import http.server
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.conftest import make_git_repo

from baton.sandbox.bwrap import containment
from baton.sandbox.netns import NETNS_METHOD_VARIABLE
from baton.testing import CertificateAuthority, ScriptedModelServer, load_scenario

pytestmark = [pytest.mark.claude, pytest.mark.timeout(240)]
SCRIPTED = ("--scenario", "bash-prompt", "--mode", "acceptEdits", "--allow", "Bash")
CANARY = "sk-ant-real-CANARY-5e1f0c"
needs_netns = pytest.mark.skipif(not containment().available, reason="bubblewrap cannot contain here")


class _Hits(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b"REACHED-THE-HOST\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def host_server() -> Iterator[tuple[int, list[str]]]:
    """A server on the host's loopback: what the sandbox must not reach unless allowed."""
    hits: list[str] = []
    handler = type("Hits", (_Hits,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()


@needs_netns
@pytest.mark.parametrize("agent", ["claude", "codex", "claude/inside"])
def test_nothing_is_reachable_but_the_model_and_what_is_allowed(
    tmp_path: Path, agent: str, host_server: tuple[int, list[str]]
) -> None:
    """``claude/inside``: the sockets made by the program inside the namespace (what an
    unprivileged baton does) instead of by baton entering it."""
    port, hits = host_server
    baton = BatonCLI(tmp_path / "home")
    agent, _, method = agent.partition("/")
    if method:
        baton.env[NETNS_METHOD_VARIABLE] = method
    repo = make_git_repo(tmp_path / "repo", {"README.md": "hi\n"})
    through_proxy = "curl -sS -m 5 --noproxy '' -x \"$HTTP_PROXY\""
    attempts = "; ".join(
        [
            f"curl -sS -m 3 http://127.0.0.1:{port}/direct || echo DIRECT-FAILED",
            f"{through_proxy} http://127.0.0.1:{port}/refused || echo REFUSED-FAILED",
            f"{through_proxy} http://127.0.0.1:{port + 1 if port < 65535 else 1}/other || echo OTHER-FAILED",
            f"{through_proxy} http://localhost:{port}/allowed",
            "getent hosts example.com || echo DNS-FAILED",
            "echo ATTEMPTS-DONE",
        ]
    )
    done = baton("run", attempts, "--repo", str(repo), "--agent", agent, *SCRIPTED, "--allow-net", f"localhost:{port}")
    assert done.returncode == 0, done.describe()
    assert "ATTEMPTS-DONE" in done.stdout, done.describe()
    for refused in ("DIRECT-FAILED", "REFUSED-FAILED", "OTHER-FAILED", "DNS-FAILED"):
        assert refused in done.stdout, (refused, done.describe())
    if agent == "codex":
        # Codex runs each command in a sandbox of its own (workspace-write: no network at all),
        # nested in baton's: its commands reach nothing, not even the allow-list proxy; Codex
        # itself reached its model through baton's model proxy (the run finished).
        assert hits == [] and not baton.notes("_baton/net"), hits
        return
    # Only the allowed name got through, through baton's proxy.
    assert hits == ["/allowed"], hits
    assert "REACHED-THE-HOST" in done.stdout
    decisions = baton.notes("_baton/net")
    assert {"host": "127.0.0.1", "port": port, "allowed": False} in [
        {key: d[key] for key in ("host", "port", "allowed")} for d in decisions
    ]
    assert any(d["host"] == "localhost" and d["port"] == port and d["allowed"] is True for d in decisions)
    # A refusal is also shown to the human, as a denied message.
    events = baton("logs", _run_id(baton)).json_lines()
    refusals = [e["data"] for e in events if e["type"] == "message" and e["data"].get("tool") == "network"]
    assert refusals and all(r["denied"] is True for r in refusals)
    assert any(f"127.0.0.1:{port} is not on the allow-list" in r["text"] for r in refusals)
    (sandbox,) = baton.notes("_baton/sandbox")
    network = sandbox["network"]
    assert isinstance(network, dict) and network["mode"] == "isolated"
    assert network["method"] == (method or "setns")
    assert network["allow_net"] == [f"localhost:{port}"]


@needs_netns
def test_the_real_key_never_enters_the_sandbox_and_an_https_endpoint_is_verified(tmp_path: Path) -> None:
    """A run on a "real" endpoint (HTTPS, a test CA): the agent holds a placeholder, the model
    proxy verifies the endpoint against ``BATON_MODEL_CA_BUNDLE`` and sends the real key."""
    authority = CertificateAuthority.create()
    ca = authority.write_pem(tmp_path / "ca.pem")
    baton = BatonCLI(tmp_path / "home")
    repo = make_git_repo(tmp_path / "repo", {"README.md": "hi\n"})
    with ScriptedModelServer(load_scenario("bash-prompt"), ssl_context=authority.server_context()) as server:
        baton.env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=CANARY, BATON_MODEL_CA_BUNDLE=str(ca))
        done = baton(
            "run", "env > env.txt; echo ENV-WRITTEN", "--repo", str(repo), "--mode", "acceptEdits", "--allow", "Bash"
        )
        requests = server.requests
    assert done.returncode == 0, done.describe()
    assert "ENV-WRITTEN" in done.stdout
    environment = (repo / "env.txt").read_text()
    assert CANARY not in environment
    assert "ANTHROPIC_API_KEY=sk-baton-placeholder-" in environment
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:17070" in environment
    # Nothing the agent can read holds it either (its launch files, its home).
    run_dir = next((baton.home / "runs").iterdir())
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    # The endpoint got the real key, over verified HTTPS.
    assert [r.step for r in requests if r.scenario] == [0, 1]
    assert all(r.headers.get("x-api-key") not in (None, "") for r in requests if r.scenario)


@needs_netns
def test_an_endpoint_whose_certificate_is_not_trusted_fails_the_run_clearly(tmp_path: Path) -> None:
    authority = CertificateAuthority.create()
    baton = BatonCLI(tmp_path / "home")
    repo = make_git_repo(tmp_path / "repo", {"README.md": "hi\n"})
    with ScriptedModelServer(load_scenario("bash-prompt"), ssl_context=authority.server_context()) as server:
        baton.env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=CANARY)
        done = baton("run", "echo never", "--repo", str(repo), "--mode", "acceptEdits", "--allow", "Bash")
        requests = server.requests
    assert done.returncode != 0, done.describe()
    assert not [r for r in requests if r.scenario]  # the model never answered: TLS failed first
    assert "never" not in done.stdout.replace("echo never", "")


def _run_id(baton: BatonCLI) -> str:
    with sqlite3.connect(baton.home / "baton.db") as connection:
        (run_id,) = connection.execute("SELECT id FROM runs").fetchone()
    return str(run_id)


@needs_netns
def test_the_setup_step_gets_the_agents_network_and_no_key(tmp_path: Path, host_server: tuple[int, list[str]]) -> None:
    port, hits = host_server
    baton = BatonCLI(tmp_path / "home")
    baton.env["ANTHROPIC_API_KEY"] = CANARY  # in baton's environment: never the setup's
    repo = make_git_repo(tmp_path / "repo", {"README.md": "hi\n"})
    setup = (
        f"env > setup-env.txt; curl -sS -m 5 --noproxy '' -x \"$HTTP_PROXY\" http://localhost:{port}/from-setup; "
        f"curl -sS -m 3 http://127.0.0.1:{port}/direct-from-setup || true"
    )
    done = baton(
        "run", "echo agent-ran", "--repo", str(repo), *SCRIPTED, "--setup", setup, "--allow-net", f"localhost:{port}",
        "--workspace", "worktree",
    )  # fmt: skip
    assert done.returncode == 0, done.describe()
    assert hits == ["/from-setup"], hits
    (written,) = baton.home.rglob("setup-env.txt")  # in the run's worktree
    environment = written.read_text()
    assert CANARY not in environment and "ANTHROPIC_API_KEY" not in environment
    assert "HTTP_PROXY=http://127.0.0.1:17071" in environment
