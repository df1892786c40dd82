"""``baton serve`` and ``baton token`` through the console script."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import httpx
import jwt
import pytest
from tests.cli._baton_cli import BatonCLI, invoke_in_process
from tests.server._server import make_key_pair


def test_serve_answers_with_the_local_token_and_stops_on_sigint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cli = BatonCLI(tmp_path / "home")
    started = cli.start("serve", "--port", "0")
    _, process = started
    try:
        assert process.stderr is not None
        url = sign_in = None
        for line in process.stderr:
            if match := re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line):
                url = match.group(1)
            if match := re.match(r"Sign in: (\S+)$", line):
                sign_in = match.group(1)
                break
        assert url, "baton serve did not start"
        token = invoke_in_process(monkeypatch, tmp_path / "home", "token").stdout.strip()
        # The web app's sign-in link (docs/web.md): the token in the fragment, never sent to the server.
        assert sign_in == f"{url}/login#token={token}"
        assert (tmp_path / "home" / "api-token").stat().st_mode & 0o777 == 0o600
        assert httpx.get(url + "/health").json()["status"] == "ok"
        assert httpx.get(url + "/v1/runs", headers={"Authorization": f"Bearer {token}"}).json()["runs"] == []
        assert httpx.get(url + "/v1/runs").status_code == 401
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=15)
        assert process.returncode == 0, rest
        assert "Application shutdown complete" in rest
    finally:
        BatonCLI.stop([started])


def test_serve_without_keys_refuses_another_address(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    refused = invoke_in_process(monkeypatch, tmp_path / "home", "serve", "--host", "0.0.0.0")
    assert refused.returncode == 2
    assert "invalid_argument" in refused.stderr and "BATON_JWT_PUBLIC_KEYS" in refused.stderr


def test_token_mints_a_jwt_the_server_accepts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key = make_key_pair()
    private = tmp_path / "signer.pem"
    private.write_bytes(key.private_pem())
    minted = invoke_in_process(
        monkeypatch,
        tmp_path / "home",
        "token", "--key", str(private), "--sub", "bob", "--scope", "runs:read", "--run", "run_1", "--ttl", "30m",
    )  # fmt: skip
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    assert jwt.get_unverified_header(token)["kid"] == "signer"
    claims = jwt.decode(token, key.private.public_key(), algorithms=["RS256"], audience="baton")
    assert claims["sub"] == "bob" and claims["scope"] == "runs:read" and claims["run_id"] == "run_1"
    assert claims["exp"] - claims["iat"] == 1800
    missing_sub = invoke_in_process(monkeypatch, tmp_path / "home", "token", "--key", str(private))
    assert missing_sub.returncode == 2 and "--sub" in missing_sub.stderr
    bad_ttl = invoke_in_process(
        monkeypatch, tmp_path / "home", "token", "--key", str(private), "--sub", "b", "--ttl", "x"
    )
    assert bad_ttl.returncode == 2
