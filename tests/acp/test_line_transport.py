"""The line transport over a real child's pipes: every line, in order; nothing dropped."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from baton.agents.line_transport import MALFORMED_LINE_LIMIT, LineTransport

pytestmark = pytest.mark.timeout(20)

CHILD = r"""
import sys
sys.stdout.write('{"jsonrpc": "2.0", "method": "a"}\n')
sys.stdout.write('not json\n')
sys.stdout.write('\n')
sys.stdout.write('"a string"\n')
sys.stdout.write('x' * 70000 + '\n')
sys.stdout.flush()
sys.stderr.write('warning: something\n')
sys.stderr.flush()
for line in sys.stdin:
    sys.stdout.write(line)
    sys.stdout.flush()
    break
sys.stdout.write('{"jsonrpc": "2.0", "method": "trunc')
sys.stdout.flush()
"""


async def test_lines_become_messages_or_malformed_line_notifications() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout and process.stdin and process.stderr
    transport = LineTransport(process.stdout, process.stdin, process.stderr)
    received = [await transport.receive() for _ in range(5)]
    await transport.send({"jsonrpc": "2.0", "id": 7, "result": {"ok": "é"}})
    while (message := await transport.receive()) is not None:
        received.append(message)
    await process.wait()
    await transport.close()
    stdout = [m for m in received if m and m.get("method") != "_baton/console"]
    console = [m for m in received if m and m.get("method") == "_baton/console"]
    assert stdout[0] == {"jsonrpc": "2.0", "method": "a"}
    assert [m["params"]["line"] for m in stdout[1:4] if m["method"] == "_baton/malformed_line"][:2] == [
        "not json",
        '"a string"',
    ]
    long_line = stdout[3]["params"]["line"]
    assert len(long_line) == MALFORMED_LINE_LIMIT and set(long_line) == {"x"}
    assert stdout[4] == {"jsonrpc": "2.0", "id": 7, "result": {"ok": "é"}}
    assert stdout[5] == {
        "jsonrpc": "2.0",
        "method": "_baton/malformed_line",
        "params": {"line": '{"jsonrpc": "2.0", "method": "trunc', "stream": "stdout"},
    }
    assert console == [
        {"jsonrpc": "2.0", "method": "_baton/console", "params": {"level": "stderr", "message": "warning: something"}}
    ]
    assert list(transport.stderr_tail) == ["warning: something"]
    assert json.dumps(received)  # everything is plain JSON, ready for the log


BIG_NUMBERS = r"""
import sys
sys.stdout.write('{"jsonrpc": "2.0", "method": "m", "params": {"n": 18446744073709551616, "f": 2.5, "s": NaN}}\n')
sys.stdout.write('{"jsonrpc": "2.0", "method": "m", "params": {"name": "\\udcff.txt"}}\n')
sys.stdout.flush()
"""


async def test_huge_integers_lone_surrogates_and_nan_arrive_as_json_loads_reads_them() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BIG_NUMBERS, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout and process.stdin
    transport = LineTransport(process.stdout, process.stdin)
    first, second = await transport.receive(), await transport.receive()
    assert await transport.receive() is None
    await process.wait()
    await transport.close()
    assert first is not None and second is not None
    params = first["params"]
    assert params["n"] == 2**64 and type(params["n"]) is int  # orjson alone would give a float
    assert params["f"] == 2.5 and params["s"] != params["s"]  # NaN, as json.loads reads it
    assert second["params"] == {"name": "\udcff.txt"}
