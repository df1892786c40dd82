"""Which repositories the configuration trusts (``[workspace] trusted``): the one rule.

A trusted repository's committed files may act on a run: its ``.baton/setup`` runs before the
agent starts (docs/workspaces.md) and its ``CLAUDE.md``/``AGENTS.md`` reach the agent
(docs/agents.md "Repository instructions"). Everything that asks whether a repository is
trusted asks :func:`is_trusted`.
"""

from __future__ import annotations

from pathlib import Path

from baton.config import Settings
from baton.workspaces.mirror import is_git_url

__all__ = ["is_trusted"]


def is_trusted(settings: Settings, repo: str) -> bool:
    """Whether ``repo`` (a workspace record's ``repo``: the user's repository as a resolved path,
    or the URL a clone was made from) is one the configuration names: a URL equal to the entry,
    or a path that resolves to the same directory."""
    for entry in settings.workspace_trusted:
        if entry == repo or (not is_git_url(entry) and Path(entry).expanduser().absolute().resolve() == Path(repo)):
            return True
    return False
