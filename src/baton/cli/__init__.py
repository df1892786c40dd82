"""The ``baton`` command: one small module per command, thin, on the Python API."""

from __future__ import annotations

from baton.cli._app import app

# Each command module registers itself on ``app`` when imported.
from baton.cli import model_server as _model_server  # noqa: F401  (registers a command)

__all__ = ["app", "main"]


def main() -> None:
    app()
