"""Schemathesis over every operation of a real server: never a 5xx, responses match the schema.

Runs are created against a workspace root that holds no repository, so generated requests
never start an agent (they are refused with ``repository_not_allowed``, or earlier).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance
from tests.server._server import RunningServer, running_server

from baton.config import Settings
from baton.server import ServerConfig, create_app

MAX_EXAMPLES = 30

# Hypothesis keeps a folder of its own; not in the checkout.
set_hypothesis_home_dir(str(Path(tempfile.gettempdir()) / "baton-tests-hypothesis"))


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = tmp_path_factory.mktemp("schema") / "baton-home"
    settings = Settings.load({"BATON_HOME": str(home), "PATH": os.environ.get("PATH", "")})
    roots = (tmp_path_factory.mktemp("no-repositories"),)
    config = ServerConfig(workspace_roots=roots, commands_per_minute=1_000_000, sse_heartbeat_seconds=0.2)
    with running_server(settings, config) as server:
        yield server


def _published_schema() -> dict[str, Any]:
    """The OpenAPI document the server serves (built here: parametrize needs it at import)."""
    with tempfile.TemporaryDirectory() as home:
        return create_app(Settings.load({"BATON_HOME": home})).openapi()


schema = schemathesis.openapi.from_dict(_published_schema())


@schema.parametrize()
@hypothesis_settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_operation(case: schemathesis.Case, api_server: RunningServer) -> None:
    response = case.call(base_url=api_server.base_url, headers=api_server.headers(), timeout=10)
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
