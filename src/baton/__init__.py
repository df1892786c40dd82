"""baton: run AI coding agents on tasks in git repositories, observable, controllable, durable."""

from baton.errors import BatonError

__all__ = ["BatonError", "__version__"]

__version__ = "0.1.0"
