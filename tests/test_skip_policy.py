"""The skip allow-list (tests/skip_policy.py), run by pytest itself on files written here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.skip_policy import ALLOWED_SKIPS

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent

TESTS = """
import pytest

def test_passes():
    pass

def test_root_only():
    pytest.skip("only as root: checks a refusal")

@pytest.mark.skip(reason="slow test outside this run's sample (use --slow=all)")
def test_slow():
    pass

@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_parametrized(backend):
    if backend == "sqlite":
        pytest.skip("not for this parameter: a SQLite file has no connection to lose")

def test_missing_package():
    pytest.skip("moto is not installed for any interpreter here")

def test_importorskip():
    pytest.importorskip("baton_no_such_module")

@pytest.mark.skipif(True, reason="no bwrap here")
def test_marked():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False
"""


def run_inner(pytester: pytest.Pytester, *files: tuple[str, str]) -> pytest.RunResult:
    for name, text in files:
        pytester.makepyfile(**{name: text})
    return pytester.runpytest_inprocess("-p", "tests.skip_policy", "-p", "no:cacheprovider", "-p", "no:asyncio", "-rA")


def test_only_skips_on_the_allow_list_stay_skipped(pytester: pytest.Pytester) -> None:
    result = run_inner(pytester, ("test_inner", TESTS))
    # skips in the test body become failures; a skip marker (setup) becomes an error
    result.assert_outcomes(passed=2, skipped=3, failed=2, errors=1, xfailed=1)
    output = result.stdout.str()
    assert "not on the allow-list: 'moto is not installed for any interpreter here'" in output
    assert "baton_no_such_module" in output and "'no bwrap here'" in output
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_module_skipped_at_collection_fails(pytester: pytest.Pytester) -> None:
    skipped = 'import pytest\npytest.skip("{}", allow_module_level=True)\n\ndef test_x():\n    pass\n'
    module, allowed = skipped.format("postgres is not installed"), skipped.format("only as root: all of it")
    result = run_inner(pytester, ("test_module_skip", module), ("test_module_allowed", allowed))
    result.assert_outcomes(errors=1, skipped=1)
    assert "'postgres is not installed'" in result.stdout.str()


def test_a_suite_of_allowed_skips_passes(pytester: pytest.Pytester) -> None:
    text = 'import pytest\n\ndef test_a():\n    pytest.skip("only when not root: needs an unprivileged user")\n'
    result = run_inner(pytester, ("test_fine", text))
    result.assert_outcomes(skipped=1)
    assert result.ret == pytest.ExitCode.OK


def test_the_readme_lists_the_allow_list() -> None:
    readme = (ROOT / "README.md").read_text()
    testing = readme.split("\n### Testing\n", 1)[1].split("\n## ", 1)[0]
    for prefix in ALLOWED_SKIPS:
        assert f"`{prefix}`" in testing, f"README.md, Testing, does not list the allowed skip {prefix!r}"
