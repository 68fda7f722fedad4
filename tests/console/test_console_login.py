"""Signing in to the console of a service that has a token, in headless Chromium; the login page, a
refused token and the throttle in English and Simplified Chinese, at 1280 and 390 px (screenshots
in tests/console/screenshots, git-ignored)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _console import PY_BIN, Serve, require, screenshot, start_serve
from test_console_pages import LOCALES, _page, look_at, visit

pytestmark = [pytest.mark.slow, pytest.mark.real]

TOKEN = "browser-login-token-0123456789"


def _service(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Serve]:
    running = start_serve(
        tmp_path_factory.mktemp(name), {"time": {"command": require(PY_BIN / "mcp-server-time")}}, token=TOKEN
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    yield from _service(tmp_path_factory, "login")


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


#: what the login page says, in each language
WORDS = {
    "en": {
        "title": "Sign in",
        "token": "Service token",
        "refused": "That token is not accepted here.",
        "throttled": r"^Too many sign-in attempts from your address; try again in \d+ s\.$",
        "switch": "简体中文",
    },
    "zh-Hans": {
        "title": "登录",
        "token": "服务令牌",
        "refused": "此处不接受该令牌。",
        "throttled": r"^来自你的地址的登录尝试过多；请在 \d+ 秒后再试。$",  # noqa: RUF001 - Chinese punctuation
        "switch": "English",
    },
}


@pytest.fixture(scope="module")
def throttled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """A service of its own: once its throttle is reached, it refuses this address every sign-in."""
    yield from _service(tmp_path_factory, "throttled")


def _send(page: Any, lang: str, token: str) -> Any:
    """Posts ``token`` with the login form; returns the service's answer."""
    page.get_by_label(WORDS[lang]["token"]).fill(token)
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/login")) as answer:
        page.get_by_role("button", name=WORDS[lang]["title"], exact=True).click()
    page.wait_for_load_state()
    return answer.value


def test_the_login_page_a_refused_token_and_the_throttle_speak_the_browsers_language(
    browser: Any, throttled: Serve
) -> None:
    contexts = {
        lang: browser.new_context(base_url=throttled.url, locale=locale, viewport={"width": 1280, "height": 900})
        for lang, locale in LOCALES.items()
    }
    try:
        pages = {lang: _page(context) for lang, context in contexts.items()}
        for lang, page in pages.items():
            words = WORDS[lang]
            visit(page, "/login?next=%2Ftools", "login", lang)
            look_at(page, "login", lang)
            assert page.locator("h1").inner_text() == words["title"]
            assert page.title() == f"{words['title']} · mcpwire"
            assert page.locator("#main input[name=next]").get_attribute("value") == "/tools"
            refused = _send(page, lang, "wrong-token-but-long-enough")
            assert refused.status == 401 and refused.headers["content-language"] == lang
            assert page.get_by_role("alert").inner_text() == words["refused"]
            assert page.locator("#main input[name=next]").get_attribute("value") == "/tools"
            look_at(page, "login-refused", lang)
        # the throttle: the burst is spent, then every attempt from this address is refused
        for lang, page in pages.items():
            for _ in range(30):
                answer = _send(page, lang, "wrong-token-but-long-enough")
                if answer.status == 429:
                    break
                assert answer.status == 401
            else:
                pytest.fail("thirty wrong tokens in a row and no throttle")
            assert int(answer.headers["retry-after"]) >= 1
            assert re.match(WORDS[lang]["throttled"], page.get_by_role("alert").inner_text())
            look_at(page, "login-throttled", lang)
        # the switch on the login page: the other language, the same next page, remembered
        page = pages["en"]
        page.get_by_role("button", name=WORDS["en"]["switch"]).click()
        page.wait_for_url("**/login?next=%2Ftools")
        assert page.locator("h1").inner_text() == WORDS["zh-Hans"]["title"]
        assert page.evaluate("document.documentElement.lang") == "zh-Hans"
        page.goto("/login")
        assert page.get_by_label(WORDS["zh-Hans"]["token"]).count() == 1
        for page in pages.values():
            errors = [e for e in page.errors if "status of 401" not in e and "status of 429" not in e]
            assert errors == [], errors
    finally:
        for context in contexts.values():
            context.close()
