"""The fleet's examples (docs/examples/fleet/, docs/fleet.md) cannot rot: every baton command in
the compose file and the systemd units is a real subcommand whose flags baton's own parser
accepts, and every baton process gets the settings the fleet shares."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer import _click as click  # the click typer ships and parses baton's options with

from baton.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "fleet"
SHARED = ("BATON_DATABASE_URL", "BATON_BLOB_URL", "BATON_S3_ACCESS_KEY_ID", "BATON_S3_SECRET_ACCESS_KEY")


def _parse(argv: list[str]) -> click.Context:
    """The context baton's CLI builds for ``argv`` (``baton SUB ARGS…``), parsed and not invoked:
    an unknown subcommand or flag, or a bad value, raises click's usage error."""
    assert argv[0].rsplit("/", 1)[-1] == "baton", argv
    group = typer.main.get_command(app)
    command = group.get_command(click.Context(group), argv[1])  # type: ignore[attr-defined]
    assert command is not None, f"baton has no subcommand {argv[1]!r}"
    return command.make_context(argv[1], list(argv[2:]))


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _baton_services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    return {name: service for name, service in services.items() if service.get("command", [None])[0] == "baton"}


def test_the_compose_file_runs_postgres_an_s3_server_one_api_and_two_workers() -> None:
    services = _compose()["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["minio"]["image"].startswith("minio/minio")
    subcommands = sorted(
        (service["command"][1], "--no-execute" in service["command"]) for service in _baton_services().values()
    )
    assert subcommands == [("serve", True), ("worker", False), ("worker", False)]


@pytest.mark.parametrize("name", sorted(_baton_services()))
def test_each_compose_command_is_one_baton_accepts(name: str) -> None:
    service = _baton_services()[name]
    context = _parse(service["command"])
    if service["command"][1] == "serve":
        assert context.params["no_execute"] is True
    environment = service["environment"]
    for variable in SHARED:
        assert environment.get(variable), f"{name} lacks {variable}"
    assert environment["BATON_DATABASE_URL"].startswith("postgresql://")
    assert environment["BATON_BLOB_URL"].startswith("s3://")


def test_a_flag_baton_does_not_know_is_caught() -> None:
    with pytest.raises(click.exceptions.UsageError):
        _parse(["baton", "worker", "--concurency", "2"])
    with pytest.raises(click.exceptions.UsageError):
        _parse(["baton", "worker", "--labels", "gpu"])  # not k=v


@pytest.mark.parametrize("unit", ["baton-api.service", "baton-worker.service"])
def test_each_systemd_unit_starts_a_command_baton_accepts(unit: str) -> None:
    lines = (EXAMPLES / unit).read_text().splitlines()
    (exec_start,) = [line.removeprefix("ExecStart=") for line in lines if line.startswith("ExecStart=")]
    _parse(shlex.split(exec_start))
    assert "EnvironmentFile=/etc/baton/fleet.env" in lines


def test_the_shared_env_file_names_every_shared_setting() -> None:
    names = {
        line.split("=", 1)[0]
        for line in (EXAMPLES / "fleet.env").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert set(SHARED) <= names


def test_the_fleet_doc_points_at_the_examples() -> None:
    text = (EXAMPLES.parents[1] / "fleet.md").read_text()
    for name in ("compose.yaml", "baton-worker.service", "baton-api.service", "fleet.env"):
        assert f"examples/fleet/{name}" in text
