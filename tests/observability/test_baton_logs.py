"""baton's own log lines: JSON with ``--log-format json``, the run id on a run's records."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from baton.observability.baton_logs import CURRENT_RUN, JsonLines, RunIdFilter

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RunIdFilter())
    handler.setFormatter(JsonLines())
    logger = logging.getLogger("baton.test-logs")
    logger.addHandler(handler)
    logger.propagate = False
    yield stream
    logger.removeHandler(handler)
    logger.propagate = True


async def test_records_of_a_run_and_of_the_tasks_it_starts_carry_its_id(lines: io.StringIO) -> None:
    logger = logging.getLogger("baton.test-logs")

    async def a_run() -> None:
        CURRENT_RUN.set("r-123")
        logger.warning("inside the run")
        await asyncio.create_task(helper())

    async def helper() -> None:
        logger.warning("in a task the run started")

    await asyncio.create_task(a_run())
    logger.warning("outside %s", "any run")
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [(r["message"], r.get("run_id")) for r in records] == [
        ("inside the run", "r-123"),
        ("in a task the run started", "r-123"),
        ("outside any run", None),
    ]
    assert records[0]["level"] == "warning" and records[0]["logger"] == "baton.test-logs"
    assert records[0]["ts"].endswith("Z")
