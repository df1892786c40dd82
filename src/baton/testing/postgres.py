"""A throwaway Postgres server on loopback, for tests and benchmarks.

``with TemporaryPostgres() as url:`` runs ``initdb`` in a fresh temporary directory, starts
the server with ``pg_ctl`` on ``127.0.0.1`` (a free port, its unix socket in that directory),
creates a database and yields a ``postgresql+psycopg://`` URL; on exit the server is stopped
and the directory removed.

``initdb`` refuses to run as root, so as root the server runs as an unprivileged user:
``BATON_PG_USER`` if set, else ``postgres`` (created by Debian's package), else ``nobody``.
The binaries come from ``BATON_PG_BIN``, else the newest ``/usr/lib/postgresql/*/bin``, else
``PATH``. ``make postgres-deps`` installs Debian's ``postgresql`` package when it is missing.

The server must not outlive its owner, even one killed with SIGKILL: a watchdog process (its
own session, as the server's user) waits for a pipe from the owner to close, then stops the
server and removes the directory. A normal exit stops the server itself and leaves only the
removal to the watchdog, so that it does not hold up the exit.

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
from typing import IO, Final

__all__ = ["PostgresUnavailable", "TemporaryPostgres", "find_postgres_bin"]

_DATABASE: Final = "baton"
_SUPERUSER: Final = "baton"
_START_ATTEMPTS: Final = 3
# Waits for the pipe on its fd 3 to close (the owner exited or died), then cleans up. In the
# background, so the process the owner started exits at once; a shell script, since the
# server's user may not be able to run the owner's Python.
_WATCHDOG: Final = """
exec 3<&0 </dev/null
(
  cat <&3 >/dev/null
  if [ -f "$2/data/postmaster.pid" ]; then "$1" stop -m immediate -D "$2/data" >/dev/null 2>&1; fi
  rm -rf "$2"
) &
"""


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

    def __init__(self, *, durable: bool = True, bin_dir: Path | None = None, listen: tuple[str, ...] = ()) -> None:
        self._durable = durable
        # More addresses to listen on (a veth's, for a client in another network namespace),
        # clients of their subnets trusted as loopback's are.
        self._listen = listen
        self._bin_dir = bin_dir
        self._root: Path | None = None
        self._user = _server_user()
        self.port = 0
        self.url = ""
        self._names = itertools.count(1)
        self._watchdog: IO[bytes] | None = None

    def __enter__(self) -> str:
        bin_dir = self._bin_dir or find_postgres_bin()
        self._root = Path(tempfile.mkdtemp(prefix="baton-pg-", dir=self._parent_dir()))
        try:
            self._root.chmod(0o700)
            if self._user is not None:
                os.chown(self._root, self._user.pw_uid, self._user.pw_gid)
            self._watchdog = self._spawn_watchdog(bin_dir)
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
            if self._listen:
                with (self._root / "data" / "pg_hba.conf").open("a") as hba:
                    hba.write("host all all samenet trust\n")
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

    def restart(self) -> None:
        """Stop the server (``-m fast``: clients are disconnected) and start it again on the same
        port, data kept; for tests of what a client does when its server goes away."""
        if self._root is None:
            raise RuntimeError("the server is not running")
        pg_ctl = (self._bin_dir or find_postgres_bin()) / "pg_ctl"
        log = str(self._root / "server.log")
        self._run(pg_ctl, "restart", "-w", "-t", "30", "-m", "fast", "-D", str(self._root / "data"), "-l", log)

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database on this server; returns its URL (~0.1 s: copies a template)."""
        name = name or f"db_{next(self._names)}"
        self._execute(f'CREATE DATABASE "{self._identifier(name)}" STRATEGY FILE_COPY')
        return f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def create_schema(self, name: str | None = None) -> str:
        """A new, empty schema in the server's database; the URL sets ``search_path`` to it.

        Cheaper than a database (no files copied): what a test needs to start empty.
        """
        name = name or f"schema_{next(self._names)}"
        self._execute(f'CREATE SCHEMA "{self._identifier(name)}"')
        return f"{self.url}?options=-csearch_path%3D{name}"

    @staticmethod
    def _identifier(name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"not a plain identifier: {name!r}")
        return name

    def _execute(self, statement: str) -> None:
        import psycopg  # the postgres extra; only needed once a server runs

        if not self.url:
            raise RuntimeError("the server is not running")
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=_SUPERUSER, dbname=_DATABASE, autocommit=True
        ) as connection:
            connection.execute(statement.encode())

    def _start(self, bin_dir: Path) -> None:
        assert self._root is not None
        addresses = ",".join(("127.0.0.1", *self._listen))
        settings = [f"-c listen_addresses={addresses}", f"-c unix_socket_directories={self._root}"]
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

    def _parent_dir(self) -> str | None:
        """Where the server's directory goes: the temporary directory, if the server's user
        can reach it (a root-only ``TMPDIR`` is not), else ``/tmp``."""
        if self._user is None:
            return None
        path = Path(tempfile.gettempdir()).resolve()
        reachable = all(part.stat().st_mode & 0o001 for part in (path, *path.parents))
        return None if reachable else "/tmp"

    def _spawn_watchdog(self, bin_dir: Path) -> IO[bytes]:
        """Start the watchdog; returns the pipe whose closing sets it off."""
        assert self._root is not None
        user = self._user
        starter = subprocess.Popen(
            ["/bin/sh", "-c", _WATCHDOG, "watchdog", str(bin_dir / "pg_ctl"), str(self._root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            start_new_session=True,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
        )
        starter.wait()
        assert starter.stdin is not None
        return starter.stdin

    def _stop(self, bin_dir: Path) -> None:
        root, self._root = self._root, None
        watchdog, self._watchdog = self._watchdog, None
        if root is None:
            return
        if (root / "data" / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run(bin_dir / "pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(root / "data"), root=root)
        if watchdog is not None:
            watchdog.close()  # the watchdog removes the directory
        else:
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
