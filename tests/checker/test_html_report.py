"""The ``--html`` report: a self-contained page, checked as markup and rendered in headless Chromium.

The Chromium tests use Debian's ``chromium`` package (``/usr/bin/chromium``); when it is missing
they fail and say how to install it. Each page is rendered with ``--dump-dom``, which prints the
DOM after the page's script ran; the script records what it did on ``<body>`` (``data-js``,
``data-visible``, ``data-resources``, ``data-csp-violations``), and every result element carries
``data-id``, ``data-outcome`` and ``data-revision``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from mcpwire.conformance.evidence import ExchangeEntry, Redactor, WireRecord, collect
from mcpwire.conformance.report import MAX_PAYLOAD_LINES, MAX_STRING_CHARS, area_of, to_html
from mcpwire.conformance.report.assets import script_hash
from mcpwire.conformance.runner import Probe, Result, Run

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
REPO = Path(__file__).resolve().parents[2]

# Server-controlled text that would run script or load something if it reached the page as markup.
PWN_SCRIPT = "<script>document.body.setAttribute('data-pwned','script')</script>"
PWN_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
PWN_BREAKOUT = "</pre></li></ol></div></details><script>document.title='pwned'</script>"


# -- a small DOM from markup -------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag) and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def has_class(self, name: str) -> bool:
        return name in self.attrs.get("class", "").split()


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(markup: str) -> Node:
    builder = _Builder()
    builder.feed(markup)
    builder.close()
    return builder.root


# -- runs built from the data model ------------------------------------------------------------

REVISIONS = ["2026-07-28", "2025-11-25", "2025-06-18"]
PING = [
    ExchangeEntry(
        1, 0.0, "sent", '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}'
    ),
    ExchangeEntry(
        1, 0.09, "received", '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}'
    ),
    ExchangeEntry(1, 0.095, "sent", '{"jsonrpc":"2.0","id":2,"method":"ping"}'),
    ExchangeEntry(1, 0.099, "received", '{"jsonrpc":"2.0","id":2,"result":{"pong":true}}'),
    ExchangeEntry(1, 0.1, "event", "stdin closed"),
    ExchangeEntry(1, 0.102, "event", "process ended after eof (0.00 s, status 0)"),
]
TOOLS = ",".join(f'{{"name":"tool{i}","inputSchema":{{"type":"object"}}}}' for i in range(120))
BIG_TOOLS = f'{{"jsonrpc":"2.0","id":3,"result":{{"tools":[{TOOLS}]}}}}'
LONG_TEXT = f'{{"jsonrpc":"2.0","id":4,"result":{{"content":[{{"type":"text","text":"{"y" * 5000}"}}]}}}}'


def _result(check_id: str, revision: str, status: str, tags: list[str], **kw: Any) -> Result:
    fields: dict[str, Any] = {
        "title": f"rule {check_id}",
        "level": "MUST",
        "spec": "basic/lifecycle.mdx §Operation",
        "quote": f"The rule {check_id} MUST hold.",
        "message": "",
    }
    fields.update(kw)
    return Result(check_id, revision=revision, status=status, tags=tags, **fields)


def sample_run() -> Run:
    results: list[Result] = []
    for rev in REVISIONS:
        results += [
            _result("SV-01", rev, "pass", ["framing"]),
            _result("SV-02", rev, "pass", ["framing", "jsonrpc"]),
            _result("SV-29", rev, "pass", ["tools"]),
            _result("PR-01", rev, "pass", ["prompts"]),
            _result("SV-32", rev, "pass", ["resources", "errors"]),
        ]
        modern = rev == "2026-07-28"
        results.append(
            _result(
                "SV-13", rev, "pass" if modern else "skipped", ["modern"], message="" if modern else "modern era only"
            )
        )
    results += [
        _result(
            "SV-12",
            "2025-11-25",
            "fail",
            ["lifecycle", "ping"],
            message="ping answered a non-empty result",
            exchanges=PING,
        ),
        _result(
            "SV-12",
            "2025-06-18",
            "fail",
            ["lifecycle", "ping"],
            message="ping answered a non-empty result",
            exchanges=PING,
        ),
        _result("SV-12", "2026-07-28", "skipped", ["lifecycle", "ping"], message="legacy era only"),
        _result(
            "SV-08",
            "2025-11-25",
            "warning",
            ["lifecycle", "stdio"],
            level="SHOULD",
            message="still running 2 s after stdin EOF; SIGTERM was needed",
            exchanges=[
                ExchangeEntry(1, 0.0, "event", "stdin closed"),
                ExchangeEntry(1, None, "stderr", "Traceback: boom"),
            ],
        ),
        _result("SV-32b", "2025-11-25", "not_observed", ["resources"], message="the server lists no resources"),
        _result("SV-34", "2025-06-18", "error", ["tools"], message="the check raised KeyError('x')"),
        _result("SV-29b", "2025-06-18", "expected_fail", ["tools"], level="SHOULD", message="tool name has a space"),
        _result(
            "SV-31",
            "2025-11-25",
            "fail",
            ["tools"],
            title=f"hostile title {PWN_SCRIPT}",
            quote=f"hostile quote {PWN_IMG}",
            message=f"tools/call answered {PWN_SCRIPT} {PWN_IMG}",
            exchanges=[
                ExchangeEntry(1, 0.01, "received", BIG_TOOLS),
                ExchangeEntry(1, 0.02, "received", LONG_TEXT),
                ExchangeEntry(1, 0.03, "received", PWN_BREAKOUT),
            ],
        ),
    ]
    probes = [Probe(rev, True, {"tools": {}, "prompts": {}, "resources": {}}) for rev in REVISIONS]
    probes += [Probe("2024-11-05", False, detail=f"initialize answered {PWN_IMG}")]
    return Run(f"demo {PWN_SCRIPT}", probes, REVISIONS, results)


# -- the markup ----------------------------------------------------------------------------------

URL_ATTRS = ("src", "href", "action", "formaction", "srcset", "poster", "data", "background", "ping", "xlink:href")


def _loads(doc: Node) -> list[str]:
    """Every URL in the page that a browser would fetch on its own (links to follow excluded)."""
    found = []
    for n in doc.iter():
        for name in URL_ATTRS:
            value = n.attrs.get(name)
            if value is None or (n.tag == "a" and name == "href"):
                continue
            if not value.startswith(("#", "data:")):
                found.append(f"<{n.tag} {name}={value!r}>")
    return found


def test_page_is_one_self_contained_file() -> None:
    page = to_html(sample_run())
    doc = parse(page)
    assert page.startswith("<!doctype html>")
    assert _loads(doc) == []
    (style,) = doc.find_all("style")
    assert "@import" not in style.text() and re.findall(r"url\(", style.text()) == []
    assert [n.attrs.get("rel") for n in doc.find_all("link")] == ["icon"]  # href="data:," (no favicon request)
    # the policy allows nothing but the inline style and this very script
    (csp,) = doc.find_all("meta", http_equiv="Content-Security-Policy")
    policy = dict(p.strip().split(" ", 1) for p in csp.attrs["content"].split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["img-src"] == "data:"
    (script,) = doc.find_all("script")
    digest = base64.b64encode(hashlib.sha256(script.text().encode()).digest()).decode()
    assert policy["script-src"] == f"'sha256-{digest}'"
    # without script every result is shown and the filter bar (useless without it) is hidden by CSS
    assert doc.find_all("html")[0].attrs["class"] == "nojs"
    assert [n for n in doc.iter() if "hidden" in n.attrs] == []
    assert ".nojs .filters{display:none}" in style.text()


def test_server_text_stays_text_in_the_markup() -> None:
    page = to_html(sample_run())
    doc = parse(page)
    assert len(doc.find_all("script")) == 1
    assert doc.find_all("img") == []
    assert [(n.tag, a) for n in doc.iter() for a in n.attrs if a.startswith("on")] == []
    assert (
        "<script>document" not in page
        and "<img src=x" not in page
        and "</pre></li></ol></div></details><script>" not in page
    )
    # and the text is all there, as text
    (card,) = [n for n in doc.find_all("details") if n.attrs.get("data-id") == "SV-31"]
    assert f"tools/call answered {PWN_SCRIPT} {PWN_IMG}" in card.text()
    assert f"hostile quote {PWN_IMG}" in card.text()
    assert PWN_BREAKOUT in card.text()
    assert f"demo {PWN_SCRIPT}" in doc.find_all("h1")[0].text()
    (refused,) = [n for n in doc.find_all("span") if n.has_class("off")]
    assert refused.attrs["title"] == f"initialize answered {PWN_IMG}"


def test_failures_show_the_exchange_that_proves_them_and_long_payloads_are_cut() -> None:
    doc = parse(to_html(sample_run()))
    cards = {(n.attrs["data-id"], n.attrs["data-revision"]): n for n in doc.find_all("details")}
    # problems only, most urgent first; failures open (few of them), the rest folded
    assert [(k, n.attrs["data-outcome"], "open" in n.attrs) for k, n in cards.items()] == [
        (("SV-12", "2025-11-25"), "fail", True),
        (("SV-12", "2025-06-18"), "fail", True),
        (("SV-31", "2025-11-25"), "fail", True),
        (("SV-34", "2025-06-18"), "error", True),
        (("SV-08", "2025-11-25"), "warning", False),
        (("SV-32b", "2025-11-25"), "not_observed", False),
        (("SV-29b", "2025-06-18"), "expected_fail", False),
    ]
    ping = cards[("SV-12", "2025-11-25")]
    assert "ping answered a non-empty result" in ping.text()
    assert "“The rule SV-12 MUST hold.”" in ping.text()
    rows = ping.find_all("li")
    assert [r.attrs["class"] for r in rows] == ["d-sent", "d-received", "d-sent", "d-received", "d-event", "d-event"]
    # the JSON is pretty-printed: one member per line
    (pong,) = rows[3].find_all("pre")
    assert pong.text() == '{\n  "jsonrpc": "2.0",\n  "id": 2,\n  "result": {\n    "pong": true\n  }\n}'
    assert rows[3].find_all("span")[0].text() == "0.099 s"
    warn = cards[("SV-08", "2025-11-25")]
    assert [r.attrs["class"] for r in warn.find_all("li")] == ["d-event", "d-stderr"]
    assert "No exchange was recorded" in cards[("SV-34", "2025-06-18")].text()
    big, long, breakout = cards[("SV-31", "2025-11-25")].find_all("pre")
    big_lines = big.text().split("\n")
    assert len(big_lines) == MAX_PAYLOAD_LINES  # 728 lines pretty-printed
    assert big_lines[-1].endswith("668 more lines not shown. The --json report has the whole recorded text.")
    assert f'"text": "{"y" * MAX_STRING_CHARS}… (4600 more characters)"' in long.text()
    assert "1 long string cut to 400 characters" in long.text()
    assert breakout.text() == PWN_BREAKOUT


def test_http_exchanges_show_request_status_and_headers_without_credentials() -> None:
    exchanges: list[dict[str, Any]] = [
        {
            "method": "POST",
            "url": "http://127.0.0.1:8000/mcp?token=s3cret-query",
            "request_headers": {"Authorization": "Bearer s3cret", "Origin": "http://evil.example.com"},
            "request_body": '{"jsonrpc":"2.0","id":1,"method":"initialize"}',
            "status": 200,
            "response_headers": {"content-type": "application/json", "set-cookie": "s3cret", "mcp-session-id": "s1"},
            "content_type": "application/json",
            "body": '{"jsonrpc":"2.0","id":1,"result":{}}',
            "events": [],
        },
        {
            "method": "GET",
            "url": "http://127.0.0.1:8000/mcp",
            "request_headers": {"Last-Event-ID": "1.0"},
            "status": 403,
            "response_headers": {"content-type": "text/event-stream"},
            "content_type": "text/event-stream",
            "body": "",
            "events": [{"event": "message", "id": "1.0", "retry": 500, "data": ""}],
        },
    ]
    # as the runner collects it: redacted once, then shown as it is
    _, collected = collect([WireRecord([], http=exchanges)], Redactor())
    r = _result("SV-22", "2025-11-25", "fail", ["http"], message="Origin accepted", http_exchanges=collected)
    markup = to_html(Run("t", [Probe("2025-11-25", True)], ["2025-11-25"], [r]))
    assert "s3cret" not in markup
    (card,) = parse(markup).find_all("details")
    (section,) = [n for n in card.find_all("div") if n.has_class("http")]
    lines = [n.text() for n in section.find_all("div") if n.has_class("line")]
    assert lines == [
        "POST http://127.0.0.1:8000/mcp?token=*** → 200 application/json",
        "GET http://127.0.0.1:8000/mcp → 403 text/event-stream",
    ]
    post, get = section.find_all("li")
    request, response = post.find_all("dl")
    assert {dt.text(): dd.text() for dt, dd in zip(request.find_all("dt"), request.find_all("dd"), strict=True)} == {
        "Authorization": "***",
        "Origin": "http://evil.example.com",
    }
    # the response headers that matter (set-cookie is not one of them)
    assert [dt.text() for dt in response.find_all("dt")] == ["content-type", "mcp-session-id"]
    assert [n.text() for n in post.find_all("pre")] == [
        '{"jsonrpc":"2.0","id":1,"method":"initialize"}',
        '{"jsonrpc":"2.0","id":1,"result":{}}',
    ]
    assert [n.text() for n in get.find_all("pre")] == ["event: message id: 1.0 retry: 500 data: "]
    assert [n.attrs["class"] for n in section.find_all("span")] == ["st", "st bad"]


def test_spec_links_only_for_http_urls() -> None:
    @dataclass(slots=True)
    class LinkedResult(Result):  # the model's planned spec_url field
        spec_url: str = ""

    def page(url: str) -> Node:
        r = LinkedResult("SV-12", "ping", "MUST", "basic/utilities/ping.mdx", "q", "2025-11-25", "fail", spec_url=url)
        return parse(to_html(Run("t", [Probe("2025-11-25", True)], ["2025-11-25"], [r])))

    url = "https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/ping"
    (link,) = page(url).find_all("a")
    assert (link.attrs["href"], link.attrs["rel"], link.text()) == (url, "noreferrer noopener", "open the spec section")
    assert page("javascript:alert(1)").find_all("a") == []
    assert page("data:text/html,<b>x</b>").find_all("a") == []
    assert page("").find_all("a") == []


def test_server_info_is_shown_when_the_probe_records_it() -> None:
    @dataclass(slots=True)
    class InfoProbe(Probe):  # the model's planned server_info field
        server_info: dict[str, Any] = field(default_factory=dict)

    probe = InfoProbe("2025-11-25", True, {"tools": {}}, server_info={"name": f"srv{PWN_SCRIPT}", "version": "1.2"})
    doc = parse(to_html(Run("t", [probe], ["2025-11-25"], [_result("SV-01", "2025-11-25", "pass", ["framing"])])))
    meta = {dt.text(): dd.text() for dt, dd in zip(doc.find_all("dt"), doc.find_all("dd"), strict=True)}
    assert meta["server"] == f"srv{PWN_SCRIPT} 1.2"
    assert meta["capabilities"] == "tools"
    assert len(doc.find_all("script")) == 1


# -- rendered in Chromium ----------------------------------------------------------------------


def _chromium_dumps(pages: dict[str, str]) -> dict[str, str]:
    """The DOM of each ``name -> URL`` after its scripts ran, rendered concurrently."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"headless Chromium is needed to test the HTML report and {CHROMIUM} is missing: "
            "install the Debian package with 'apt-get install -y chromium'"
        )
    procs = {}
    profiles = []
    for name, url in pages.items():
        profile = tempfile.mkdtemp(prefix="mcpwire-chromium-")
        profiles.append(profile)
        procs[name] = subprocess.Popen(
            [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    dumps = {}
    try:
        for name, proc in procs.items():
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                pytest.fail(f"chromium did not render {name!r} within 60 s")
            assert proc.returncode == 0, f"chromium failed on {name!r}: {err[-2000:]}"
            dumps[name] = out
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for profile in profiles:
            shutil.rmtree(profile, ignore_errors=True)
    return dumps


def test_missing_chromium_fails_and_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(globals(), "CHROMIUM", Path("/nonexistent/chromium"))
    message = (
        r"^headless Chromium .* /nonexistent/chromium is missing: "
        r"install the Debian package with 'apt-get install -y chromium'$"
    )
    with pytest.raises(pytest.fail.Exception, match=message):
        _chromium_dumps({"page": "file:///dev/null"})


def _inject(page: str, markup: str) -> str:
    """``page`` with ``markup`` added as if the report had let it through."""
    return page.replace("</main>", markup + "</main>")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Node]:
    """Three renderings (about a second each, run together): the page as written, filtered, no script."""
    folder = tmp_path_factory.mktemp("html")
    page = to_html(sample_run())
    files = {
        "report": page,
        # the filtered view also carries markup the report never emits (an external image and
        # stylesheet): the control that proves the page's request detectors can fire
        "leaky": _inject(
            page, '<img src="http://127.0.0.1:9/pixel.png"><link rel="stylesheet" href="https://127.0.0.1:9/x.css">'
        ),
        # a viewer that runs no script (here: the policy allows none)
        "no-js": page.replace(html.escape(script_hash(), quote=True), "'none'"),
    }
    for name, text in files.items():
        (folder / f"{name}.html").write_text(text, encoding="utf-8")
    urls = {
        "report": (folder / "report.html").as_uri(),
        "filtered": (folder / "leaky.html").as_uri() + "#show=failures&rev=2025-11-25",
        "no-js": (folder / "no-js.html").as_uri() + "#show=failures",
    }
    return {name: parse(dom) for name, dom in _chromium_dumps(urls).items()}


def _body(doc: Node) -> dict[str, str]:
    return doc.find_all("body")[0].attrs


def _visible_rows(doc: Node) -> list[tuple[str, str, str]]:
    rows = [n for n in doc.find_all("tr") if n.has_class("r")]
    return [
        (n.attrs["data-id"], n.attrs["data-revision"], n.attrs["data-outcome"]) for n in rows if "hidden" not in n.attrs
    ]


def test_rendered_page_loads_nothing_and_its_counts_are_the_runs(rendered: dict[str, Node]) -> None:
    run = sample_run()
    doc = rendered["report"]
    body = _body(doc)
    assert body["data-js"] == "ready"
    assert (body["data-resources"], body["data-csp-violations"]) == ("0", "0")
    # the control: the same page with an external image and stylesheet added is caught
    leaky = _body(rendered["filtered"])
    assert int(leaky["data-csp-violations"]) >= 2 and int(leaky["data-resources"]) >= 1
    # header totals and verdict
    totals = {n.attrs["data-outcome"]: int(n.attrs["data-count"]) for n in doc.find_all("div") if n.has_class("total")}
    assert totals == run.counts()
    assert doc.find_all(id="verdict")[0].text() == "FAIL"
    # summary by area
    table = doc.find_all("table", id="areas")[0]
    shown = {
        (row.attrs["data-area"], n.attrs["data-outcome"]): int(n.attrs["data-count"])
        for row in table.find_all("tr")
        if "data-area" in row.attrs
        for n in row.find_all("span")
        if "data-count" in n.attrs
    }
    assert shown == dict(Counter((area_of(r), r.status) for r in run.results))
    assert [row.attrs["data-area"] for row in table.find_all("tr") if "data-area" in row.attrs] == [
        "framing",
        "lifecycle",
        "tools",
        "resources",
        "prompts",
        "2026-07-28",
    ]
    # every result is listed, and with no filter chosen every one is visible
    assert body["data-show"] == "all" and body["data-rev"] == "all"
    assert len(_visible_rows(doc)) == len(run.results) == int(body["data-visible"])
    assert doc.find_all(id="shown")[0].text() == f"showing {len(run.results)} of {len(run.results)} results"


def test_filters_from_the_url_fragment(rendered: dict[str, Node]) -> None:
    run = sample_run()
    doc = rendered["filtered"]
    expected = [
        (r.id, r.revision, r.status)
        for r in run.results
        if r.status in ("fail", "error") and r.revision == "2025-11-25"
    ]
    assert _visible_rows(doc) == expected == [("SV-12", "2025-11-25", "fail"), ("SV-31", "2025-11-25", "fail")]
    body = _body(doc)
    assert (body["data-show"], body["data-rev"], body["data-visible"]) == ("failures", "2025-11-25", "2")
    cards = [(n.attrs["data-id"], n.attrs["data-revision"]) for n in doc.find_all("details") if "hidden" not in n.attrs]
    assert cards == [("SV-12", "2025-11-25"), ("SV-31", "2025-11-25")]
    pressed = [b.text() for b in doc.find_all("button") if b.attrs.get("aria-pressed") == "true"]
    assert pressed == ["failures only", "2025-11-25"]
    # the other revisions' columns of the area summary are dimmed
    dimmed = {n.attrs["data-col"] for n in doc.iter() if "data-col" in n.attrs and n.has_class("col-dim")}
    assert dimmed == {"2026-07-28", "2025-06-18"}


def test_without_javascript_everything_is_shown(rendered: dict[str, Node]) -> None:
    doc = rendered["no-js"]
    assert doc.find_all("html")[0].attrs["class"] == "nojs"
    assert "data-js" not in _body(doc)
    assert len(_visible_rows(doc)) == len(sample_run().results)


def test_injected_markup_stays_text_in_the_browser(rendered: dict[str, Node]) -> None:
    doc = rendered["report"]
    assert "data-pwned" not in _body(doc)
    assert len(doc.find_all("script")) == 1 and doc.find_all("img") == []
    assert doc.find_all("title")[0].text().startswith("FAIL · demo <script>")
    (card,) = [n for n in doc.find_all("details") if n.attrs.get("data-id") == "SV-31"]
    assert f"tools/call answered {PWN_SCRIPT} {PWN_IMG}" in card.text()
    assert PWN_BREAKOUT in card.text()


# -- end to end ----------------------------------------------------------------------------------


def test_cli_writes_the_page_for_the_reference_server(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    argv = [sys.executable, "-m", "mcpwire.conformance", "-q", "--only", "SV-12,SV-02", "--revision", "2025-11-25"]
    done = subprocess.run([*argv, "--html", str(page)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "result: PASS"
    doc = parse(page.read_text(encoding="utf-8"))
    assert _body(doc)["data-verdict"] == "pass"
    assert doc.find_all(id="verdict")[0].text() == "PASS"
    totals = {n.attrs["data-outcome"]: int(n.attrs["data-count"]) for n in doc.find_all("div") if n.has_class("total")}
    assert totals["pass"] == 2 and sum(totals.values()) == 2
    rows = [(n.attrs["data-id"], n.attrs["data-outcome"]) for n in doc.find_all("tr") if n.has_class("r")]
    assert sorted(rows) == [("SV-02", "pass"), ("SV-12", "pass")]
    assert "No failure, warning or unobserved rule." in doc.text()
    assert _loads(doc) == []
