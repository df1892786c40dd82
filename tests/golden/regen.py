"""Rewrite the golden files on purpose: ``python -m tests.golden.regen``; review the diff.

The tests compare against these files and never write them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.events.project import project

from .build import GOLDEN, SAMPLES, build_sample
from .codex import ACP_SAMPLES, CODEX_SAMPLES, build_codex_sample
from .minimal import MINIMAL

__all__ = ["dumps", "expected_files", "main"]


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def expected_files() -> dict[Path, str]:
    """Every golden file and the text it must hold."""
    files: dict[Path, str] = {}
    for name in SAMPLES:
        updates, entries = build_sample(name)
        files[GOLDEN / f"{name}.updates.json"] = dumps(updates)
        files[GOLDEN / f"{name}.events.json"] = dumps(project(entries))
    for name in (*CODEX_SAMPLES, *ACP_SAMPLES):
        entries = build_codex_sample(name)
        files[GOLDEN / f"{name}.entries.json"] = dumps(entries)
        files[GOLDEN / f"{name}.events.json"] = dumps(project(entries))
    for event_type, build in MINIMAL.items():
        entries = build().entries
        files[GOLDEN / "events" / f"{event_type}.json"] = dumps({"entries": entries, "events": project(entries)})
    return files


def main() -> None:
    for path, text in expected_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(GOLDEN.parent.parent)}")


if __name__ == "__main__":
    main()
