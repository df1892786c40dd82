"""``POST /v1/session`` (sign in: a token for a cookie), ``GET /v1/session``, ``DELETE /v1/session``.

The web page's way in (docs/web.md, ``baton.server.sessions``): the token is sent once, in the
body, and never again; the cookie is ``HttpOnly`` and ``SameSite=Strict``.
"""

from __future__ import annotations

import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from baton.errors import AuthError
from baton.server.auth import Principal
from baton.server.models import ErrorResponse, Session, SignInRequest
from baton.server.routes._access import AUTH_RESPONSES
from baton.server.sessions import COOKIE, check_same_site
from baton.server.sessions import Session as OpenSession
from baton.server.state import server_state

__all__ = ["router"]

router = APIRouter(prefix="/v1/session", tags=["session"], responses=AUTH_RESPONSES)


def _body(principal: Principal, session: OpenSession | None) -> dict[str, Any]:
    expires = None
    if session is not None:
        expires = datetime.datetime.fromtimestamp(session.expires_at, datetime.UTC).isoformat().replace("+00:00", "Z")
    return Session(
        sub=principal.sub,
        scopes=sorted(principal.scopes),
        run_id=principal.run_id,
        task_id=principal.task_id,
        csrf_token=session.csrf_token if session else None,
        expires_at=expires,
    ).model_dump()


@router.post(
    "",
    status_code=201,
    response_model=Session,
    responses={
        403: {"model": ErrorResponse, "description": "csrf_failed (a cross-site request)"},
        422: {"model": ErrorResponse, "description": "request_invalid"},
        429: {"model": ErrorResponse, "description": "rate_limited"},
    },
)
async def sign_in(body: SignInRequest, request: Request) -> Response:
    """Exchange a token (the local token or an RS256 JWT) for a session cookie."""
    check_same_site(request)
    state = server_state(request)
    state.commands.take("sign-in:" + (request.client.host if request.client else "?"))
    session = state.sessions.sign_in(body.token)
    old = request.cookies.get(COOKIE)
    if old:
        state.sessions.sign_out(old)
    response = JSONResponse(_body(session.principal, session), status_code=201)
    response.set_cookie(
        COOKIE,
        session.id,
        max_age=max(1, int(session.expires_at - datetime.datetime.now(datetime.UTC).timestamp())),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.headers["cache-control"] = "no-store"
    return response


_BEARER_OR_COOKIE: dict[str, Any] = {"security": [{"HTTPBearer": []}]}  # or the session cookie


@router.get("", response_model=Session, openapi_extra=_BEARER_OR_COOKIE)
async def who(request: Request) -> Response:
    """Who the caller is: the session's subject, scopes and CSRF token (or the bearer token's)."""
    state = server_state(request)
    authorization = request.headers.get("authorization")
    if authorization is None and COOKIE in request.cookies:
        session = state.sessions.session_of(request)
        if session is None:
            raise AuthError("session_expired", "the session has ended; sign in again at /login")
        return JSONResponse(_body(session.principal, session), headers={"cache-control": "no-store"})
    return JSONResponse(_body(state.authenticator.authenticate(authorization), None))


@router.delete(
    "",
    status_code=204,
    responses={403: {"model": ErrorResponse, "description": "csrf_failed"}},
    openapi_extra=_BEARER_OR_COOKIE,
)
async def sign_out(request: Request) -> Response:
    """End the session (sign out); the cookie is cleared."""
    state = server_state(request)
    if COOKIE in request.cookies:
        state.sessions.authenticate(request)  # the CSRF token is required, as for every change
        state.sessions.sign_out(request.cookies[COOKIE])
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
