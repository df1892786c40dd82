"""Log-entry model and the runner-event projection (pure functions)."""
