"""The CLI starts without the heavy libraries: every command pays for what it imports at start
(tests spawn hundreds of ``baton`` processes, users wait on each), so ACP, the agent SDK, the
server, DBOS, Alembic, SQLAlchemy (the read commands read SQLite with ``sqlite3``) and YAML are
imported by the commands that use them, not by ``baton.cli``."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "acp",
    "alembic",
    "claude_agent_sdk",
    "dbos",
    "fastapi",
    "httpx",
    "opentelemetry",
    "sqlalchemy",
    "uvicorn",
    "yaml",
)


def test_importing_the_cli_imports_none_of_the_heavy_libraries() -> None:
    probe = f"import sys, baton.cli; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
