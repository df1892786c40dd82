"""Browser sessions: a bearer token exchanged once for an ``HttpOnly`` cookie (docs/web.md).

``POST /v1/session`` takes a token (the local token or an RS256 JWT), checks it with the
server's :class:`~baton.server.auth.Authenticator` and answers with a cookie naming a random
session id; the session holds the token's :class:`~baton.server.auth.Principal` (its ``sub``,
scopes, ``run_id``/``task_id`` limits) and a CSRF token, and ends when the JWT would have
expired (``exp``), after ``session_seconds`` otherwise, or at logout. Sessions live in the
server's memory: a restart signs everyone out.

A request authenticated by the cookie that changes anything (any method but GET, HEAD,
OPTIONS) must carry the session's CSRF token in ``X-CSRF-Token`` and must not come from another
site (``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is not the server's own): else
403 ``csrf_failed``. A request with an ``Authorization`` header is judged by it alone.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import jwt
from starlette.requests import Request

from baton.errors import AuthError
from baton.server.auth import Authenticator, Principal

__all__ = ["COOKIE", "CSRF_HEADER", "Session", "Sessions", "check_same_site", "has_session_cookie"]

COOKIE: Final = "baton_session"
CSRF_HEADER: Final = "x-csrf-token"
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_SESSIONS: Final = 10_000


@dataclass(frozen=True)
class Session:
    id: str
    principal: Principal
    csrf_token: str
    expires_at: float  # epoch seconds


class Sessions:
    """The open sessions of one server process (the oldest dropped beyond ``_MAX_SESSIONS``)."""

    def __init__(self, authenticator: Authenticator, lifetime_seconds: float) -> None:
        self._authenticator = authenticator
        self._lifetime = lifetime_seconds
        self._open: OrderedDict[str, Session] = OrderedDict()

    def sign_in(self, token: str) -> Session:
        """A new session for ``token`` (its own ``AuthError`` if the token is not good)."""
        principal = self._authenticator.authenticate(f"Bearer {token}")
        expires = time.time() + self._lifetime
        token_expiry = _jwt_expiry(token)
        if token_expiry is not None:
            expires = min(expires, token_expiry)
        session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), expires)
        self._open[session.id] = session
        while len(self._open) > _MAX_SESSIONS:
            self._open.popitem(last=False)
        return session

    def get(self, session_id: str) -> Session | None:
        session = self._open.get(session_id)
        if session is None:
            return None
        if time.time() >= session.expires_at:
            del self._open[session_id]
            return None
        return session

    def sign_out(self, session_id: str) -> None:
        self._open.pop(session_id, None)

    def authenticate(self, request: Request) -> Principal:
        """The caller of a request that carries the session cookie (and no ``Authorization``)."""
        session = self.get(request.cookies.get(COOKIE, ""))
        if session is None:
            raise AuthError("session_expired", "the session has ended; sign in again at /login")
        if request.method not in _SAFE_METHODS:
            check_same_site(request)
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
                raise AuthError("csrf_failed", "send the session's CSRF token in X-CSRF-Token")
        return session.principal

    def session_of(self, request: Request) -> Session | None:
        return self.get(request.cookies.get(COOKIE, ""))


def check_same_site(request: Request) -> None:
    """``csrf_failed`` for a request a browser says came from another site."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise AuthError("csrf_failed", "a cross-site request is refused")
    origin = request.headers.get("origin")
    if origin is not None and origin != _own_origin(request):
        raise AuthError("csrf_failed", f"a request from {origin} is refused")


def _own_origin(request: Request) -> str:
    host = request.headers.get("host", "")
    return f"{request.url.scheme}://{host}"


def _jwt_expiry(token: str) -> float | None:
    """A JWT's ``exp`` (already verified by the authenticator); None for the local token."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return None
    expiry = claims.get("exp")
    return float(expiry) if isinstance(expiry, int | float) else None


def has_session_cookie(request: Request) -> bool:
    return COOKIE in request.cookies
