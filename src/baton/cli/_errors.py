"""How every command reports a ``BatonError``: its code, on stderr, and the exit status."""

from __future__ import annotations

import json
import sys

from baton.errors import BatonError, GateError, RefusedError, UsageError

__all__ = ["exit_code_for", "report_error"]


def exit_code_for(error: BatonError) -> int:
    """2 for usage errors, 3 for refusals (a gate's included), 1 for everything else (docs/design.md exit codes)."""
    if isinstance(error, UsageError):
        return 2
    if isinstance(error, RefusedError | GateError):
        return 3
    return 1


def report_error(error: BatonError, json_output: bool) -> int:
    if json_output:
        sys.stderr.write(json.dumps({"error": error.to_dict()}) + "\n")
    else:
        sys.stderr.write(f"baton: {error.code}: {error.message}\n")
    sys.stderr.flush()
    return exit_code_for(error)
