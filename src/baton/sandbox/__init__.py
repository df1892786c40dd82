"""Where agents run: contained in a PID namespace of their own, and sandboxed (docs/sandbox.md).

- :mod:`baton.sandbox.bwrap`: whether bubblewrap can make namespaces here (probed once).
- :mod:`baton.sandbox.plan`: a run's :class:`~baton.sandbox.plan.SandboxPlan` (what is
  writable, read-only, invisible) and the command line that starts an agent inside it.
"""
