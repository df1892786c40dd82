"""Alembic, run programmatically: the migrations ship inside the package, no alembic.ini."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

__all__ = ["MIGRATIONS", "current_revision", "head_revision", "upgrade"]

MIGRATIONS: Final = Path(__file__).parent / "migrations"


def _config() -> Config:
    config = Config()
    # ConfigParser interpolation would read a "%" in the path as a reference.
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (a blank database included)."""
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations under {MIGRATIONS}")
    return head
