"""Test-command detection and the pass/fail verdict read from status and output."""

from __future__ import annotations

import pytest

from baton.events.commands import command_string, exit_code_from_text, find_test_runners, judge_test_run


@pytest.mark.parametrize(
    ("command", "runners"),
    [
        ("npm test", ["npm"]),
        ("npm run test", ["npm"]),
        ("npm run test:unit -- --watch=false", ["npm"]),
        ("npm --prefix app test", ["npm"]),
        ("pnpm test", ["pnpm"]),
        ("yarn test:e2e", ["yarn"]),
        ("cd x && npm test 2>&1 | tail -5", ["npm"]),
        ("node --test", ["node:test"]),
        ("node --test test/ ; echo done", ["node:test"]),
        ("pytest -q tests/", ["pytest"]),
        ("python -m pytest -x", ["pytest"]),
        ("python3.11 -m pytest", ["pytest"]),
        (".venv/bin/pytest", ["pytest"]),
        ("uv run pytest", ["pytest"]),
        ("CI=1 npx jest --ci", ["jest"]),
        ("npx vitest run", ["vitest"]),
        ("./node_modules/.bin/mocha", ["mocha"]),
        ("go test ./...", ["go"]),
        ("cargo test --release", ["cargo"]),
        ("(cd api && cargo test) && go test ./...", ["cargo", "go"]),
        ("bun test", ["bun"]),
        ("npm install", []),
        ("npm run build", []),
        ("node server.js --test-mode", []),
        ("python -m http.server", []),
        ("go build ./...", []),
        ("echo pytest", []),
        ("cat test_results.txt", []),
    ],
)
def test_find_test_runners(command: str, runners: list[str]) -> None:
    assert find_test_runners(command) == tuple(runners)


def verdict(command: str, output: str, *, is_error: bool = False, exit_code: int | None = 0) -> tuple[bool, str | None]:
    passed, framework = judge_test_run(find_test_runners(command), output, is_error=is_error, exit_code=exit_code)
    return passed, framework


PYTEST_PASS = "tests/test_x.py::test_fail_on_error PASSED [100%]\n===== 1 passed in 0.01s =====\n"
GO_PASS = "=== RUN   TestFAIL_fast\n--- PASS: TestFAIL_fast (0.00s)\nPASS\nok  \texample.com/x\t0.1s\n"


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        ("pytest -v", PYTEST_PASS, (True, "pytest")),
        ("pytest", "==== 1 failed, 2 passed in 0.1s ====", (False, "pytest")),
        (
            "pytest -q | tail -3",
            "FAILED tests/test_x.py::test_a - assert 1 == 2\n1 failed, 1 passed in 0.02s",
            (False, "pytest"),
        ),
        ("pytest -q", "1 passed, 1 error in 0.02s", (False, "pytest")),
        ("go test -v ./...", GO_PASS, (True, "go")),
        ("go test ./... | tail -2", "--- FAIL: TestAdd (0.00s)\nFAIL\texample.com/x\t0.1s", (False, "go")),
        ("node --test", "# tests 3\n# pass 3\n# fail 0\n", (True, "node:test")),
        ("node --test | tail -4", "# tests 3\n# pass 2\n# fail 1\n", (False, "node:test")),
        ("node --test", "ℹ tests 2\nℹ pass 1\nℹ fail 1\n", (False, "node:test")),
        ("cargo test 2>&1 | tail", "test result: FAILED. 1 passed; 1 failed", (False, "cargo")),
        ("cargo test", "test fail_fast ... ok\ntest result: ok. 1 passed; 0 failed", (True, "cargo")),
        ("npx jest", "PASS src/FAIL_fast.test.js\nTests:       2 passed, 2 total", (True, "jest")),
        (
            "npx vitest run",
            " Test Files  1 failed (1)\n      Tests  1 failed | 1 passed (2)",
            (False, "vitest"),
        ),
        ("mocha", "  3 passing\n", (True, "mocha")),
        ("npm test 2>&1 | tail -5", "Tests:       1 failed, 3 passed, 4 total", (False, "jest")),
        ("npm test 2>&1 | tail -5", "# tests 1\n# pass 1\n# fail 0", (True, "node:test")),
        ("npm test | tail -2", "some script output\nnpm error Lifecycle script `test` failed", (False, None)),
        ("npm test", "all good", (True, None)),
    ],
)
def test_judge_test_run_reads_the_output(command: str, output: str, expected: tuple[bool, str | None]) -> None:
    assert verdict(command, output) == expected


def test_error_status_or_exit_code_fails_whatever_the_output() -> None:
    assert verdict("pytest", PYTEST_PASS, is_error=True) == (False, "pytest")
    assert verdict("pytest", PYTEST_PASS, exit_code=1) == (False, "pytest")
    assert verdict("pytest", PYTEST_PASS, exit_code=None) == (True, "pytest")


def test_exit_code_from_claude_error_text() -> None:
    assert exit_code_from_text("Exit code 2\nboom") == 2
    assert exit_code_from_text("Error: Exit code 127\nsh: x: not found") == 127
    assert exit_code_from_text("exit code 2") is None
    assert exit_code_from_text("boom\nExit code 2") is None


def test_command_string_joins_argv() -> None:
    assert command_string("npm test") == "npm test"
    assert command_string(["bash", "-lc", "npm test | tail"]) == "npm test | tail"
    assert command_string(["git", "commit", "-m", "a b"]) == "git commit -m 'a b'"
