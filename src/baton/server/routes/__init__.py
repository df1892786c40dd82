"""The HTTP endpoints, one module per resource."""

__all__: list[str] = []
