"""``baton model-server``: through Typer's runner, and as a real process stopped by a signal."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.testing import list_scenarios

BATON = Path(sys.executable).parent / "baton"


def test_list_prints_every_scenario_with_its_description() -> None:
    result = CliRunner().invoke(app, ["model-server", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == list_scenarios()
    assert all("\t" in line and line.split("\t")[1] for line in lines)


def test_an_unknown_scenario_is_a_usage_error_on_stderr() -> None:
    result = CliRunner().invoke(app, ["model-server", "--scenario", "nope"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "invalid_argument: unknown scenario 'nope'" in result.stderr


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_it_prints_the_base_url_and_serves_until_a_signal(stop_signal: signal.Signals) -> None:
    command = [str(BATON), "model-server", "--scenario", "plain"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        address = urlsplit(base_url)
        assert (address.scheme, address.hostname) == ("http", "127.0.0.1")
        connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
        try:
            connection.request("HEAD", "/")
            assert connection.getresponse().read() == b""
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "Bash"}],
            }
            connection.request("POST", "/v1/messages", json.dumps(body))
            message = json.loads(connection.getresponse().read())
        finally:
            connection.close()
        assert message["content"][0]["text"].startswith("Hello from baton's scripted model")
        process.send_signal(stop_signal)
        assert process.wait(timeout=10) == 0
        assert process.stdout.read() == ""
