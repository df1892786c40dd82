"""The page routes: ``/`` (runs), ``/runs/{id}``, ``/inbox``, ``/new``, ``/login`` and ``/static/…``.

A page asked for without a live session is redirected to ``/login?next=<path>``. Every page is
the same shell (header, an empty ``<main>``); ``app.js`` fills it from the API. Responses carry
a Content-Security-Policy that allows only this origin's scripts, styles and connections (no
inline script, no remote origin, no framing).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from baton.server.state import server_state

__all__ = ["SECURITY_HEADERS", "router"]

router = APIRouter(include_in_schema=False)

SECURITY_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
_TYPES: Final = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
_STATIC_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]*\.(js|css|svg)")

_SHELL: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>baton</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css">
<script type="module" src="/static/app.js"></script>
</head>
<body data-page="{page}">
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/" aria-label="baton home">baton</a>
<nav aria-label="Main">
<a href="/" data-nav="runs">Runs</a>
<a href="/inbox" data-nav="inbox">Inbox<span class="count" data-pending-count hidden></span></a>
<a href="/new" data-nav="new">New task</a>
</nav>
<div class="account"><span data-who></span><button type="button" class="link" data-sign-out>Sign out</button></div>
</header>
<main id="main" tabindex="-1"><p class="muted" data-loading>Loading…</p></main>
</body>
</html>
"""

_LOGIN: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Sign in · baton</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css">
<script type="module" src="/static/login.js"></script>
</head>
<body data-page="login">
<main id="main" class="login">
<h1>Sign in to baton</h1>
<form data-sign-in>
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required
 aria-describedby="token-help">
<p id="token-help" class="muted">The local token (<code>baton token</code>) or a JWT for this server.
 The link <code>baton serve</code> prints signs you in at once.</p>
<button type="submit">Sign in</button>
<p class="error" role="alert" data-error></p>
</form>
</main>
</body>
</html>
"""


def _page(html: str) -> Response:
    return Response(
        html, media_type="text/html; charset=utf-8", headers={**SECURITY_HEADERS, "cache-control": "no-store"}
    )


def _signed_in_page(request: Request, page: str) -> Response:
    if server_state(request).sessions.session_of(request) is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='/')}", status_code=303, headers=SECURITY_HEADERS)
    return _page(_SHELL.replace("{page}", page))


@router.get("/")
async def runs_page(request: Request) -> Response:
    return _signed_in_page(request, "runs")


@router.get("/runs/{run_id}")
async def run_page(run_id: str, request: Request) -> Response:
    return _signed_in_page(request, "run")


@router.get("/inbox")
async def inbox_page(request: Request) -> Response:
    return _signed_in_page(request, "inbox")


@router.get("/new")
async def new_task_page(request: Request) -> Response:
    return _signed_in_page(request, "new")


@router.get("/login")
async def login_page() -> Response:
    return _page(_LOGIN)


@router.get("/static/{name}")
async def static_file(name: str) -> Response:
    if not _STATIC_NAME.fullmatch(name):
        return Response("not found", status_code=404, media_type="text/plain", headers=SECURITY_HEADERS)
    resource = resources.files("baton.web").joinpath("static", name)
    if not resource.is_file():
        return Response("not found", status_code=404, media_type="text/plain", headers=SECURITY_HEADERS)
    suffix = name[name.rindex(".") :]
    return Response(
        resource.read_bytes(),
        media_type=_TYPES[suffix],
        headers={**SECURITY_HEADERS, "cache-control": "no-cache"},
    )
