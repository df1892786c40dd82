"""Where a run works (docs/workspaces.md): a git worktree of the user's repository, a clone
through a mirror cache, or the user's folder itself; ``BATON_PORT_BASE``; the setup step;
listing and removing workspaces (``baton workspaces``, ``baton gc``, ``baton rm``).

Light to import: each module is imported where it is used.
"""

__all__: list[str] = []  # its modules are imported where they are used
