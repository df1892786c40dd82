"""Which shell commands run tests, and whether their tests passed.

Detection works on one command string (argv arrays are joined first): the command is cut at
``&&``, ``||``, ``;``, ``|`` and newlines, each part is stripped of environment assignments and
wrappers (``env``, ``time``, ``npx``, ``uv run`` …), and its program is matched: package-manager
test scripts (``npm test``, ``npm run test:unit``, ``pnpm test``, ``yarn test``), ``node
--test``, ``pytest`` / ``python -m pytest``, ``jest``, ``vitest``, ``mocha``, ``go test``,
``cargo test`` / ``cargo nextest``, ``bun test``.

Failure is read from the output as well as from the exit status, since a pipe
(``npm test 2>&1 | tail -5``) hides the status. Every pattern is anchored at the start of a
line, so a passing test *named* ``FAIL_fast`` or ``test_fail_on_error`` is not a failure.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = [
    "FAILURE_PATTERNS",
    "Verdict",
    "command_string",
    "exit_code_from_text",
    "find_test_runners",
    "judge_test_run",
]

_M = re.MULTILINE
# Per framework (or package manager), lines that only a failing run prints.
FAILURE_PATTERNS: dict[str, re.Pattern[str]] = {
    "pytest": re.compile(
        "|".join(
            (
                r"^=+ .*\b\d+ (?:failed|errors?)\b",
                r"^FAILED ",
                r"^ERROR \S+\.py\b",
                r"^(?:\d+ passed, )?\d+ (?:failed|errors?)\b",
            )
        ),
        _M,
    ),
    "node:test": re.compile(r"^# fail [1-9]|^ℹ fail [1-9]", _M),
    "jest": re.compile(r"^\s*Tests:.*\b\d+ failed|^\s*Test Suites:.*\b\d+ failed|^FAIL\s", _M),
    "vitest": re.compile(r"^\s*Tests\s+.*\b\d+ failed|^\s*Test Files\s+.*\b\d+ failed|^\s*FAIL\s", _M),
    "mocha": re.compile(r"^\s*\d+ failing\b", _M),
    "go": re.compile(r"^(?:--- FAIL|FAIL)\b", _M),
    "cargo": re.compile(r"^test result: FAILED|^error: (?:could not compile|test failed)\b", _M),
    "bun": re.compile(r"^\s*[1-9]\d* fail\b", _M),
    "npm": re.compile(r"^npm (?:ERR!|error) ", _M),
    "pnpm": re.compile(r"^\s*ELIFECYCLE\b|ERR_PNPM_\w+", _M),
    "yarn": re.compile(r"^error Command failed\b", _M),
}
# Package managers run a script whose framework only the output tells.
_PACKAGE_MANAGERS = ("npm", "pnpm", "yarn")
_SIGNATURES = (
    ("pytest", re.compile(r"^=+ test session starts =+$", _M)),
    ("vitest", re.compile(r"^\s*Test Files\s+\d", _M)),
    ("jest", re.compile(r"^Tests:\s+\d", _M)),
    ("node:test", re.compile(r"^(?:#|ℹ) tests \d+", _M)),
    ("mocha", re.compile(r"^\s*\d+ passing\b", _M)),
)
_SEPARATORS = re.compile(r"&&|\|\||[;|\n]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")
_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (-?\d+)")
_WRAPPERS = frozenset({"env", "time", "sudo", "command", "exec", "nice", "npx", "pnpx", "bunx"})
_RUN_WRAPPERS = frozenset({"uv", "poetry", "pipenv", "pdm", "rye", "hatch"})
_EXEC_WRAPPERS = frozenset({"exec", "dlx"})
_VALUE_FLAGS = frozenset({"--prefix", "-C", "--dir", "--cwd", "-w", "--workspace", "--filter", "-F"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})


class Verdict(NamedTuple):
    passed: bool
    framework: str | None


def command_string(command: str | Sequence[str]) -> str:
    """One command string; ``["bash", "-lc", "npm test"]`` is the script it runs."""
    if isinstance(command, str):
        return command
    argv = [str(part) for part in command]
    if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc", "-ec"):
        return argv[2]
    return shlex.join(argv)


def exit_code_from_text(text: str) -> int | None:
    """Claude's Bash error result starts with ``Exit code N``."""
    match = _EXIT_CODE.match(text)
    return int(match.group(1)) if match else None


@functools.lru_cache(maxsize=512)
def find_test_runners(command: str) -> tuple[str, ...]:
    """The test runners a command invokes, in order (empty when it runs no tests)."""
    found: list[str] = []
    for part in _SEPARATORS.split(command):
        runner = _runner(part)
        if runner is not None and runner not in found:
            found.append(runner)
    return tuple(found)


def judge_test_run(runners: Sequence[str], output: str, *, is_error: bool, exit_code: int | None) -> Verdict:
    """Did the tests pass? Any error status or failure line in the output says no."""
    framework = next((name for name in runners if name not in _PACKAGE_MANAGERS), None)
    if framework is None:
        framework = next((name for name, signature in _SIGNATURES if signature.search(output)), None)
    failed = is_error or (exit_code is not None and exit_code != 0)
    if not failed:
        patterns: Iterable[re.Pattern[str]]
        if any(name in _PACKAGE_MANAGERS for name in runners) and framework is None:
            patterns = FAILURE_PATTERNS.values()  # an unknown script: any framework's failure line
        else:
            names = {*runners, framework}
            patterns = (FAILURE_PATTERNS[name] for name in names if name in FAILURE_PATTERNS)
        failed = any(pattern.search(output) for pattern in patterns)
    return Verdict(not failed, framework)


def _runner(part: str) -> str | None:
    tokens = part.replace("(", " ").replace(")", " ").split()
    tokens = _unwrap(tokens)
    if not tokens:
        return None
    program = posixpath.basename(tokens[0])
    args = tokens[1:]
    if program in ("pytest", "py.test"):
        return "pytest"
    if _PYTHON.match(program) and args[:2] == ["-m", "pytest"]:
        return "pytest"
    if program in ("jest", "vitest", "mocha"):
        return program
    if program == "node" and "--test" in args:
        return "node:test"
    if program == "go" and args[:1] == ["test"]:
        return "go"
    if program == "cargo" and args[:1] and args[0] in ("test", "nextest"):
        return "cargo"
    if program == "bun" and args[:1] == ["test"]:
        return "bun"
    if program in _PACKAGE_MANAGERS and _runs_test_script(program, args):
        return program
    return None


def _unwrap(tokens: list[str]) -> list[str]:
    """Drop ``FOO=1``, ``env``, ``time``, ``npx``, ``uv run`` … in front of the program."""
    while tokens:
        head = tokens[0]
        if _ASSIGNMENT.match(head) or head in _WRAPPERS:
            tokens = tokens[1:]
        elif (head in _RUN_WRAPPERS and tokens[1:2] == ["run"]) or (
            head in _PACKAGE_MANAGERS and tokens[1:2] and tokens[1] in _EXEC_WRAPPERS
        ):
            tokens = tokens[2:]
        else:
            break
    return tokens


def _runs_test_script(program: str, args: list[str]) -> bool:
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUE_FLAGS:
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
            if len(words) == 2:
                break
    if not words:
        return False
    if words[0] in ("run", "run-script"):
        return len(words) > 1 and words[1].startswith("test")
    if program == "npm":
        return words[0] in ("test", "t", "tst") or words[0].startswith("test:")
    return words[0].startswith("test")
