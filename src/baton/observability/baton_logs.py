"""baton's own logging: plain text (Python's default) or JSON lines (``baton --log-format json``).

Every record emitted while a run executes — in its task, or in a task started from it — carries
that run's id (``run_id``: the :data:`CURRENT_RUN` context variable, set by the executor). A JSON
line is ``{"ts", "level", "logger", "message", "run_id"?, "exception"?}``.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Final, Literal

__all__ = ["CURRENT_RUN", "JsonLines", "LogFormat", "RunIdFilter", "configure_logging"]

LogFormat = Literal["text", "json"]
CURRENT_RUN: ContextVar[str | None] = ContextVar("baton_current_run", default=None)
_TEXT: Final = "%(asctime)s %(levelname)s %(name)s%(run_suffix)s: %(message)s"


class RunIdFilter(logging.Filter):
    """Puts the executing run's id on each record (``record.run_id``, None outside a run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id = CURRENT_RUN.get()
        record.run_id = run_id
        record.run_suffix = f" [{run_id}]" if run_id else ""
        return True


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        run_id = getattr(record, "run_id", None)
        if run_id:
            line["run_id"] = run_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(log_format: LogFormat, level: int = logging.WARNING) -> None:
    """One handler on the root logger, writing to stderr in ``log_format``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RunIdFilter())
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(_TEXT))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
