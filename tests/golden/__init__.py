"""Golden wire fixtures: recorded Claude streams, their ACP updates and runner events."""
