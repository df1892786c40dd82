"""Offline determinism: a scripted model server and the scenarios it plays.

``ScriptedModelServer`` speaks the Anthropic Messages API and the OpenAI Responses API on loopback and answers from a
scenario (``src/baton/testing/scenarios/*.yaml``, see ``docs/scenarios.md``). Tests, the
``--scenario`` option and ``make demo`` use it instead of a real model.
"""

from __future__ import annotations

from baton.testing._from_cassette import scenario_from_cassette
from baton.testing._replay import CassettePlayer, ReplayTiming, answered_in
from baton.testing._sample import copy_sample_repo
from baton.testing._scenario import (
    Failure,
    Scenario,
    Step,
    TextBlock,
    ToolCall,
    When,
    list_scenarios,
    load_scenario,
    scenario_file,
    scenario_text,
)
from baton.testing._server import RecordedRequest, ScriptedModelServer
from baton.testing._tls import CertificateAuthority

__all__ = [
    "CassettePlayer",
    "CertificateAuthority",
    "Failure",
    "RecordedRequest",
    "ReplayTiming",
    "Scenario",
    "ScriptedModelServer",
    "Step",
    "TextBlock",
    "ToolCall",
    "When",
    "answered_in",
    "copy_sample_repo",
    "list_scenarios",
    "load_scenario",
    "scenario_file",
    "scenario_from_cassette",
    "scenario_text",
]
