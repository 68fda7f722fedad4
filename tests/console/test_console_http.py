"""The console over HTTP, without a browser: sessions, CSRF, the login page, the security headers,
and that no page carries inline script or style (the service runs in this process, with the
bundled demo server)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
import pytest
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _harness import demo_entry, running_service, write_config

from mcpwire.service.console.web import CSP
from mcpwire.service.settings import Secret, Settings

TOKEN = "console-test-token-0123456789"
PAGES = ["/", "/tools", "/tools/demo__echo"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "mcp.json", {"demo": demo_entry()})


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


async def test_pages_carry_the_policy_and_no_inline_script(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        for path in PAGES:
            reply = await svc.client.get(path)
            assert reply.status_code == 200, (path, reply.text[:300])
            assert reply.headers["content-security-policy"] == CSP
            assert reply.headers["x-frame-options"] == "DENY"
            assert reply.headers["x-content-type-options"] == "nosniff"
            assert reply.headers["referrer-policy"] == "same-origin"
            scripts = re.findall(r"<script\b[^>]*>", reply.text)
            assert scripts and all(' src="/console/static/' in s for s in scripts), scripts
            assert not re.search(r"<[a-z][^>]*\s(style|on[a-z]+)=", reply.text), path
        async with httpx.AsyncClient(base_url=svc.url) as fresh:
            cookie = (await fresh.get("/")).headers.get("set-cookie", "")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert (await svc.client.get("/console/static/htmx-2.0.4.min.js")).status_code == 200
        assert (await svc.client.get("/console/static/htmx-LICENSE.txt")).text.startswith("Zero-Clause BSD")


async def test_a_change_needs_the_sessions_csrf_token(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        token = csrf_of((await c.get("/")).text)
        refused = await c.post("/servers/demo/disable", data={"csrf_token": "0" * 40})
        assert refused.status_code == 403 and "CSRF token" in refused.text
        refused = await c.post("/servers/demo/disable", data={})
        assert refused.status_code == 403
        assert (await c.get("/api/v1/servers/demo")).json()["enabled"] is True
        # another site's page cannot post here at all (the service's Origin check)
        foreign = await c.post(
            "/servers/demo/disable", data={"csrf_token": token}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        # a token from another session is refused too
        async with httpx.AsyncClient(base_url=svc.url) as other:
            other_token = csrf_of((await other.get("/")).text)
        assert other_token != token
        assert (await c.post("/servers/demo/disable", data={"csrf_token": other_token})).status_code == 403
        done = await c.post("/servers/demo/disable", data={"csrf_token": token}, headers={"HX-Request": "true"})
        assert done.status_code == 200 and "demo disabled" in done.text
        assert (await c.get("/api/v1/servers/demo")).json()["enabled"] is False


async def test_with_a_token_the_console_asks_to_sign_in(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=0, token=Secret(TOKEN))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        running_service(db, config, settings=settings, headers=headers) as svc,
        httpx.AsyncClient(base_url=svc.url) as browser,
    ):
        first = await browser.get("/tools?q=echo")
        assert first.status_code == 303 and first.headers["location"] == "/login?next=%2Ftools%3Fq%3Decho"
        assert (await browser.get("/console/events", headers={"HX-Request": "true"})).status_code == 401
        page = await browser.get("/login")
        assert page.status_code == 200 and 'type="password"' in page.text
        assert page.headers["content-security-policy"] == CSP
        wrong = await browser.post("/login", data={"token": "not-the-token-at-all", "next": "/"})
        assert wrong.status_code == 401 and "That token is not accepted here" in wrong.text
        assert "mcpwire_console" not in browser.cookies
        outside = await browser.post("/login", data={"token": TOKEN, "next": "//evil.example/x"})
        assert outside.status_code == 303 and outside.headers["location"] == "/"
        cookie = outside.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        signed = await browser.get("/tools?q=echo")
        assert signed.status_code == 200 and "demo__echo" in signed.text
        # the console's cookie is not the API's bearer token
        assert (await browser.get("/api/v1/servers")).status_code == 401
        # a tampered session is no session
        value = browser.cookies["mcpwire_console"]
        browser.cookies.set("mcpwire_console", value[:-1] + ("0" if value[-1] != "0" else "1"))
        assert (await browser.get("/")).status_code == 303
        browser.cookies.set("mcpwire_console", value)
        out = await browser.post("/logout", data={"csrf_token": csrf_of(signed.text)})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        # logging out ended the session on the service: the old cookie is dead at once
        browser.cookies.set("mcpwire_console", value)
        assert (await browser.get("/tools?q=echo")).status_code == 303


async def test_a_page_hears_what_changed_while_it_was_made(db: str, config: Path) -> None:
    """A page names the event stream's position it was made at: a change published before its
    stream opens still reaches its live parts (else a quarantine or an approval that comes in
    while the page loads would never show until a reload)."""
    async with running_service(db, config) as svc:
        page = (await svc.client.get("/")).text
        found = re.search(r'data-events="(/console/events\?after=[^"]+)"', page)
        assert found, "the page names no position in the event stream"
        source = found.group(1).replace("&amp;", "&")
        # a change after the page was made, before its stream opens
        assert (await svc.client.patch("/api/v1/servers/demo", json={"enabled": False})).is_success
        kinds: list[str] = []
        with trio.move_on_after(10):
            async with svc.client.stream("GET", source) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("event: "):
                        kinds.append(line.removeprefix("event: "))
                    if "status" in kinds:
                        break
        assert "status" in kinds and "reset" not in kinds, kinds
        # a stream opened without a position hears only what comes after it
        async with svc.client.stream("GET", "/console/events") as stream:
            with trio.move_on_after(1):
                async for line in stream.aiter_lines():
                    assert not line.startswith("event: "), line
