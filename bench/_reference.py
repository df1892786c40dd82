"""The TypeScript reference run side by side: ``bench/reference`` (npm ``@posthog/agent``, pinned).

:func:`measure` writes baton's generated log entries in the reference's log format and times one
of the reference's units on them with ``node bench/reference/run.mjs`` in the same ``make bench``
run (see that script for the units). The package is installed by ``make setup`` (``npm install
--prefix bench/reference``) or here on first use. A metric whose ``reference`` comes from here
says ``"reference_measured": true``; a fixed figure copied from a note says ``false``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from baton.events.entry import LogEntry

__all__ = ["REFERENCE", "ensure_installed", "measure", "reference_log"]

REFERENCE = Path(__file__).resolve().parent / "reference"
_STAMP = REFERENCE / "node_modules" / ".package-lock.json"


def ensure_installed() -> None:
    """Install the pinned reference into ``bench/reference/node_modules`` unless it is there."""
    lock = REFERENCE / "package-lock.json"
    if _STAMP.exists() and _STAMP.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the reference benchmarks need node and npm (make setup installs them)")
    subprocess.run(
        [npm, "install", "--prefix", str(REFERENCE), "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        check=True,
    )


def reference_log(entries: Iterable[LogEntry]) -> bytes:
    """baton's log entries as the reference stores the same run: one ``StoredEntry`` a line.

    Every payload is written as it is, but for the two places where the runtimes record the
    same fact differently: a prompt (baton logs the ``session/prompt`` request; the reference
    logs a ``user_message_chunk`` update) and a tool call's identity (baton's
    ``_meta.baton.tool_name``; the reference's ``_meta.claudeCode``, which its fold reads).
    """
    lines = []
    for entry in entries:
        payload = entry["payload"]
        params = payload.get("params")
        if entry["method"] == "session/prompt" and isinstance(params, dict):
            update = {"sessionUpdate": "user_message_chunk", "content": params["prompt"]}
            params = {"sessionId": params["sessionId"], "update": update}
            payload = {"jsonrpc": "2.0", "method": "session/update", "params": params}
        elif entry["method"] == "session/update" and isinstance(params, dict):
            update = params["update"]
            if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
                claude = {
                    "toolCallId": update.get("toolCallId"),
                    "toolName": update["_meta"]["baton"].get("tool_name"),
                    "toolInput": update.get("rawInput"),
                    "toolResponse": update.get("rawOutput"),
                }
                update = {**update, "_meta": {**update["_meta"], "claudeCode": claude}}
                payload = {**payload, "params": {**params, "update": update}}
        stored = {"type": "notification", "timestamp": entry["ts"], "notification": payload}
        lines.append(json.dumps(stored, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def measure(unit: str, log: bytes, *, runs: int = 5) -> float:
    """The reference's median CPU time of ``unit`` on ``log`` (its format), in seconds."""
    ensure_installed()
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("the reference benchmarks need node")
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as file:
        file.write(log)
        file.flush()
        done = subprocess.run(
            [node, "--expose-gc", str(REFERENCE / "run.mjs"), unit, file.name, str(runs)],
            capture_output=True,
            text=True,
            cwd=REFERENCE,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the reference's {unit} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["median_ms"]) / 1000
