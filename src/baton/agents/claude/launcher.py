"""The ``cli_path`` wrapper between claude-agent-sdk and the real Claude Code binary.

The SDK starts ``cli_path`` with the whole environment of the baton process. This wrapper
starts the real binary instead with:

- an environment built only from the run's allow-list (written by baton into the launch
  file) plus the three variables the SDK itself sets for the CLI;
- a session of its own, so the agent and its tools can be killed as a group;
- inside the run's sandbox (:mod:`baton.sandbox`): the script baton writes starts this
  wrapper behind ``setsid`` (out of the terminal's foreground process group: a Ctrl-C is
  baton's to handle, as a cancel) and, where bubblewrap works, inside ``bwrap --unshare-pid
  --die-with-parent``, spawned by baton's event loop thread, so that the kernel ends Claude Code
  and every tool it started when baton dies; bubblewrap clears the environment but for the
  SDK's own variables;
- stdout filtered line by line: well-formed JSON objects go to the SDK, anything else
  (a garbage line, a truncated JSON line) goes to stderr behind ``MALFORMED_PREFIX``,
  where baton's stderr callback logs it (the SDK drops non-JSON lines silently and fails
  on a truncated one).

The wrapper dies with its parent (``PR_SET_PDEATHSIG``) and on exit kills everything left
behind that carries the run's ``BATON_RUN_ID``: Claude Code starts each Bash tool in a
session of its own, and an orphaned CLI would finish its tool and call the model again.

Usage (written by baton as a tiny shell script)::

    setsid [bwrap … --] python -P -m baton.agents.claude.launcher LAUNCH_FILE [claude arguments…]
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from baton.acp.wire import decode_json
from baton.agents.processes import RUN_ID_VARIABLE, kill_process_group, kill_run_processes
from baton.sandbox.netns import Door
from baton.sandbox.plan import SandboxPlan

__all__ = ["MALFORMED_PREFIX", "SDK_VARIABLES", "main", "write_launch_files"]

MALFORMED_PREFIX = "\x1ebaton-malformed-line "
SDK_VARIABLES = ("CLAUDE_CODE_ENTRYPOINT", "CLAUDE_AGENT_SDK_VERSION", "CLAUDE_CODE_SDK_READS_SESSION_STATE")
_PR_SET_PDEATHSIG = 1


def write_launch_files(
    directory: Path,
    *,
    binary: Path,
    env: dict[str, str],
    run_id: str,
    sandbox: SandboxPlan | None = None,
    cwd: Path,
    door: Door | None = None,
) -> Path:
    """Write the launch file and the executable ``cli_path`` script; return the script's path.
    ``door``: the FIFOs through which the sandbox's bubblewrap waits for its network (netns.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    launch_file = directory / "launch.json"
    launch_file.write_text(json.dumps({"binary": str(binary), "env": env, "run_id": run_id}))
    launch_file.chmod(0o600)
    script = directory / "claude"
    redirections = " " + door.redirections() if door is not None and sandbox is not None and sandbox.contained else ""
    command = " ".join(_script_command(launch_file, sandbox, cwd, door))
    script.write_text("#!/bin/sh\nexec " + command + ' "$@"' + redirections + "\n")
    script.chmod(0o700)
    return script


def _script_command(launch_file: Path, sandbox: SandboxPlan | None, cwd: Path, door: Door | None) -> list[str]:
    """The script's command line (shell words): setsid, the sandbox, this module."""
    words: list[str] = []
    setsid = shutil.which("setsid")
    if setsid:
        words.append(shlex.quote(setsid))
    if sandbox is not None and sandbox.contained:
        words += [shlex.quote(arg) for arg in sandbox.bwrap_args(cwd)]
        if door is not None:
            words += door.bwrap_args()
        words.append("--clearenv")
        for name in SDK_VARIABLES:  # the SDK sets these for the CLI (bubblewrap clears the rest)
            words += ["--setenv", name, f'"${{{name}-}}"']
        # this very baton (which may come from PYTHONPATH, not the installed one)
        words += ["--setenv", "PYTHONPATH", shlex.quote(str(Path(__file__).resolve().parents[3]))]
        words.append("--")
    command = [sys.executable, "-P", "-m", "baton.agents.claude.launcher", str(launch_file)]
    if door is not None and sandbox is not None and sandbox.contained:
        command = door.command(command)  # the program that makes the namespace's sockets first, if any
    return [*words, *(shlex.quote(word) for word in command)]


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(decode_json(line), dict)
    except ValueError:
        return False


def _pump_stdout(child: subprocess.Popen[bytes]) -> None:
    assert child.stdout is not None
    out = sys.stdout.buffer
    err = sys.stderr.buffer
    for raw in iter(child.stdout.readline, b""):
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            continue
        if _is_json_object(line):
            out.write(line + b"\n")
            out.flush()
        else:
            text = line.decode("utf-8", errors="replace")
            err.write((MALFORMED_PREFIX + json.dumps(text) + "\n").encode())
            err.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m baton.agents.claude.launcher LAUNCH_FILE [ARGS…]", file=sys.stderr)
        return 2
    _die_with_parent()
    with contextlib.suppress(OSError):  # no setsid binary: out of the terminal's process group here
        os.setsid()
    config: dict[str, Any] = json.loads(Path(args[0]).read_text())
    run_id = str(config["run_id"])
    env = {str(k): str(v) for k, v in config["env"].items()}
    env.update({name: os.environ[name] for name in SDK_VARIABLES if os.environ.get(name)})
    env[RUN_ID_VARIABLE] = run_id
    child = subprocess.Popen(
        [str(config["binary"]), *args[1:]],
        stdin=sys.stdin.fileno(),
        stdout=subprocess.PIPE,
        stderr=sys.stderr.fileno(),
        env=env,
        start_new_session=True,
    )

    def cleanup() -> None:
        kill_process_group(child.pid)
        kill_run_processes(run_id, exclude=frozenset({os.getpid()}))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        cleanup()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    pump = threading.Thread(target=_pump_stdout, args=(child,), daemon=True)
    pump.start()
    code = child.wait()
    pump.join(timeout=5)
    cleanup()
    return code


if __name__ == "__main__":
    sys.exit(main())
