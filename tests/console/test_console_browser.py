"""The console end to end, in headless Chromium: a real ``mcpwire serve`` with server-everything,
server-memory, mcp-server-time and a hostile fake; every page is also saved as screenshots at
1280 and 390 px (tests/console/screenshots, git-ignored)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _console import PY_BIN, SCREENSHOTS, Serve, console_config, require, screenshot, signed_in, start_serve

pytestmark = [pytest.mark.slow, pytest.mark.real]

#: a watcher installed before any page script: records any attempt to set the flag, open a
#: dialog or navigate away
WATCH = """
Object.defineProperty(window, "__xss", {
  configurable: false,
  set(value) { document.documentElement.setAttribute("data-xss", String(value)); },
  get() { return document.documentElement.getAttribute("data-xss"); },
});
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    folder = tmp_path_factory.mktemp("console")
    running = start_serve(folder, console_config(folder))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def context(browser: Any, serve: Serve) -> Iterator[Any]:
    made = signed_in(browser, serve, viewport={"width": 1280, "height": 900})
    made.add_init_script(WATCH)
    made.set_default_timeout(20_000)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def page(context: Any) -> Iterator[Any]:
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    opened.dialogs = dialogs
    try:
        yield opened
    finally:
        opened.close()


def api(serve: Serve) -> httpx.Client:
    return httpx.Client(base_url=serve.url, timeout=60, headers=serve.headers)


def row(page: Any, server: str) -> Any:
    return page.locator(f'#servers tr[data-server="{server}"]')


def test_servers_page_updates_live_and_acts(page: Any, serve: Serve) -> None:
    page.goto("/")
    for name in ("everything", "memory", "time", "hostile"):
        page.locator(f'#servers tr[data-server="{name}"] .status-connected').wait_for()
    page.locator("#live[data-state=on]").wait_for()
    with api(serve) as client:
        tools = client.get("/api/v1/servers/everything").json()["tools"]
    assert row(page, "everything").locator("td[data-label=Tools]").inner_text().strip() == str(tools)
    page.evaluate("window.__notReloaded = true")
    screenshot(page, "servers")

    # a change made elsewhere (the API) shows up without a reload
    with api(serve) as client:
        assert client.patch("/api/v1/servers/time", json={"enabled": False}).status_code == 200
    row(page, "time").locator(".status-disabled").wait_for()
    assert page.evaluate("window.__notReloaded") is True

    # and the console's own buttons turn it back on, and restart a server
    row(page, "time").get_by_role("button", name="Enable time").click()
    row(page, "time").locator(".status-connected").wait_for(timeout=30_000)
    row(page, "memory").get_by_role("button", name="Restart memory").click()
    # the action's notice stays while the live table reloads on the restart's status changes
    page.locator("#servers-notice", has_text="memory is restarting").wait_for()
    row(page, "memory").locator(".status-connected").wait_for(timeout=30_000)
    assert page.locator("#servers-notice").inner_text() == "memory is restarting"
    with api(serve) as client:
        assert client.get("/api/v1/servers/memory").json()["restarts"] >= 1
    assert page.evaluate("window.__notReloaded") is True


def test_add_a_server_from_a_pasted_entry_and_remove_it(page: Any, serve: Serve) -> None:
    page.goto("/")
    page.get_by_label("Name").fill("clock")
    page.get_by_label("Entry (JSON)").fill('{"command": 42, "args": ["x"]}')
    page.get_by_role("button", name="Add server").click()
    errors = page.locator("#server-entry-errors")
    errors.wait_for()
    assert errors.locator("code.json-path").first.inner_text() == "$.command"
    assert page.get_by_label("Entry (JSON)").get_attribute("aria-invalid") == "true"
    screenshot(page, "add-server-error")

    page.get_by_label("Name").fill("")
    entry = {"mcpServers": {"clock": {"command": require(PY_BIN / "mcp-server-time")}}}
    page.get_by_label("Entry (JSON)").fill(json.dumps(entry))
    page.get_by_role("button", name="Add server").click()
    page.locator("#add-server .notice").wait_for()
    row(page, "clock").locator(".status-connected").wait_for(timeout=30_000)
    with api(serve) as client:
        assert client.get("/api/v1/servers/clock").json()["source"] == "api"

    row(page, "clock").get_by_text("Remove…").click()
    row(page, "clock").get_by_role("button", name="Remove clock").click()
    row(page, "clock").wait_for(state="detached")
    with api(serve) as client:
        assert client.get("/api/v1/servers/clock").status_code == 404


def test_call_echo_through_the_generated_form(page: Any) -> None:
    page.goto("/tools")
    page.get_by_label("Search", exact=True).fill("echo")
    # the search applies itself after a pause, pushing its URL: a click before it would start a
    # navigation that the push then cancels (on a busy machine the tool's page is not loaded yet)
    page.wait_for_url("**/tools?q=echo*")
    page.locator('#tool-list a[href="/tools/everything__echo"]').click()
    page.wait_for_url("**/tools/everything__echo")
    page.get_by_label("message").fill("hello from the console")
    page.get_by_role("button", name="Call echo").click()
    result = page.locator("#result .result.tool-ok pre.text")
    result.wait_for()
    assert result.inner_text() == "Echo: hello from the console"
    screenshot(page, "tool-echo")


def test_nested_object_form_and_validation(page: Any) -> None:
    page.goto("/tools/hostile__configure")
    form = page.locator("form[data-tryit]")
    form.get_by_label("level").fill("3")
    form.get_by_label("host").fill("db.internal")
    form.get_by_label("port").fill("5432")
    form.get_by_label("verbose").select_option("true")
    form.get_by_label("mode").select_option(label="safe")
    form.get_by_label("tags").fill("a\nb")
    screenshot(page, "tryit-nested")
    form.get_by_role("button", name="Call configure").click()
    page.locator("#result .result.tool-ok").wait_for()
    text = page.locator("#result pre.text").inner_text()
    assert json.loads(text) == {
        "level": 3,
        "target": {"host": "db.internal", "port": 5432, "options": {"verbose": True, "mode": "safe"}},
        "tags": ["a", "b"],
    }
    assert page.locator("#result .structured .key", has_text="host").count() == 1

    # the browser refuses a level out of range before anything is sent
    form = page.locator("form[data-tryit]")
    form.get_by_label("level").fill("9")
    form.get_by_role("button", name="Call configure").click()
    assert form.get_by_label("level").evaluate("e => e.validity.rangeOverflow") is True

    # raw JSON: what does not parse is refused in the page; what breaks the schema by the console
    page.get_by_label("Raw JSON").check()
    raw = page.get_by_label("Arguments (a JSON object)")
    raw.fill("{not json")
    page.get_by_role("button", name="Call configure").click()
    assert raw.evaluate("e => e.validationMessage").startswith("Not valid JSON")
    raw.fill('{"level": "loud"}')
    page.get_by_role("button", name="Call configure").click()
    problems = page.locator("#tryit .problem .field-errors")
    problems.wait_for()
    listed = problems.inner_text()
    assert "$.level" in listed and "'target' is a required property" in listed
    assert page.locator("#result .result").count() == 0


def test_hostile_strings_are_text_and_nothing_runs(page: Any) -> None:
    page.goto("/tools?q=hostile")
    page.locator('#tool-list a[href="/tools/hostile__hostile"]').wait_for()
    screenshot(page, "tools")
    page.goto("/tools/hostile__hostile")
    assert "<script>window.__xss=1</script>" in page.locator(".description").inner_text()
    assert "\\x1b[31m" in page.locator(".description").inner_text()
    form = page.locator("form[data-tryit]")
    options = form.locator("select option").all_inner_texts()
    assert '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">' in options
    form.get_by_role("button", name="Call hostile").click()
    page.locator("#result .result").wait_for()
    result = page.locator("#result")
    assert result.locator("img").count() == 1  # the PNG; the SVG is named, not shown
    assert "image of type image/svg+xml" in result.inner_text()
    assert result.locator("a").count() == 0  # a javascript: URI is never a link
    assert "javascript:window.__xss=1" in result.inner_text()
    screenshot(page, "tool-hostile")

    page.goto("/tools/hostile__fail")
    page.get_by_role("button", name="Call fail").click()
    page.locator("#result .result.tool-error").wait_for()
    page.goto("/tools/hostile__broken")
    page.get_by_role("button", name="Call broken").click()
    page.locator("#result .protocol-error").wait_for()
    assert "broken <script>" in page.locator("#result .protocol-error").inner_text()
    screenshot(page, "tool-protocol-error")

    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None
    assert page.dialogs == []
    assert page.url.endswith("/tools/hostile__broken")


def _call_and_wait(serve: Serve, arguments: dict[str, Any], out: dict[str, Any]) -> None:
    """An API client: calls a tool that needs approval, then waits on the approval."""
    with api(serve) as client:
        reply = client.post("/api/v1/tools/everything__get-sum/call", json={"arguments": arguments})
        out["accepted"] = reply
        if reply.status_code == 202:
            out["final"] = client.get(reply.headers["location"], params={"wait": 60}).json()


def _waiting_call(page: Any, serve: Serve, arguments: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any], Any]:
    out: dict[str, Any] = {}
    thread = threading.Thread(target=_call_and_wait, args=(serve, arguments, out), daemon=True)
    thread.start()
    card = page.locator("article.approval", has_text=json.dumps(arguments["a"])).first
    card.wait_for()  # it appears without a reload
    return thread, out, card


def test_approvals_release_the_waiting_api_caller(page: Any, serve: Serve) -> None:
    page.goto("/approvals")
    page.locator("#live[data-state=on]").wait_for()
    page.evaluate("window.__notReloaded = true")

    thread, out, card = _waiting_call(page, serve, {"a": 2, "b": 3})
    assert "everything__get-sum" in card.inner_text()
    assert "caller waiting" in card.inner_text()  # an API caller that got 202 waits by design
    screenshot(page, "approvals")
    card.get_by_role("button", name="Approve").click()
    thread.join(60)
    final = out["final"]
    assert final["state"] == "approved" and final["result"]["text"] == "The sum of 2 and 3 is 5."
    assert final["decidedBy"] == "token:admin (127.0.0.1)" and final["decidedVia"] == "console"

    thread, out, card = _waiting_call(page, serve, {"a": 7, "b": 7})
    card.get_by_label("Reason for denying").fill("not today")
    card.get_by_role("button", name="Deny").click()
    thread.join(60)
    assert (out["final"]["state"], out["final"]["reason"]) == ("denied", "not today")
    assert out["final"]["result"] is None

    thread, out, card = _waiting_call(page, serve, {"a": 1, "b": 1})
    card.get_by_label("Arguments").fill('{"a": 40, "b": 2}')
    card.get_by_role("button", name="Approve").click()
    thread.join(60)
    assert out["final"]["finalArguments"] == {"a": 40, "b": 2}
    assert out["final"]["result"]["text"] == "The sum of 40 and 2 is 42."

    decided = page.locator("table.decided")
    decided.locator(".state-denied").first.wait_for()
    assert "not today" in decided.inner_text() and "edited" in decided.inner_text()
    assert decided.locator("td[data-label=By] .tag").first.inner_text() == "console"
    # the outcome of the edited call shows once it has run
    decided.get_by_text("The sum of 40 and 2 is 42.").wait_for()
    assert page.locator("article.approval").count() == 0
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, "approvals-decided")


def test_an_approval_shows_its_caller_going_away_and_ends_abandoned(page: Any, serve: Serve) -> None:
    page.goto("/approvals")
    page.locator("#live[data-state=on]").wait_for()
    # an MCP client of the gateway (a 2025-11-25 session) calls get-sum, then drops its stream
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "leaver", "version": "1"}}
    with httpx.Client(base_url=serve.url, timeout=60, headers=serve.headers) as client:
        opened = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                             headers=headers)  # fmt: skip
        session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        call = {"name": "everything__get-sum", "arguments": {"a": 31, "b": 11}}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        with client.stream("POST", "/mcp", json=body, headers=session) as response:
            next(response.iter_lines())  # the stream started (its priming event): the call waits
        card = page.locator("article.approval", has_text="31")
        card.locator(".caller-away").wait_for(timeout=30_000)  # shown without a reload
        assert "caller disconnected" in card.inner_text()
        screenshot(page, "approvals-caller-away")
        assert client.delete("/mcp", headers=session).status_code == 200  # the session ends
    decided = page.locator("table.decided tr", has_text="31")
    decided.locator(".state-abandoned").wait_for(timeout=30_000)
    assert "the client ended its session (DELETE)" in decided.inner_text()
    assert page.locator("article.approval", has_text="31").count() == 0
    screenshot(page, "approvals-abandoned")


def test_a_changed_definition_is_quarantined_until_approved(page: Any, serve: Serve) -> None:
    # the same words in another order: recorded as reordered, not quarantined
    (serve.state / "description").write_text("the Reports weather.")
    page.goto("/pins")
    page.locator("#live[data-state=on]").wait_for()
    with api(serve) as client:
        assert client.post("/api/v1/servers/hostile/restart").status_code == 202
    reordered = page.locator('article.pin.reordered[data-pin="hostile/report"]')
    reordered.wait_for(timeout=60_000)
    assert "1 time since it was pinned" in reordered.inner_text()
    screenshot(page, "pins-reordered")
    assert page.locator('#nav a[href="/pins"] .count').count() == 0  # nothing awaits review
    # a word changed: quarantined, and the change is shown word by word
    (serve.state / "description").write_text("Reports the tides <script>window.__xss=1</script>.")
    with api(serve) as client:
        assert client.post("/api/v1/servers/hostile/restart").status_code == 202
    pin = page.locator('article.pin[data-pin="hostile/report"]:not(.reordered)')
    pin.wait_for(timeout=60_000)
    words = pin.locator(".word-diff .words")
    assert [t.rstrip(".") for t in words.locator("del").all_inner_texts()] == ["weather"]
    assert [t.rstrip(".") for t in words.locator("ins").all_inner_texts()] == ["tides <script>window.__xss=1</script>"]
    assert "Reports the" in words.inner_text()  # the words around the change, once
    # the navigation says so on every page, and updates without a reload
    page.locator('#nav a[href="/pins"] .count').wait_for()
    assert page.locator('#nav ul a[href="/pins"]').inner_text().split() == ["Pins", "1", "quarantined"]
    screenshot(page, "pins")
    page.goto("/tools?q=report")
    assert page.locator('#tool-list a[href="/tools/hostile__report"]').count() == 0
    assert "quarantined" in page.locator("main").inner_text()
    assert page.locator('#nav a[href="/pins"] .count').inner_text().startswith("1")

    page.goto("/pins")
    pin.get_by_role("button", name="Approve the new definition of report").click()
    # the action's notice stays while the live list reloads on the approval's pin event
    page.locator("#pins-notice", has_text="hostile/report: the new definition is approved").wait_for()
    assert page.locator("article.pin:not(.reordered)").count() == 0
    page.locator('#nav a[href="/pins"]:not(:has(.count))').wait_for(state="attached")  # the badge is gone
    page.goto("/tools/hostile__report")
    assert page.locator(".description").inner_text() == "Reports the tides <script>window.__xss=1</script>."
    assert page.locator(".state-pinned").count() == 1
    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None


def test_audit_log_pages_filters_and_opens_a_record(page: Any, serve: Serve) -> None:
    with api(serve) as client:
        assert client.post("/api/v1/tools/hostile__fail/call", json={"arguments": {}}).json()["isError"] is True
    # every kind (the pins recorded at start-up too): more than a page
    page.goto("/audit?kind=all")
    records = page.locator("ol.audit li.record")
    assert records.count() == 25
    first_id = records.first.get_attribute("data-record")
    screenshot(page, "audit")
    page.get_by_role("link", name="Older →").click()
    page.wait_for_url("**/audit?kind=all&cursor=*")
    older = page.locator("ol.audit li.record")
    assert older.count() >= 1
    assert int(older.first.get_attribute("data-record")) < int(first_id or 0)
    page.get_by_role("link", name="← Newest").click()
    page.wait_for_url("**/audit?kind=all")
    assert page.locator("ol.audit li.record").first.get_attribute("data-record") == first_id

    page.get_by_label("Server").select_option("hostile")
    page.get_by_label("Outcome").select_option("tool_error")
    page.wait_for_url("**/audit?*outcome=tool_error*")
    shown = page.locator("ol.audit li.record")
    shown.first.wait_for()
    assert all("hostile__fail" in text for text in shown.all_inner_texts())
    shown.first.locator("summary").first.click()
    shown.first.locator("details.full summary").click()
    full = shown.first.locator("pre.full-record")
    assert '"outcome": "tool_error"' in full.inner_text() and '"server": "hostile"' in full.inner_text()
    page.get_by_label("Time").select_option(label="last 5 minutes")
    page.wait_for_url("**since=5*")
    assert page.locator("ol.audit li.record").count() >= 1
    page.goto("/audit?server=hostile")
    for summary in page.locator("ol.audit li.record summary").all()[:10]:
        summary.click()  # the records of the hostile server's calls, opened
    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None


def test_run_a_check_and_open_its_report(page: Any) -> None:
    page.goto("/checks")
    page.get_by_label("Server").select_option("hostile")
    page.get_by_label("Only these checks").fill("SV-01 SV-12")
    page.get_by_role("button", name="Run check").click()
    run = page.locator("#check-runs tr[data-run]").first
    run.locator(".verdict-running").wait_for()
    page.locator('#check-runs tr[data-run][data-status="pass"]').wait_for(timeout=120_000)
    screenshot(page, "checks")
    page.get_by_role("link", name="Open the report").first.click()
    page.wait_for_url("**/checks/chk_*")
    # the results are the page's own (no frame scrolling inside the page)
    assert page.locator("iframe").count() == 0
    results = page.locator("ol.check-results li.check-result")
    assert {r.get_attribute("data-check") for r in results.all()} == {"SV-01", "SV-12"}
    screenshot(page, "check-report")
    # the whole HTML report, on its own page
    page.get_by_role("link", name="Open the full report (HTML) on its own").click()
    page.wait_for_url("**/checks/chk_*/report")
    page.locator("footer").wait_for()
    assert "Generated by mcpwire check" in page.locator("footer").inner_text()
    assert "SV-12" in page.locator("body").inner_text()
    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None


LABELLED = """() => [...document.querySelectorAll("input:not([type=hidden]), select, textarea, button")]
  .filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !(e.textContent || "").trim())
  .map(e => e.outerHTML.slice(0, 120))"""


def test_every_page_is_labelled_keyboard_reachable_and_readable_in_dark(page: Any, serve: Serve) -> None:
    with api(serve) as client:  # some calls for the charts
        for text in ("one", "two", "three"):
            client.post("/api/v1/tools/everything__echo/call", json={"arguments": {"message": text}})
        client.post("/api/v1/tools/time__get_current_time/call", json={"arguments": {"timezone": "UTC"}})
    for path in (
        "/", "/tools", "/tools/hostile__configure", "/tools/export", "/approvals", "/pins", "/audit", "/checks",
        "/catalog",
    ):  # fmt: skip
        page.goto(path)
        assert page.evaluate(LABELLED) == [], path
    page.goto("/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.locator('#charts figure[data-server="everything"]:not([data-calls="0"])').wait_for(timeout=30_000)
    screenshot(page, "servers-with-calls")
    page.emulate_media(color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 26)"
    screenshot(page, "servers-dark")
    page.goto("/tools/everything__echo")
    screenshot(page, "tool-echo-dark")
    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None
    readme_images(page)


def readme_images(page: Any) -> None:
    """The README's two pictures (light, one screen each), kept beside the other screenshots."""
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto("/")
    page.locator('#charts figure[data-server="everything"]:not([data-calls="0"])').wait_for()
    page.screenshot(path=str(SCREENSHOTS / "readme-servers.png"))
    page.goto("/tools/time__convert_time")
    form = page.locator("form[data-tryit]")
    form.get_by_role("textbox", name=re.compile(r"^Source Timezone")).fill("Europe/Paris")
    form.get_by_role("textbox", name=re.compile(r"^Time\b")).fill("16:30")
    form.get_by_role("textbox", name=re.compile(r"^Target Timezone")).fill("America/New_York")
    form.get_by_role("button", name="Call convert_time").click()
    page.locator("#result .result").wait_for()
    page.locator("#tryit-title").scroll_into_view_if_needed()
    page.evaluate("document.getElementById('tryit-title').scrollIntoView()")
    page.screenshot(path=str(SCREENSHOTS / "readme-tryit.png"), clip={"x": 0, "y": 0, "width": 840, "height": 720})
