"""The gate in front of an untrusted repository's ``.baton/setup`` (docs/workspaces.md "Setup").

With ``[workspace] untrusted_setup = "ask"`` the script of a repository the configuration does
not trust runs only after a human approved it: a ``tool`` gate (``tool_name`` ``baton_setup``,
``bound_call_id`` ``setup``) whose ``input`` is ``{path, base_commit, sha256, script}`` — the
script's text as the base commit has it and its sha256 — bound (``bound_input_hash``) to exactly
that input. An approval runs the text the gate holds, after checking it hashes to its
``sha256``; an approval that edits the input, a denial, an expiry (nobody decided: never an
approval) or a cancelled run skips the setup, logged with the reason (``_baton/setup`` status
``skipped``). The run is ``paused`` on the gate meanwhile: it waits in its process for the
grace period, as a tool gate does, then parks (``_baton/setup`` ``{status: "gated", gate_id}``
is its last setup note); its resume (``baton resume``, the server's after the decision, an
adoption after a restart) finds that gate again — by the script's binding, never a new one —
and runs or skips the setup by its decision before the agent starts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import rfc8785

from baton.gates.ledger import GateLedger
from baton.runs.lifecycle import RunLifecycle
from baton.runs.parking import wait_for_decision
from baton.store import Store
from baton.workspaces.setup import SETUP_FILE, SetupStep

__all__ = ["SETUP_CALL_ID", "SETUP_TOOL", "SetupVerdict", "gate_setup", "setup_gate_input", "setup_gate_pending"]

SETUP_TOOL: Final = "baton_setup"  # the gate's tool_name
SETUP_CALL_ID: Final = "setup"  # its tool_call_id and bound_call_id

Note = Callable[[str, Any], object]


@dataclass(frozen=True)
class SetupVerdict:
    """What the gate said: the step to run (approved), or why the setup is skipped."""

    step: SetupStep | None
    reason: str | None = None
    gate_id: str | None = None
    parked: bool = False  # nobody decided within the grace period: the run parks on gate_id


def setup_gate_input(step: SetupStep, base_commit: str | None) -> dict[str, Any]:
    """What the gate shows and binds: the script, its hash, where it comes from."""
    return {"path": SETUP_FILE, "base_commit": base_commit, "sha256": step.sha256(), "script": step.script}


def _bound_hash(value: dict[str, Any]) -> str:
    return hashlib.sha256(rfc8785.dumps({"tool_name": SETUP_TOOL, "input": value})).hexdigest()


async def gate_setup(
    step: SetupStep,
    *,
    store: Store,
    lifecycle: RunLifecycle,
    run_id: str,
    note: Note,
    base_commit: str | None,
    grace_seconds: float,
    expiry_seconds: float,
    cancelled: asyncio.Event,
) -> SetupVerdict:
    """The setup's gate — the one opened before for this very script (a resumed run), else a new
    one — waited for up to ``grace_seconds``; what runs, or the gate to park on (never fail open)."""
    shown = setup_gate_input(step, base_commit)
    bound = _bound_hash(shown)
    ledger = GateLedger(store)
    earlier = [
        gate
        for gate in await ledger.list(run_id=run_id)
        if gate.tool_name == SETUP_TOOL and gate.bound_input_hash == bound
    ]
    if earlier:
        gate = earlier[-1]
    else:
        lines = len((step.script or "").splitlines())
        gate, _superseded = await ledger.open(
            run_id,
            "tool",
            summary=f"run {SETUP_FILE} ({lines} lines, sha256 {shown['sha256'][:12]}) before the agent starts",
            tool_name=SETUP_TOOL,
            tool_call_id=SETUP_CALL_ID,
            bound_call_id=SETUP_CALL_ID,
            bound_input_hash=bound,
            input=shown,
            expires_in_seconds=expiry_seconds,
        )
        note("setup", {"status": "gated", "gate_id": gate.id, "sha256": shown["sha256"]})
    if gate.status == "pending":
        await lifecycle.pause_on_gate(
            gate.id,
            {
                "gate_id": gate.id,
                "kind": gate.kind,
                "tool_call_id": gate.tool_call_id,
                "tool_name": gate.tool_name,
                "bound_call_id": gate.bound_call_id,
                "bound_input_hash": gate.bound_input_hash,
                "summary": gate.summary,
                "expires_at": gate.expires_at,
                "reason": "untrusted_setup",
            },
        )
        decided = await wait_for_decision(store, run_id, gate.id, within=grace_seconds, stop=cancelled)
        if decided is None and cancelled.is_set():
            await ledger.deny_all_pending(run_id, reason="cancelled", decided_by="cancel")
            decided = await ledger.get(gate.id)
        if decided is None:  # nobody decided within the grace period: the run parks on the gate
            return SetupVerdict(None, None, gate.id, parked=True)
        await lifecycle.gate_decided()
    else:
        decided = gate
    decision = decided.decision or {}
    note(
        "gate_resolved",
        {
            "gate_id": decided.id,
            "decision": decision.get("decision") or decided.status,
            "reason": decision.get("reason"),
            "decided_by": decided.decided_by,
        },
    )
    if decided.status != "approved":
        why = decision.get("reason") or decided.status
        return SetupVerdict(None, f"{SETUP_FILE} not run: its gate {decided.id} was {decided.status} ({why})", gate.id)
    edited = decision.get("updated_input")
    if edited is not None and edited != shown:
        return SetupVerdict(
            None, f"{SETUP_FILE} not run: the approval of {decided.id} edited it (an edit never runs)", gate.id
        )
    held = decided.input or {}
    script = held.get("script")
    if not isinstance(script, str) or hashlib.sha256(script.encode()).hexdigest() != shown["sha256"]:
        why = f"{SETUP_FILE} not run: gate {decided.id} holds another script than it showed"
        return SetupVerdict(None, why, gate.id)
    return SetupVerdict(replace(step, script=script, source="approved"), None, gate.id)


def setup_gate_pending(entries: Iterable[Mapping[str, Any]]) -> bool:
    """The run's log says its setup waited on a gate and never ran nor was skipped (it parked, or
    its process ended, while the gate was pending): its resume gates the setup again first."""
    last: Any = None
    for entry in entries:
        if entry.get("method") == "_baton/setup":
            last = ((entry.get("payload") or {}).get("params") or {}).get("status")
    return bool(last == "gated")
