"""A skip may not hide a gap: a test that skips for a reason not on ``ALLOWED_SKIPS`` fails.

A skip reads as "nothing to see here", so a test that skips itself because something is missing
(a package, a binary, a server) would let CI stay green without ever running it. Only reasons that
cannot stand for a missing install are allowed, each named by the prefix its reason starts with
(README.md, "Testing", lists the same). Anything else — ``pytest.skip("moto is not installed")``,
``pytest.importorskip(...)``, a skip marker with another reason, a module skipped at collection —
is reported as a failure that names its reason. Loaded by tests/conftest.py as a plugin, so a test
can run it on a file of its own (tests/test_skip_policy.py).
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

# reason prefix → why such a skip hides nothing (keep this short; README.md "Testing" lists it)
ALLOWED_SKIPS: dict[str, str] = {
    "slow test outside this run's sample": "the day's bounded sample of slow tests; `--slow=all` runs every one",
    "only as root:": "a check of what happens as root (CI runs as root, so it runs there)",
    "only when not root:": "a check that needs an unprivileged user",
    "not for this parameter:": "a parametrized case with nothing to check (a SQLite file has no connection to lose)",
}


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skipped report gives (``Skipped: `` dropped)."""
    longrepr = report.longrepr
    message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return message.removeprefix("Skipped: ")


def is_allowed(reason: str) -> bool:
    return reason.startswith(tuple(ALLOWED_SKIPS))


def _fail_unexpected_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if is_allowed(reason):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped for a reason that is not on the allow-list: {reason!r}\n"
        "A skip must not hide a gap: install what the test needs (make setup), or, if the reason can never "
        "apply to CI, start it with one of the prefixes of ALLOWED_SKIPS in tests/skip_policy.py: "
        + ", ".join(repr(prefix) for prefix in ALLOWED_SKIPS)
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _fail_unexpected_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _fail_unexpected_skip(report)
    return report
