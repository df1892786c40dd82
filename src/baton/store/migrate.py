"""Alembic, run programmatically: the migrations ship inside the package, no alembic.ini.

Opening the store is on the path of every CLI command, so a database already at the newest
revision is recognised without Alembic: one read of ``alembic_version`` against the head named by
the migration files themselves (their ``revision``/``down_revision`` lines). Alembic (~0.15 s to
import) and its write transaction are used only when there is something to migrate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from sqlalchemy import Engine, exc, text

from baton.store._revisions import MIGRATIONS, declared_head
from baton.store.engine import READ_ONLY

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["MIGRATIONS", "current_revision", "declared_head", "head_revision", "upgrade"]


def _config() -> Config:
    from alembic.config import Config

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
    if revision == "head" and _stored_revision(engine) == declared_head():
        return  # the usual case: nothing to migrate, nothing locked
    from alembic import command

    config = _config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    """The head as Alembic computes it (what :func:`declared_head` must agree with)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations under {MIGRATIONS}")
    return head


def _stored_revision(engine: Engine) -> str | None:
    """The revision recorded in the database; None for a blank one (or one Alembic must read)."""
    try:
        with engine.connect().execution_options(**READ_ONLY) as connection:
            rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except exc.DBAPIError:  # no such table yet
        return None
    return str(rows[0][0]) if len(rows) == 1 else None
