"""The web app that ``baton serve`` serves at ``/`` (docs/web.md).

Plain ES modules and one stylesheet in ``static/`` (package data: no build step, no Node at
run time, nothing from a CDN); the HTML is one small shell per page kind, and every piece of
data the page shows comes from the public HTTP API (``/v1/…``) and its SSE streams.
"""

from __future__ import annotations

from baton.web.pages import SECURITY_HEADERS, router

__all__ = ["SECURITY_HEADERS", "router"]
