"""Claude Code as an in-process ACP agent, over claude-agent-sdk (:mod:`baton.agents.claude.agent`;
its environment: :mod:`baton.agents.claude.environment`)."""

__all__: list[str] = []
