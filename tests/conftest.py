"""Shared fixtures: a fresh BATON_HOME, real git repositories, leak checks for agent processes,
store databases on SQLite and on a real Postgres server (``store_url``, ``postgres_url``).

Slow tests (``@pytest.mark.slow``, or ``@pytest.mark.slow(seconds=N)`` for the ones that take
much longer than ``DEFAULT_SLOW_SECONDS``): all run with ``--slow=all``; by default a sample
chosen by ``BATON_SLOW_SEED`` (default: the day) runs, at most ``BATON_SLOW_SAMPLE`` tests
(default 3) whose estimated seconds add up to at most ``BATON_SLOW_BUDGET`` (default 45), so CI
covers them over time without blowing its budget.

A test that skips for a reason not on the short allow-list of ``skip_policy.py`` fails
(README.md, "Testing").
"""

from __future__ import annotations

import datetime
import gc
import hashlib
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from baton.config import Settings
from baton.store import Store
from baton.store import tables as store_tables
from baton.store.engine import make_engine
from baton.testing.postgres import TemporaryPostgres

pytest_plugins = ["pytester", "tests.skip_policy"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", default="sample", choices=("sample", "all", "none"), help="which slow tests run")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    choice = config.getoption("--slow")
    if choice == "all":
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    keep: set[str] = set()
    if choice == "sample":
        keep = slow_sample(
            slow,
            seed=os.environ.get("BATON_SLOW_SEED") or datetime.date.today().isoformat(),
            size=int(os.environ.get("BATON_SLOW_SAMPLE", "3")),
            budget=float(os.environ.get("BATON_SLOW_BUDGET", "45")),
        )
    skip = pytest.mark.skip(reason="slow test outside this run's sample (use --slow=all)")
    for item in slow:
        if item.nodeid not in keep:
            item.add_marker(skip)


DEFAULT_SLOW_SECONDS = 15.0


def slow_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.kwargs.get("seconds", DEFAULT_SLOW_SECONDS)) if marker else 0.0


def slow_sample(slow: list[pytest.Item], *, seed: str, size: int, budget: float) -> set[str]:
    """The node ids of the day's sample: in an order fixed by the seed, each test that still fits
    both the count and the time budget (so two minute-long tests never land on the same day)."""
    ranked = sorted(slow, key=lambda item: hashlib.sha256((seed + item.nodeid).encode()).hexdigest())
    keep: set[str] = set()
    spent = 0.0
    for item in ranked:
        if len(keep) == size:
            break
        if spent + slow_seconds(item) <= budget:
            keep.add(item.nodeid)
            spent += slow_seconds(item)
    return keep


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _stat_fields(pid: str) -> list[bytes]:
    """``/proc/PID/stat`` after the command name: [0] the state, [19] the start time in ticks."""
    return _read(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()


_SESSION_START = int(_stat_fields("self")[19])  # every process of this session starts after it


def baton_process_ids(scope: str | None = None) -> list[int]:
    """Live processes carrying a BATON_RUN_ID — of this test session only, when ``scope`` (a
    path every run of the session lives under, e.g. pytest's base temp dir) is given: other
    test sessions on the same machine run agents of their own. Checked after every test, so
    cheap: the environment is read only of processes started since this session began."""
    found = []
    for entry in Path("/proc").iterdir():
        pid = entry.name
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fields = _stat_fields(pid)
            if fields[0] == b"Z" or (scope is not None and int(fields[19]) < _SESSION_START):
                continue
            environ = _read(f"/proc/{pid}/environ")
        except (OSError, IndexError):
            continue
        if b"\0BATON_RUN_ID=" in b"\0" + environ and (scope is None or scope.encode() in environ):
            found.append(int(pid))
    return found


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    """One real Postgres server on loopback for the whole session (see baton.testing.postgres)."""
    server = TemporaryPostgres(durable=False)
    with server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(postgres_server: TemporaryPostgres) -> str:
    """The session server's own database (shared: tests that need a fresh one use store_url)."""
    return postgres_server.url


@pytest.fixture(scope="session")
def _postgres_store(postgres_server: TemporaryPostgres) -> Iterator[tuple[str, Engine]]:
    """One migrated store schema for the session, emptied before each test that uses it."""
    url = postgres_server.create_schema("store")
    Store.open(url).close()
    engine = make_engine(url)
    yield url, engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store database (migrated on Postgres, where emptying is cheaper than
    migrating), once on SQLite and once on Postgres."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'baton.db'}"
    store: tuple[str, Engine] = request.getfixturevalue("_postgres_store")
    url, engine = store
    with engine.begin() as connection:
        for table in reversed(store_tables.metadata.sorted_tables):
            connection.execute(table.delete())
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def blank_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with nothing in it, not even baton's tables (for migration tests)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'baton.db'}"
    server: TemporaryPostgres = request.getfixturevalue("postgres_server")
    return server.create_schema()


@pytest.fixture(autouse=True, scope="session")
def runs_work_in_place() -> Iterator[None]:
    """The tests written before workspaces read the user's repository after a run: their runs
    work in place (``BATON_WORKSPACE=in-place``, also in the ``Settings`` they build and the
    ``baton`` they start). The tests of workspaces (tests/workspaces) ask for their kind."""
    before = os.environ.get("BATON_WORKSPACE")
    os.environ["BATON_WORKSPACE"] = "in-place"
    yield
    if before is None:
        os.environ.pop("BATON_WORKSPACE", None)
    else:
        os.environ["BATON_WORKSPACE"] = before


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with a fresh BATON_HOME and no model credentials from the environment (runs in place)."""
    home = tmp_path / "baton-home"
    environ = {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home), "PATH": os.environ.get("PATH", "")}
    return Settings.load(environ)


def make_git_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git = ["git", "-C", str(path), "-c", "user.name=baton tests", "-c", "user.email=tests@baton.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "initial"], check=True)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"README.md": "# a repository\n"})


@pytest.fixture(autouse=True)
def no_leftover_agent_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After every test, no process of a run of this session may remain (agents' homes live
    under the session's base temp dir, so their environment names it)."""
    yield
    import time

    scope = str(tmp_path_factory.getbasetemp())
    deadline = time.monotonic() + 5
    while (left := baton_process_ids(scope)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes of a baton run outlived the test: {left}"


def open_connection_warnings() -> list[str]:
    """The ResourceWarnings of what is collected now (psycopg: a connection "deleted while still open")."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(warning.message) for warning in caught if issubclass(warning.category, ResourceWarning)]
