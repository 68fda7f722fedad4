"""Every page of the console, in English and in Simplified Chinese, at 1280 and 390 px, in headless
Chromium against a real ``mcpwire serve`` (server-everything, server-memory, mcp-server-time, the
hostile fake, and a server that cannot start): no browser console error, no horizontal scrolling
on a phone, no English left on a Chinese page (and no Chinese on an English one), and the
screenshots saved (tests/console/screenshots, git-ignored) to be looked at.

Also: the navigation says what needs attention and follows it live; a server in error looks like
one; the language is taken from the browser and the switch is remembered; a viewer is offered no
action it cannot take; the catalogue adds a server with its values asked for, refused entries
listing every problem in the config loader's words; each tool has its switch; the tool list reads
as OpenAI, Anthropic or Markdown tools; audit records open to arguments, result and trace.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _console import SCREENSHOTS, WIDTHS, Serve, console_config, signed_in, start_serve
from test_console_browser import WATCH

pytestmark = [pytest.mark.slow, pytest.mark.real]

#: the page whose text a later change (sign-in through an identity provider) is rewriting now:
#: it renders in English only until it is translated too, so it is checked for overflow and
#: errors but not for language
KNOWN_ENGLISH_ONLY = frozenset({"login"})

#: words a Chinese page may show in Latin letters: names of things, units, acronyms (all-capital
#: words such as API, MCP, JSON or an environment variable are allowed as they are)
ALLOWED = frozenset(
    {
        "mcpwire", "mcp", "json", "ms", "http", "https", "stdio", "sse", "uvx", "npx",
        "OpenAI", "Anthropic", "Markdown", "GitHub", "SQLite", "Git", "Playwright", "Enter", "Shift",
        "base64", "wttr", "in", "p50", "p95",
    }
)  # fmt: skip

#: every visible text (and label-like attribute) of the page that is not marked as data
#: (translate="no": names, descriptions, results from servers) or as English on purpose
#: (lang="en": the config loader's and the API's own words)
VISIBLE_TEXT = """() => {
  const skip = el => el.closest('[translate="no"], [lang="en"], script, style, template, noscript');
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    if (!text || !node.parentElement || skip(node.parentElement)) continue;
    out.push(text);
  }
  for (const el of document.body.querySelectorAll("[title], [aria-label], [placeholder], [alt]")) {
    if (skip(el)) continue;
    for (const name of ["title", "aria-label", "placeholder", "alt"]) {
      const value = el.getAttribute(name);
      if (value && value.trim()) out.push(value.trim());
    }
  }
  out.push(document.title);
  // what the page shows as data: its words may come back inside a translated label
  // ("Remove everything" as an aria-label), as the value they stand for
  const data = [...document.querySelectorAll('[translate="no"], [lang="en"]')].map(e => e.textContent);
  return {texts: out, data: data};
}"""

OVERFLOW = "() => document.documentElement.scrollWidth - window.innerWidth"


WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")


def english_words(shown: dict[str, list[str]]) -> list[str]:
    """The words in Latin letters a Chinese page should not show: any but the allowed ones and
    those of the data the page shows."""
    data = {w for text in shown["data"] for w in WORD.findall(text)}
    found: list[str] = []
    for text in shown["texts"]:
        for word in WORD.findall(text):
            if word in ALLOWED or word.lower() in ALLOWED or word.isupper() or word in data:
                continue
            found.append(f"{word!r} in {text[:80]!r}")
    return found


def chinese(texts: list[str]) -> list[str]:
    return [t for t in texts if any("\u4e00" <= ch <= "\u9fff" for ch in t)]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    folder = tmp_path_factory.mktemp("pages")
    servers = console_config(folder)
    # a server that cannot start: it is in error for as long as the test runs
    servers["broken"] = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    running = start_serve(folder, servers)
    try:
        yield running
    finally:
        running.stop()


def api(serve: Serve) -> httpx.Client:
    return httpx.Client(base_url=serve.url, timeout=60, headers=serve.headers)


@pytest.fixture(scope="module")
def waiting(serve: Serve) -> Iterator[str]:
    """A call waiting for approval for as long as the module runs (the navigation counts it)."""
    out: dict[str, Any] = {}

    def call() -> None:
        with api(serve) as client:
            reply = client.post("/api/v1/tools/everything__get-sum/call", json={"arguments": {"a": 20, "b": 22}})
            out["reply"] = reply

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(60)
    reply = out["reply"]
    assert reply.status_code == 202, reply.text
    approval = reply.json()["approvalId"]
    yield approval
    with api(serve) as client:
        client.post(f"/api/v1/approvals/{approval}", json={"decision": "deny", "reason": "done testing"})


@pytest.fixture(scope="module")
def prepared(serve: Serve, waiting: str) -> dict[str, str]:
    """What the pages show: calls in the audit log, a quarantined tool, a finished check run."""
    with api(serve) as client:
        # the report tool's first definition is pinned before it changes (else the changed one
        # would be the first seen)
        deadline = time.monotonic() + 60
        while not any(
            p["tool"] == "report" for p in client.get("/api/v1/pins", params={"server": "hostile"}).json()["items"]
        ):
            assert time.monotonic() < deadline, "the hostile server's tools were never pinned"
            time.sleep(0.2)
        for text in ("one", "two"):
            assert client.post("/api/v1/tools/everything__echo/call", json={"arguments": {"message": text}}).is_success
        assert client.post("/api/v1/tools/hostile__fail/call", json={"arguments": {}}).json()["isError"] is True
        (serve.state / "description").write_text("Reports the tides instead.")
        assert client.post("/api/v1/servers/hostile/restart").status_code == 202
    return {"approval": waiting}


def _page(context: Any) -> Any:
    page = context.new_page()
    page.errors = []
    page.on("console", lambda m: m.type == "error" and page.errors.append(f"{m.text} ({m.location}, {page.url})"))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    return page


@pytest.fixture(scope="module", params=["en", "zh-Hans"])
def lang(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def context(browser: Any, serve: Serve, lang: str) -> Iterator[Any]:
    locale = "zh-CN" if lang == "zh-Hans" else "en-US"
    made = signed_in(browser, serve, viewport={"width": 1280, "height": 900}, locale=locale)
    made.add_init_script(WATCH)
    made.set_default_timeout(30_000)
    try:
        yield made
    finally:
        made.close()


FINISHED = '#check-runs tr[data-run][data-status="pass"], #check-runs tr[data-run][data-status="fail"]'


def finished_run(page: Any) -> str:
    """A finished check run of the hostile server: the one there is, or one started now."""
    page.goto("/checks")
    if page.locator(FINISHED).count() == 0:
        page.locator("#check-server").select_option("hostile")
        page.locator("#check-only").fill("SV-01")
        page.locator("form.check-form button[type=submit]").click()
        page.locator(FINISHED).first.wait_for(timeout=120_000)
    return str(page.locator(FINISHED).first.get_attribute("data-run"))


PAGES = [
    ("servers", "/"),
    ("tools", "/tools"),
    ("tool", "/tools/everything__echo"),
    ("tool-form", "/tools/hostile__configure"),
    ("export-openai", "/tools/export?format=openai"),
    ("export-markdown", "/tools/export?format=markdown"),
    ("approvals", "/approvals"),
    ("pins", "/pins"),
    ("audit", "/audit"),
    ("audit-pins", "/audit?kind=pin"),
    ("checks", "/checks"),
    ("catalog", "/catalog"),
    ("chat", "/chat"),
    ("not-found", "/tools/no__such"),
]


def visit(page: Any, path: str, name: str, lang: str) -> None:
    """The page at both widths: no console error, no sideways scrolling on a phone, saved."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(path)
        page.wait_for_load_state("networkidle")
        overflow = page.evaluate(OVERFLOW)
        assert overflow <= 0, f"{path} at {width} px scrolls sideways by {overflow} px"
        page.screenshot(path=str(SCREENSHOTS / f"{lang}-{name}-{label}.png"), full_page=True, caret="initial")
    if name == "not-found":  # the page's own 404, which Chromium reports as a failed load
        page.errors[:] = [e for e in page.errors if "status of 404" not in e]
    assert page.errors == [], (path, page.errors)


def test_every_page_in_both_languages_at_both_widths(
    context: Any, serve: Serve, prepared: dict[str, str], lang: str
) -> None:
    page = _page(context)
    page.goto("/")
    assert page.evaluate("document.documentElement.lang") == lang
    # the hostile server came back with a changed definition: wait until it is held
    page.locator('#nav a[href="/pins"] .count').wait_for(timeout=60_000)
    pages = [*PAGES, ("check-run", f"/checks/{finished_run(page)}")]
    for name, path in pages:
        visit(page, path, name, lang)
        texts = page.evaluate(VISIBLE_TEXT)
        if lang == "zh-Hans":
            assert english_words(texts) == [], (path, english_words(texts))
        else:
            assert chinese([t for t in texts if t != "简体中文"]) == [], (path, chinese(texts))
    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None
    # the sign-in page (English only for now, see KNOWN_ENGLISH_ONLY): fits and has no errors
    assert "login" in KNOWN_ENGLISH_ONLY
    fresh = context.browser.new_context(base_url=serve.url, locale="zh-CN")
    try:
        login = _page(fresh)
        visit(login, "/login", "login", lang)
    finally:
        fresh.close()


def test_the_navigation_says_what_needs_attention_live(
    context: Any, serve: Serve, prepared: dict[str, str], lang: str
) -> None:
    if lang != "en":
        pytest.skip("the figures are the same in both languages")
    page = _page(context)
    page.goto("/tools")
    page.locator("#nav .summary").wait_for()
    summary = page.locator("#nav .summary")
    page.locator('#nav a[href="/pins"] .count').wait_for(timeout=60_000)
    text = summary.inner_text()
    assert "4 of 5 connected" in text or "of 5 connected" in text, text
    assert "1 server in error" in text and "1 pending approval" in text and "1 tool quarantined" in text, text
    assert page.locator('#nav a[href="/approvals"] .count').inner_text().startswith("1")
    assert page.locator('#nav a[href="/"] .count').inner_text().startswith("1")
    # the broken server looks broken: its row is marked, it offers a restart first, not the
    # healthy rows' outline "Disable", and no "breaker closed"
    page.goto("/")
    broken = page.locator('#servers tr[data-server="broken"]')
    assert "state-row-error" in (broken.get_attribute("class") or "")
    assert broken.locator(".status-error").count() == 1
    assert broken.locator("button").first.inner_text() == "Restart"
    assert broken.locator(".breaker-closed").count() == 0
    healthy = page.locator('#servers tr[data-server="time"]')
    assert "secondary" in (healthy.get_by_role("button", name="Disable time").get_attribute("class") or "")
    # live: a decision elsewhere (the API) takes the approval off the count without a reload
    page.evaluate("window.__notReloaded = true")
    with api(serve) as client:
        second = client.post("/api/v1/tools/everything__get-sum/call", json={"arguments": {"a": 1, "b": 2}})
        assert second.status_code == 202
        page.locator("#nav .summary", has_text="2 pending approvals").wait_for()
        client.post(f"/api/v1/approvals/{second.json()['approvalId']}", json={"decision": "deny"})
    page.locator("#nav .summary", has_text="1 pending approval").wait_for()
    assert page.evaluate("window.__notReloaded") is True
    assert page.errors == []


def test_the_language_switch_is_remembered(browser: Any, serve: Serve) -> None:
    made = signed_in(browser, serve, locale="en-GB")
    try:
        page = _page(made)
        page.goto("/tools")
        assert page.locator("h1").inner_text() == "Tools"
        page.get_by_role("button", name="简体中文").click()
        page.wait_for_url("**/tools")
        assert page.locator("h1").inner_text() == "工具"
        assert page.evaluate("document.documentElement.lang") == "zh-Hans"
        page.goto("/audit")
        assert page.locator("h1").inner_text() == "审计日志"
        assert any(c["name"] == "mcpwire_lang" and c["value"] == "zh-Hans" for c in made.cookies())
        page.get_by_role("button", name="English").click()
        page.wait_for_url("**/audit")
        assert page.locator("h1").inner_text() == "Audit log"
        assert page.errors == []
    finally:
        made.close()


def _token(serve: Serve, name: str, role: str) -> str:
    with api(serve) as client:
        made = client.post("/api/v1/tokens", json={"name": name, "role": role})
        assert made.status_code == 201, made.text
        return str(made.json()["token"])


def test_a_viewer_is_offered_no_action_it_cannot_take(browser: Any, serve: Serve, prepared: dict[str, str]) -> None:
    token = _token(serve, "looker", "viewer")
    made = browser.new_context(base_url=serve.url, locale="en-US")
    try:
        page = _page(made)
        page.goto(f"/login?token={token}")
        assert page.locator(".who").inner_text() == "token:looker (viewer)"
        page.goto("/")
        assert page.locator("#servers form").count() == 0
        assert page.locator("#add-server").count() == 0
        assert "needs the admin role" in page.locator("#add-server-role").inner_text()
        page.goto("/tools")
        assert page.locator("button.switch").count() == 0
        page.goto("/tools/everything__echo")
        assert page.locator("form[data-tryit]").count() == 0
        assert "needs the caller role" in page.locator("#tryit-role").inner_text()
        page.goto("/approvals")
        assert page.locator("article.approval").count() >= 1
        assert page.locator("article.approval button").count() == 0
        assert "approver role" in page.locator("#approvals-role").inner_text()
        page.goto("/catalog")
        assert page.locator(".preset form").count() == 0
        page.goto("/checks")
        assert page.locator("form.check-form").count() == 0
        page.goto("/chat")
        assert page.locator("#chat-form").count() == 0
        # and were it to post anyway, the console says why it refuses
        csrf = page.evaluate("JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']")
        refused = page.request.post("/servers/time/disable", form={"csrf_token": csrf})
        assert refused.status == 403
        assert "This needs the admin role; you are signed in as token:looker, a viewer." in refused.text()
        assert page.errors == []
    finally:
        made.close()


def test_the_catalogue_the_tool_switch_the_export_and_an_audit_record(
    context: Any, serve: Serve, prepared: dict[str, str], lang: str
) -> None:
    """The catalogue, the tool switch, the export and the audit record, as an admin."""
    if lang != "en":
        pytest.skip("the same actions in both languages")
    page = _page(context)
    # the catalogue: a preset's values asked for; a bad value refused in the loader's words
    page.goto("/catalog")
    card = page.locator('article.preset[data-preset="sqlite"]')
    card.locator("summary").click()
    card.get_by_label("Server name").fill("bad name!")
    card.get_by_role("button", name="Add sqlite", exact=True).click()
    problems = card.locator(".field-errors-box")
    problems.wait_for()
    text = problems.inner_text()
    assert "needs DATABASE" in text, text
    card.get_by_label("Server name").fill("bad name!")
    card.get_by_label("DATABASE").fill(str(serve.folder / "notes.db"))
    card.get_by_role("button", name="Add sqlite", exact=True).click()
    card.locator(".field-errors-box", has_text="server names may use only letters").wait_for()
    assert "Expected str matching regex" not in card.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "en-catalog-refused-wide.png"), full_page=True, caret="initial")

    # the time preset added, from its card; it shows up on the servers page
    clock = page.locator('article.preset[data-preset="time"]')
    clock.locator("summary").click()
    clock.get_by_label("Server name").fill("clock")
    clock.get_by_role("button", name="Add time", exact=True).click()
    clock.locator(".notice", has_text="Added clock").wait_for()
    with api(serve) as client:
        added = client.get("/api/v1/servers/clock").json()
        assert added["source"] == "api" and "mcp-server-time" in added["target"]
        assert client.delete("/api/v1/servers/clock").status_code == 204

    # a tool switched off and on again (the server's disabled_tools, through PATCH)
    page.goto("/tools?server=time")
    row = page.locator('#tool-list tr[data-tool="time__convert_time"]')
    row.get_by_role("switch").click()
    off = page.locator('#tool-list tr[data-tool="time/convert_time"]')
    off.wait_for()
    assert off.get_by_role("switch").get_attribute("aria-checked") == "false"
    with api(serve) as client:
        names = [t["name"] for t in client.get("/api/v1/tools", params={"server": "time"}).json()["items"]]
        assert "time__convert_time" not in names
    off.get_by_role("switch").click()
    page.locator('#tool-list tr[data-tool="time__convert_time"]').wait_for(timeout=30_000)

    # the list for a model: OpenAI's shape, then Markdown
    page.goto("/tools/export?format=openai")
    exported = json.loads(page.locator("#export-text").inner_text())
    assert exported[0]["type"] == "function" and "parameters" in exported[0]["function"]
    page.get_by_role("link", name="Anthropic").click()
    assert "input_schema" in json.loads(page.locator("#export-text").inner_text())[0]
    page.get_by_role("link", name="Markdown").click()
    assert page.locator("#export-text").inner_text().startswith("## Tools")

    # an audit record opens to its arguments, its result and its trace
    page.goto("/audit?server=everything&tool=echo")
    record = page.locator("ol.audit li.record").first
    record.locator("summary").first.click()
    assert '"message"' in record.locator("pre.arguments").inner_text()
    assert record.locator(".result-line .outcome-ok").count() == 1
    trace = record.locator(".record-meta a code").inner_text()
    assert len(trace) == 32
    record.locator(".record-meta a").click()
    page.wait_for_url(f"**/audit?trace_id={trace}*")
    assert page.locator("ol.audit li.record").count() == 1
    # start-up pins do not drown the calls: calls by default, pins when asked
    page.goto("/audit")
    kinds = set(page.locator("ol.audit li.record").evaluate_all("els => els.map(e => e.dataset.kind)"))
    assert kinds <= {"tool", "resource", "prompt"} and "tool" in kinds
    page.get_by_label("Kind").select_option("pin")
    page.wait_for_url("**kind=pin*")
    page.locator('ol.audit li.record[data-kind="pin"]').first.wait_for()
    assert set(page.locator("ol.audit li.record").evaluate_all("els => els.map(e => e.dataset.kind)")) == {"pin"}
    assert page.errors == []


def test_a_pasted_entry_lists_every_problem_in_the_loaders_words(context: Any, lang: str) -> None:
    if lang != "en":
        pytest.skip("the loader's words are the same in both languages")
    page = _page(context)
    page.goto("/")
    page.get_by_label("Name").fill("remote")
    page.get_by_label("Entry (JSON)").fill('{"url": "ftp://x", "timeout_seconds": -1, "comand": "y"}')
    page.get_by_role("button", name="Add server").click()
    errors = page.locator("#server-entry-errors")
    errors.wait_for()
    listed = dict(
        zip(
            errors.locator("code.json-path").all_inner_texts(),
            errors.locator("li > span").all_inner_texts(),
            strict=True,
        )
    )
    assert listed["$.url"] == "expected an http:// or https:// URL, got 'ftp://x'"
    assert listed["$.comand"] == "unknown key; did you mean 'command'?"
    assert listed["$.timeout_seconds"] == "expected a positive number, got -1"
    assert "The entry has 3 problems" in errors.inner_text()
    assert "regex" not in errors.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "en-add-server-problems-wide.png"), full_page=True, caret="initial")
    assert page.errors == []


def test_the_check_form_keeps_its_server(context: Any, serve: Serve, lang: str) -> None:
    if lang != "en":
        pytest.skip("the same form in both languages")
    page = _page(context)
    page.goto("/checks")
    page.get_by_label("Server").select_option("time")
    page.get_by_label("Only these checks").fill("SV-01")
    page.get_by_role("button", name="Run check").click()
    page.locator("#check-runs tr[data-run] .verdict-running").first.wait_for()
    assert page.get_by_label("Server").input_value() == "time"
    page.locator('#check-runs tr[data-run]:not([data-status="running"])').first.wait_for(timeout=120_000)
    assert page.get_by_label("Server").input_value() == "time"
    page.reload()
    assert page.get_by_label("Server").input_value() == "time"
    assert page.errors == []
