"""Signing in: a page without a session goes to sign-in, a wrong token is refused, the link
`baton serve` prints signs in without leaving the token in the address; the cookie, CSRF and
the security headers."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, expect
from tests.server._server import RunningServer
from tests.web.conftest import DESKTOP, sign_in

pytestmark = pytest.mark.timeout(120)


def test_a_page_without_a_session_goes_to_sign_in_and_a_wrong_token_is_refused(
    fresh_profile: BrowserContext, web: RunningServer
) -> None:
    page = fresh_profile.new_page()
    page.goto(f"{web.base_url}/inbox")
    page.wait_for_url(f"{web.base_url}/login?next=/inbox")
    page.get_by_label("Token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("token_invalid")
    assert page.url == f"{web.base_url}/login?next=/inbox"
    assert not fresh_profile.cookies()
    # An API call from the page without a session is refused.
    assert page.evaluate("fetch('/v1/runs').then(r => r.status)") == 401
    # The right token, typed: signed in, on the page asked for.
    page.get_by_label("Token").fill(web.token or "")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{web.base_url}/inbox")
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    (cookie,) = fresh_profile.cookies()
    assert cookie["name"] == "baton_session" and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert web.token not in cookie["value"]
    # Sign out: the session ends; the pages want a sign-in again.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{web.base_url}/login")
    page.goto(f"{web.base_url}/")
    page.wait_for_url(f"{web.base_url}/login?next=/")


def test_the_printed_link_signs_in_and_leaves_no_token_in_the_address(browser: Browser, web: RunningServer) -> None:
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        sign_in(page, web, "/")
        assert web.token and web.token not in page.url
        assert page.evaluate("history.length") >= 1 and web.token not in page.evaluate("location.href")
        assert all(web.token not in url for url in requested)  # the fragment is never sent
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    finally:
        context.close()


def test_changes_need_the_csrf_token_and_the_same_site(web: RunningServer) -> None:
    with httpx.Client(base_url=web.base_url, timeout=10) as client:
        signed = client.post("/v1/session", json={"token": web.token})
        assert signed.status_code == 201, signed.text
        csrf = signed.json()["csrf_token"]
        assert signed.json()["sub"] == "local" and "gates:decide" in signed.json()["scopes"]
        set_cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in set_cookie and "samesite=strict" in set_cookie and "path=/" in set_cookie
        assert client.get("/v1/runs").status_code == 200  # the cookie reads
        body = {"prompt": "x", "repo": "/nonexistent-repo"}
        missing = client.post("/v1/runs", json=body)
        assert missing.status_code == 403 and missing.json()["error"]["code"] == "csrf_failed"
        wrong = client.post("/v1/runs", json=body, headers={"X-CSRF-Token": "guess"})
        assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "csrf_failed"
        cross = client.post(
            "/v1/runs",
            json=body,
            headers={"X-CSRF-Token": csrf, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        )
        assert cross.status_code == 403 and cross.json()["error"]["code"] == "csrf_failed"
        # With the token and from the same site the request reaches the route (which refuses the repo).
        allowed = client.post("/v1/runs", json=body, headers={"X-CSRF-Token": csrf, "Origin": web.base_url})
        assert allowed.status_code != 403 or allowed.json()["error"]["code"] != "csrf_failed"
        # A cross-site sign-in is refused too (no login CSRF).
        foreign = client.post("/v1/session", json={"token": web.token}, headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403
        session_id = client.cookies["baton_session"]
        assert client.delete("/v1/session", headers={"X-CSRF-Token": csrf}).status_code == 204
        assert "baton_session" not in client.cookies
        ended = httpx.get(web.base_url + "/v1/runs", headers={"Cookie": f"baton_session={session_id}"})
        assert ended.status_code == 401 and ended.json()["error"]["code"] == "session_expired"


def test_pages_carry_a_content_security_policy(web: RunningServer) -> None:
    login = httpx.get(web.base_url + "/login")
    policy = login.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert '<script type="module" src="/static/login.js">' in login.text and "<script>" not in login.text
    assert httpx.get(web.base_url + "/static/app.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(web.base_url + "/static/..%2Fpages.py").status_code == 404
    assert httpx.get(web.base_url + "/static/nothing.js").status_code == 404
    redirect = httpx.get(web.base_url + "/runs/r1?x=1")
    assert redirect.status_code == 303 and redirect.headers["location"] == "/login?next=/runs/r1%3Fx%3D1"
