"""A throwaway Postgres server on loopback, for tests and benchmarks.

``with TemporaryPostgres() as url:`` runs ``initdb`` in a fresh temporary directory, starts
the server with ``pg_ctl`` on ``127.0.0.1`` (a free port, its unix socket in that directory),
creates a database and yields a ``postgresql+psycopg://`` URL; on exit the server is stopped
and the directory removed.

``initdb`` refuses to run as root, so as root the server runs as an unprivileged user:
``BATON_PG_USER`` if set, else ``postgres`` (created by Debian's package), else ``nobody``.
The binaries come from ``BATON_PG_BIN``, else the newest ``/usr/lib/postgresql/*/bin``, else
``PATH``. ``make postgres-deps`` installs Debian's ``postgresql`` package when it is missing.

``durable=False`` (what the test suite uses) turns ``fsync`` and ``synchronous_commit`` off:
faster, and a crash of the machine is not what those tests are about. Benchmarks keep the
defaults.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["PostgresUnavailable", "TemporaryPostgres", "find_postgres_bin"]

_DATABASE: Final = "baton"
_SUPERUSER: Final = "baton"
_START_ATTEMPTS: Final = 3


class PostgresUnavailable(RuntimeError):
    """No Postgres server binaries were found (install Debian's ``postgresql``)."""


def find_postgres_bin() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``."""
    configured = os.environ.get("BATON_PG_BIN")
    candidates = [Path(configured)] if configured else []
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += debian
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise PostgresUnavailable("no initdb/pg_ctl found: install postgresql (make postgres-deps) or set BATON_PG_BIN")


def _server_user() -> pwd.struct_passwd | None:
    """The account to run the server as, or None to run it as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    for name in (os.environ.get("BATON_PG_USER"), "postgres", "nobody"):
        if not name:
            continue
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable("running as root and no unprivileged user to run Postgres as")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryPostgres:
    """A Postgres server for the duration of a ``with`` block; ``url`` once started."""

    def __init__(self, *, durable: bool = True, bin_dir: Path | None = None) -> None:
        self._durable = durable
        self._bin_dir = bin_dir
        self._root: Path | None = None
        self._user = _server_user()
        self.port = 0
        self.url = ""
        self._names = itertools.count(1)

    def __enter__(self) -> str:
        bin_dir = self._bin_dir or find_postgres_bin()
        self._root = Path(tempfile.mkdtemp(prefix="baton-pg-"))
        try:
            self._root.chmod(0o700)
            if self._user is not None:
                os.chown(self._root, self._user.pw_uid, self._user.pw_gid)
            self._run(
                bin_dir / "initdb",
                "-D",
                str(self._root / "data"),
                "-U",
                _SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
            self._start(bin_dir)
            self._run(bin_dir / "createdb", "-h", str(self._root), "-p", str(self.port), "-U", _SUPERUSER, _DATABASE)
        except BaseException:
            self._stop(bin_dir)
            raise
        self.url = f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{self.port}/{_DATABASE}"
        return self.url

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop(self._bin_dir or find_postgres_bin())

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database on this server (e.g. one per test); returns its URL."""
        import psycopg  # the postgres extra; only needed once a server runs

        if not self.url:
            raise RuntimeError("the server is not running")
        name = name or f"db_{next(self._names)}"
        if not name.isidentifier():
            raise ValueError(f"not a database name: {name!r}")
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=_SUPERUSER, dbname=_DATABASE, autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def _start(self, bin_dir: Path) -> None:
        assert self._root is not None
        settings = ["-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self._root}"]
        if not self._durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        for attempt in range(_START_ATTEMPTS):
            self.port = _free_port()  # another process may take it before the server does: retry
            options = " ".join([*settings, f"-p {self.port}"])
            try:
                self._run(
                    bin_dir / "pg_ctl",
                    "start",
                    "-w",
                    "-t",
                    "30",
                    "-D",
                    str(self._root / "data"),
                    "-l",
                    str(self._root / "server.log"),
                    "-o",
                    options,
                )
                return
            except subprocess.CalledProcessError:
                if attempt == _START_ATTEMPTS - 1:
                    log = self._root / "server.log"
                    detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise PostgresUnavailable(f"postgres did not start:\n{detail}") from None

    def _stop(self, bin_dir: Path) -> None:
        root, self._root = self._root, None
        if root is None:
            return
        try:
            if (root / "data" / "postmaster.pid").exists():
                with contextlib.suppress(subprocess.CalledProcessError):
                    self._run(bin_dir / "pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(root / "data"), root=root)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _run(self, program: Path, *args: str, root: Path | None = None) -> None:
        cwd = root or self._root
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(cwd)}
        user = self._user
        subprocess.run(
            [str(program), *args],
            check=True,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
        )
