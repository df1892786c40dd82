"""The sample repository of ``make demo``: a tiny Node project whose test fails."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["copy_sample_repo"]


def copy_sample_repo(destination: Path) -> Path:
    """Copy the sample repository's files into ``destination`` (created if missing)."""
    destination.mkdir(parents=True, exist_ok=True)
    _copy(resources.files("baton.testing") / "sample_repo", destination)
    return destination


def _copy(source: Traversable, destination: Path) -> None:
    for entry in source.iterdir():
        if entry.name == "__pycache__":
            continue
        target = destination / entry.name
        if entry.is_dir():
            target.mkdir(exist_ok=True)
            _copy(entry, target)
        else:
            target.write_bytes(entry.read_bytes())
