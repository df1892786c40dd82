"""The newest schema revision, read from the migration files themselves (no Alembic, no SQLAlchemy):
both the migrating open (:mod:`baton.store.migrate`) and the SQLite read path
(:mod:`baton.store.reads`) recognise a database at the newest revision by it."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Final

__all__ = ["MIGRATIONS", "declared_head"]

MIGRATIONS: Final = Path(__file__).parent / "migrations"

_REVISION = re.compile(r"^revision(?::[^=]*)? = [\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision(?::[^=]*)? = (?:None|[\"']([^\"']+)[\"'])", re.MULTILINE)


@functools.cache
def declared_head() -> str | None:
    """The one revision no migration file names as its ``down_revision``, read from the files;
    None when there is not exactly one (then Alembic decides)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        found = _REVISION.search(source)
        if found is None:
            return None
        revisions.add(found.group(1))
        down = _DOWN_REVISION.search(source)
        if down is not None and down.group(1):
            parents.add(down.group(1))
    heads = revisions - parents
    return next(iter(heads)) if len(heads) == 1 else None
