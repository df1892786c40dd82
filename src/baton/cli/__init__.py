"""The ``baton`` command: one small module per command, thin, on the Python API."""

from __future__ import annotations

# Each command module registers itself on ``app`` when imported.
from baton.cli import acp as _acp  # noqa: F401  (registers a command)
from baton.cli import agent_server as _agent_server  # noqa: F401
from baton.cli import agents as _agents  # noqa: F401
from baton.cli import fork as _fork  # noqa: F401
from baton.cli import gates as _gates  # noqa: F401
from baton.cli import handoff as _handoff  # noqa: F401
from baton.cli import logs as _logs  # noqa: F401
from baton.cli import model_server as _model_server  # noqa: F401
from baton.cli import record_scenario as _record_scenario  # noqa: F401
from baton.cli import results as _results  # noqa: F401
from baton.cli import resume as _resume  # noqa: F401
from baton.cli import run as _run  # noqa: F401
from baton.cli import runs as _runs  # noqa: F401
from baton.cli import sample as _sample  # noqa: F401
from baton.cli import send as _send  # noqa: F401
from baton.cli import serve as _serve  # noqa: F401
from baton.cli import show as _show  # noqa: F401
from baton.cli import snapshots as _snapshots  # noqa: F401
from baton.cli import token as _token  # noqa: F401
from baton.cli import worker as _worker  # noqa: F401
from baton.cli import workspaces as _workspaces  # noqa: F401
from baton.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
