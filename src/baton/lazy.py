"""Lazy package exports: a package's names imported from their modules on first use (PEP 562).

``baton``, ``baton.acp``, ``baton.agents``, ``baton.store`` … keep their imports light (the CLI's
start-up, a client that only reads) by listing where each public name lives and importing that
module only when the name is first read::

    __getattr__ = lazy_exports(__name__, {"Baton": "baton.runs.api"})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that finds ``name`` in ``table``'s module (AttributeError otherwise)."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
