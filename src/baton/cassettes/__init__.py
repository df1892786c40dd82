"""Cassettes: a run's model traffic recorded once, replayed offline (docs/scenarios.md "Cassettes").

- :mod:`baton.cassettes.format`: the file (one JSON Lines file, versioned): write and read.
- :mod:`baton.cassettes.recorder`: :class:`CassetteRecorder`, a model proxy observer writing one.
- :mod:`baton.cassettes.matching`: the normalized form of a request, the matcher and its diff.

The scripted model server plays a cassette back (``ScriptedModelServer.replaying``).
"""

from __future__ import annotations

from baton.cassettes.format import (
    CASSETTE_VERSION,
    Cassette,
    CassetteExchange,
    CassettePaths,
    load_cassette,
)
from baton.cassettes.matching import Matcher, Mismatch, normalized_request
from baton.cassettes.recorder import CassetteRecorder

__all__ = [
    "CASSETTE_VERSION",
    "Cassette",
    "CassetteExchange",
    "CassettePaths",
    "CassetteRecorder",
    "Matcher",
    "Mismatch",
    "load_cassette",
    "normalized_request",
]
