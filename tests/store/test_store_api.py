from __future__ import annotations

import baton.store

PUBLIC = {
    "REDACTED",
    "RUN_STATUSES",
    "LockedRun",
    "LogWriteError",
    "Redactor",
    "RunRecord",
    "RunStatus",
    "SessionLog",
    "Store",
    "TaskRecord",
    "Transition",
    "new_run_id",
}


def test_public_names_stay_exported() -> None:
    assert set(baton.store.__all__) == PUBLIC
    assert all(hasattr(baton.store, name) for name in PUBLIC)
