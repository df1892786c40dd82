"""The HTTP endpoints, one module per resource."""
