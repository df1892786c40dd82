"""The gates layer's list of agents that run an edited approval is the registry's."""

from __future__ import annotations

import pytest

from baton.agents import AGENTS, applies_edits
from baton.gates.decisions import AGENTS_APPLYING_EDITS

pytestmark = pytest.mark.timeout(30)


def test_the_agents_applying_edits_are_the_registrys() -> None:
    assert {name for name, entry in AGENTS.items() if entry.applies_edits} == AGENTS_APPLYING_EDITS
    assert all(applies_edits(name) == (name in AGENTS_APPLYING_EDITS) for name in (*AGENTS, "command", "gone"))
