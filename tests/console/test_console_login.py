"""Signing in to the console of a service that has a token, in headless Chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _console import PY_BIN, Serve, require, screenshot, start_serve

pytestmark = [pytest.mark.slow, pytest.mark.real]

TOKEN = "browser-login-token-0123456789"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    folder = tmp_path_factory.mktemp("login")
    running = start_serve(folder, {"time": {"command": require(PY_BIN / "mcp-server-time")}}, token=TOKEN)
    try:
        yield running
    finally:
        running.stop()


def test_the_token_is_exchanged_for_a_strict_http_only_session(browser: Any, serve: Serve) -> None:
    context = browser.new_context(base_url=serve.url, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto("/tools?q=time")
        page.wait_for_url("**/login?next=*")
        screenshot(page, "login")
        page.get_by_label("Service token").fill("wrong-token-but-long-enough")
        page.get_by_role("button", name="Sign in").click()
        page.locator(".problem", has_text="That token is not accepted here").wait_for()
        page.get_by_label("Service token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/tools?q=time")
        page.locator('#tool-list a[href="/tools/time__convert_time"]').wait_for()
        page.locator("#live[data-state=on]").wait_for()  # the event stream takes the session too
        (cookie,) = context.cookies()
        assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == ("mcpwire_console", True, "Strict")
        assert page.evaluate("document.cookie") == ""
        # the session is not the API's token
        with httpx.Client(base_url=serve.url, cookies={cookie["name"]: cookie["value"]}) as client:
            assert client.get("/api/v1/servers").status_code == 401
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url("**/login")
        page.goto("/")
        page.wait_for_url("**/login?next=*")
    finally:
        context.close()


def test_forms_work_without_javascript(browser: Any, serve: Serve) -> None:
    context = browser.new_context(base_url=serve.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/login")
        page.get_by_label("Service token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(serve.url + "/")
        page.goto("/tools/time__get_current_time")
        page.get_by_role("textbox", name=re.compile(r"^Timezone")).fill("Etc/UTC")
        page.get_by_role("button", name="Call get_current_time").click()
        assert '"timezone": "Etc/UTC"' in page.locator("#result pre.text").inner_text()
        page.goto("/")
        page.locator('#servers tr[data-server="time"]').get_by_role("button", name="Disable time").click()
        page.wait_for_url(serve.url + "/")
        assert page.locator('#servers tr[data-server="time"] .status-disabled').count() == 1
    finally:
        context.close()
