"""Running git for baton: a clean environment, explicit directories, errors translated once.

Every git process baton starts gets an environment with no ``GIT_*`` variable of the caller
(``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_WORK_TREE`` … would redirect it into the user's
repository), no system or global configuration (hooks, filters, fsmonitor and aliases of the
user never run), and literal pathspecs (a file named ``*`` is a file, not a glob).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "EMPTY_TREE",
    "GitFailed",
    "clean_environment",
    "commit_object",
    "feed_git",
    "run_git",
    "run_git_many",
    "write_object",
]

EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_IDENTITY: Final = {
    "GIT_AUTHOR_NAME": "baton",
    "GIT_AUTHOR_EMAIL": "baton@localhost",
    "GIT_COMMITTER_NAME": "baton",
    "GIT_COMMITTER_EMAIL": "baton@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}


# The identity line of baton's commits, as git writes it from ``_IDENTITY``.
_SIGNATURE: Final = "baton <baton@localhost> 0 +0000"


class GitFailed(RuntimeError):
    """A git command baton ran failed; ``stderr`` says why."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args[:3])} exited {returncode}: {stderr.strip()[:2000]}")
        self.returncode = returncode
        self.stderr = stderr


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without any ``GIT_*`` variable, plus baton's fixed settings."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "LC_ALL": "C",
        }
    )
    env.update(_IDENTITY)
    if extra:
        env.update(extra)
    return env


def run_git(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    input: bytes | None = None,
    cwd: Path | None = None,
    ok_codes: tuple[int, ...] = (0,),
) -> bytes:
    """Run ``git ARGS`` and return its stdout; a status outside ``ok_codes`` raises :class:`GitFailed`."""
    try:
        done = subprocess.run(["git", *args], env=dict(env), input=input, capture_output=True, cwd=cwd, check=False)
    except OSError as exc:
        raise GitFailed(list(args), -1, f"cannot run git: {exc}") from exc
    if done.returncode not in ok_codes:
        raise GitFailed(list(args), done.returncode, done.stderr.decode("utf-8", "replace"))
    return done.stdout


def run_git_many(commands: Sequence[Sequence[str]], env: Mapping[str, str]) -> list[bytes]:
    """Run several git commands at once; their stdouts.

    They must not disturb each other: readers, and at most one writer that replaces a file whole
    (``write-tree`` renames the new index into place, so a reader sees the old or the new one).
    """
    processes = []
    try:
        for args in commands:
            processes.append(
                subprocess.Popen(
                    ["git", *args],
                    env=dict(env),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        finished = [process.communicate() for process in processes]  # every one, so every pipe is closed
        for args, process, (_, stderr) in zip(commands, processes, finished, strict=True):
            if process.returncode != 0:
                raise GitFailed(list(args), process.returncode, stderr.decode("utf-8", "replace"))
        return [stdout for stdout, _ in finished]
    except OSError as exc:
        raise GitFailed(list(commands[0]), -1, f"cannot run git: {exc}") from exc
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()


def commit_object(tree: str, parent: str | None, message: str) -> bytes:
    """The body of the commit ``git commit-tree TREE [-p PARENT] -F -`` makes of ``message`` with baton's identity."""
    parent_line = f"parent {parent}\n" if parent else ""
    return f"tree {tree}\n{parent_line}author {_SIGNATURE}\ncommitter {_SIGNATURE}\n\n{message}".encode()


def write_object(git_dir: Path, kind: str, body: bytes, *, object_format: str = "sha1") -> str:
    """Store a loose object as git does (no git process); its id.

    ``object_format`` is the repository's (``sha1``, or ``sha256`` when a 64-digit id says so).
    The file is written aside and renamed into place, read-only like git's own.
    """
    data = f"{kind} {len(body)}\0".encode() + body
    oid = hashlib.new(object_format, data).hexdigest()
    folder = git_dir / "objects" / oid[:2]
    target = folder / oid[2:]
    if target.exists():
        return oid
    folder.mkdir(exist_ok=True)
    handle, name = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(zlib.compress(data, 1))
        temporary.chmod(0o444)
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return oid


def feed_git(args: Sequence[str], env: Mapping[str, str], chunks: Iterable[bytes]) -> None:
    """Run ``git ARGS`` with ``chunks`` streamed to its stdin (never all in memory); its stdout is dropped."""
    with tempfile.TemporaryFile() as errors:  # a file, so a chatty git never blocks on a full pipe
        try:
            process = subprocess.Popen(
                ["git", *args], env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors
            )
        except OSError as exc:
            raise GitFailed(list(args), -1, f"cannot run git: {exc}") from exc
        stdin = process.stdin
        assert stdin is not None
        try:
            try:
                for chunk in chunks:
                    stdin.write(chunk)
                stdin.close()
            except BrokenPipeError:  # git stopped reading: its status and stderr say why
                pass
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            with contextlib.suppress(BrokenPipeError):
                stdin.close()
        if process.wait() != 0:
            errors.seek(0)
            raise GitFailed(list(args), process.returncode, errors.read().decode("utf-8", "replace"))
