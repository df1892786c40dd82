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


# Any constant shared by every baton process: the key of the advisory lock around migrations.
_MIGRATION_LOCK: Final = 0x6261746F6E  # "baton"


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (a blank database included).

    Processes that open the store at the same moment migrate one at a time: on SQLite the
    transaction begins with ``BEGIN IMMEDIATE``; on Postgres it first takes an advisory lock
    (released at commit), so the second process finds the tables there and does nothing.
    """
    config = _config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
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
