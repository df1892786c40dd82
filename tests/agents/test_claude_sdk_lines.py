"""The Claude SDK parses Claude Code's stdout through baton's decoder (claude-agent-sdk is pinned)."""

from __future__ import annotations

import pytest
from claude_agent_sdk._errors import CLIJSONDecodeError
from claude_agent_sdk._internal.transport import subprocess_cli

from baton.agents.claude import agent


def test_the_sdk_reads_its_lines_with_baton_s_parser() -> None:
    assert subprocess_cli._parse_stdout_line is agent._parse_stdout_line
    # The SDK's reader looks the function up by this name at each line (a renamed one would be missed).
    assert "_parse_stdout_line" in subprocess_cli.SubprocessCLITransport._read_messages_impl.__code__.co_names


def test_lines_parse_as_the_sdk_parsed_them_with_exact_integers() -> None:
    line = '  {"type": "result", "usage": {"input_tokens": 18446744073709551617}, "total_cost_usd": 0.25}\r'
    assert agent._parse_stdout_line(line) == {
        "type": "result",
        "usage": {"input_tokens": 2**64 + 1},
        "total_cost_usd": 0.25,
    }
    assert type(agent._parse_stdout_line(line)["usage"]["input_tokens"]) is int  # type: ignore[index]
    assert agent._parse_stdout_line("") is None
    assert agent._parse_stdout_line("[SandboxDebug] not a message") is None
    with pytest.raises(CLIJSONDecodeError):
        agent._parse_stdout_line('{"type": "assist')
