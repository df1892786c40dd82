"""Claude Code as an in-process ACP agent, over claude-agent-sdk."""
