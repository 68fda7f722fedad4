"""Signing in to the console through a real identity provider (panva's oidc-provider), in headless
Chromium: the login page's "Sign in with ...", the provider's own login and consent pages, back to
the console with a session whose identity and role the provider's groups decide. The answers a
browser would not send (a changed state, no cookie, a made-up code) are sent with httpx.
Screenshots at 1280 and 390 px go to tests/console/screenshots (git-ignored)."""

from __future__ import annotations

import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _console import screenshot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oauth"))
from _idp import ADMIN_TOKEN, CONSOLE_CLIENT, Served, serving_with_idp

pytestmark = [pytest.mark.real, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    demo = {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server"]}
    with serving_with_idp(tmp_path_factory.mktemp("console-oidc"), {"demo": demo}) as running:
        yield running


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    context = browser.new_context(base_url=served.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


def sign_in_at_the_provider(page: Any, served: Served, user: str, *, shots: str | None = None) -> None:
    """From the console's login page through the provider's pages, as ``user``."""
    page.goto("/tools")
    page.wait_for_url("**/login?next=%2Ftools")
    button = page.locator("#sign-in-provider")
    assert button.inner_text() == f"Sign in with {urllib.parse.urlsplit(served.idp.issuer).netloc}"
    if shots:
        screenshot(page, f"{shots}-login")
    button.click()
    page.wait_for_url(f"{served.idp.issuer}/interaction/**")
    page.locator("input[name=login]").fill(user)
    page.locator("input[name=password]").fill("any password")
    if shots:
        screenshot(page, f"{shots}-provider-login")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").wait_for()
    if shots:
        screenshot(page, f"{shots}-provider-consent")
    page.get_by_role("button", name="Continue").click()


def test_a_person_signs_in_through_the_provider_and_acts_as_themselves(page: Any, served: Served) -> None:
    sign_in_at_the_provider(page, served, "alice", shots="oidc")
    page.wait_for_url(f"{served.url}/tools")  # the signed-in page moved on by itself
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert "mcpwire_oidc" not in cookies  # the sign-in's secrets are gone
    session = cookies["mcpwire_console"]
    assert (session["httpOnly"], session["sameSite"]) == (True, "Strict")
    page.goto("/tools/demo__echo")
    page.get_by_label("text").fill("signed in through the provider")
    page.get_by_role("button", name="Call echo").click()
    result = page.locator("#result .result.tool-ok pre.text")
    result.wait_for()
    assert result.inner_text() == "signed in through the provider"
    screenshot(page, "oidc-signed-in-tool")
    audit = httpx.get(
        f"{served.url}/api/v1/audit?tool=echo", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    ).json()["items"]
    assert any("user:alice@example.com" in (r["caller"] or "") for r in audit), audit
    # signing out ends the session
    page.goto("/")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")
    page.goto("/tools")
    page.wait_for_url("**/login?next=%2Ftools")


def test_the_provider_decides_the_role(page: Any, served: Served) -> None:
    sign_in_at_the_provider(page, served, "carol")  # a viewer: may look, may not call
    page.wait_for_url(f"{served.url}/tools")
    page.goto("/tools/demo__echo")
    # the page offers no call to a viewer, and says which role a call needs
    assert page.locator("#tryit-role").inner_text() == "Calling a tool needs the caller role."
    assert page.get_by_role("button", name="Call echo").count() == 0
    # nor does the service run one when the form is sent all the same
    csrf = page.locator("form.logout input[name=csrf_token]").get_attribute("value") or ""
    refused = page.request.post(
        f"{served.url}/tools/demo__echo",
        form={"csrf_token": csrf, "mode": "json", "raw": '{"text": "not allowed"}'},
        headers={"HX-Request": "true"},
    )
    assert "This needs the caller role; you are signed in as user:carol@example.com, a viewer." in refused.text()
    screenshot(page, "oidc-viewer-refused")


def test_a_person_with_no_role_here_is_told_so(page: Any, served: Served) -> None:
    sign_in_at_the_provider(page, served, "erin")
    page.wait_for_url("**/login/oidc/callback?**")
    alert = page.get_by_role("alert")
    assert alert.inner_text() == (
        "You are signed in at the identity provider, but no role of this service is given to you (claim "
        "'groups'); ask an administrator."
    )
    assert "mcpwire_console" not in {c["name"] for c in page.context.cookies()}
    screenshot(page, "oidc-no-role")


def _begin(client: httpx.Client) -> dict[str, str]:
    """Starts a sign-in; returns the authorization request's parameters."""
    began = client.get("/login/oidc?next=/audit")
    assert began.status_code == 303
    assert began.headers["cache-control"] == "no-store"
    cookie = began.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/login/oidc/callback" in cookie
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(began.headers["location"]).query))


def test_the_authorization_request_asks_for_what_openid_connect_needs(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as client:
        params = _begin(client)
        again = _begin(client)
    assert params["response_type"] == "code"
    assert params["client_id"] == CONSOLE_CLIENT
    assert params["redirect_uri"] == f"{served.url}/login/oidc/callback"
    assert params["scope"] == "openid email profile groups"
    assert params["code_challenge_method"] == "S256" and len(params["code_challenge"]) == 43
    # fresh state, nonce and verifier each time
    for name in ("state", "nonce", "code_challenge"):
        assert params[name] != again[name]
    assert "client_secret" not in params


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        ("no cookie", "This sign-in expired or was begun in another browser; sign in again."),
        ("another state", "The identity provider's answer does not match this sign-in (state); sign in again."),
        ("another issuer", "The answer came from another identity provider than this service's; sign in again."),
        ("a made-up code", "The identity provider refused to redeem the sign-in (invalid_grant); sign in again."),
        ("state twice", "The identity provider's answer repeats 'state'; sign in again."),
    ],
)
def test_a_callback_that_is_not_this_browsers_sign_in_is_refused(served: Served, tamper: str, message: str) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as client:
        params = _begin(client)
        answer = [("code", "made-up"), ("state", params["state"]), ("iss", served.idp.issuer)]
        if tamper == "no cookie":
            client.cookies.clear()
        elif tamper == "another state":
            answer[1] = ("state", "x" + params["state"])
        elif tamper == "another issuer":
            answer[2] = ("iss", served.idp.issuer + "/")
        elif tamper == "state twice":
            answer.append(("state", params["state"]))
        back = client.get("/login/oidc/callback?" + urllib.parse.urlencode(answer))
    assert back.status_code == 401
    assert f'<p class="problem" role="alert">{message.replace(chr(39), "&#39;")}</p>' in back.text
    assert "mcpwire_console" not in back.headers.get("set-cookie", "")
    log = (served.folder / "serve.log").read_text()
    assert (served.folder / "oidc-secret").read_text().strip() not in log + back.text
