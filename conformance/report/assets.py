"""The stylesheet and script inlined into the HTML report (``mcpwire check --html``).

The page loads nothing: its Content-Security-Policy allows no source but these inline blocks (the
script by its SHA-256), so a page that referred to anything else would show a blank there, not
fetch it. The script only filters what the markup already shows (every result is visible without
it) and never builds markup from text: it sets ``hidden``, classes and ``data-`` attributes.

State lives in the URL fragment, so a filtered view can be linked: ``#show=failures&rev=2025-11-25``
(``show`` is ``all``, ``problems`` or ``failures``; ``rev`` a revision or ``all``). The script
records what it did on ``<body>`` (``data-js``, ``data-show``, ``data-rev``, ``data-visible``,
``data-resources``, ``data-csp-violations``) so a headless browser test can read it back.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

__all__ = ["CSS", "CSP", "JS", "script_hash"]

CSS: Final = """
:root{--bg:#f3f5f8;--card:#fff;--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--code:#f6f8fa;--hover:#eef2f6;
--pass:#1a7f37;--fail:#cf222e;--error:#8250df;--warning:#b35900;--not_observed:#0969da;
--expected_fail:#6e7781;--skipped:#9aa4ae;--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--card:#161b22;--fg:#e6edf3;--muted:#8d96a0;
--line:#30363d;--code:#0d1117;--hover:#1f2630;--pass:#3fb950;--fail:#f85149;--error:#a371f7;--warning:#d29922;
--not_observed:#4493f8;--expected_fail:#8d96a0;--skipped:#545d68}}
*{box-sizing:border-box}
html{background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
body{margin:0}
main,.top-inner,body>footer{max-width:1180px;margin:0 auto;padding:0 24px}
a{color:var(--not_observed)}
code,pre,.mono{font-family:var(--mono);font-size:13px}
h2{font-size:18px;margin:32px 0 12px}
.top{color:#fff;padding:22px 0 20px;background:linear-gradient(135deg,#1a7f37,#116329)}
.top.v-fail{background:linear-gradient(135deg,#cf222e,#82071e)}
.top h1{margin:0;font-size:22px;font-weight:600;word-break:break-all}
.top h1 small{display:block;font-size:13px;font-weight:500;opacity:.85;letter-spacing:.04em;text-transform:uppercase}
.verdict{display:flex;align-items:center;gap:18px;flex-wrap:wrap}
.verdict .big{font-size:30px;font-weight:800;letter-spacing:.06em;border:3px solid #fff;border-radius:10px;
padding:2px 16px}
.verdict p{margin:0;font-size:16px}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:16px 0 0;font-size:14px}
.meta dt{opacity:.8}.meta dd{margin:0}
.chip{display:inline-block;border-radius:999px;padding:0 10px;margin:0 6px 4px 0;font-size:13px;
background:rgba(255,255,255,.18);border:1px solid rgba(255,255,255,.35)}
.chip.off{opacity:.7;text-decoration:line-through}
.totals{display:flex;flex-wrap:wrap;gap:10px;margin:18px 0 0}
.total{background:var(--card);color:var(--fg);border-radius:8px;padding:6px 12px;min-width:92px;
border-top:4px solid var(--c,var(--line));box-shadow:0 1px 2px rgba(0,0,0,.15)}
.total b{display:block;font-size:22px;line-height:1.2}
.total span{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.total.zero{border-top-color:var(--line)}.total.zero b{color:var(--muted)}
.o-pass{--c:var(--pass)}.o-fail{--c:var(--fail)}.o-error{--c:var(--error)}.o-warning{--c:var(--warning)}
.o-not_observed{--c:var(--not_observed)}.o-expected_fail{--c:var(--expected_fail)}.o-skipped{--c:var(--skipped)}
.bar{display:flex;height:12px;border-radius:6px;overflow:hidden;background:var(--line);min-width:120px}
.bar .seg{background:var(--c)}
.bar.big{height:10px;margin-top:16px;background:rgba(255,255,255,.25);box-shadow:0 0 0 2px rgba(255,255,255,.7)}
.filters{position:sticky;top:0;z-index:2;background:var(--card);border-bottom:1px solid var(--line);
box-shadow:0 1px 3px rgba(0,0,0,.06)}
.filters .in{max-width:1180px;margin:0 auto;padding:8px 24px;display:flex;flex-wrap:wrap;gap:8px 20px;
align-items:center}
.nojs .filters{display:none}
.group{display:flex;align-items:center;gap:4px;flex-wrap:wrap}
.group>span{color:var(--muted);font-size:13px;margin-right:4px}
.filters button{font:inherit;font-size:13px;color:var(--fg);background:var(--card);border:1px solid var(--line);
border-radius:6px;padding:2px 10px;cursor:pointer}
.filters button:hover{background:var(--hover)}
.filters button[aria-pressed=true]{background:var(--fg);color:var(--card);border-color:var(--fg)}
.filters .count{margin-left:auto;color:var(--muted);font-size:13px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;overflow:hidden}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:7px 12px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);font-weight:600;background:var(--code)}
tr:last-child>*{border-bottom:0}
.areas td.bar-cell{width:38%}
.areas .nums{margin-top:4px;font-size:12px;color:var(--muted)}
.areas .nums span{margin-right:10px;white-space:nowrap}
.areas .nums span:before{content:"";display:inline-block;width:8px;height:8px;border-radius:2px;
background:var(--c);margin-right:4px}
.cell{display:inline-block;min-width:44px;text-align:center;border-radius:6px;padding:0 6px;font-size:13px;
font-weight:600;color:#fff;background:var(--c)}
.cell.o-skipped{color:var(--fg);background:transparent;font-weight:400;opacity:.6}
.cell.o-pass{background:transparent;color:var(--pass);border:1px solid var(--pass)}
.rev-on .col-dim{opacity:.3}
.badge{display:inline-block;font-size:11px;font-weight:700;letter-spacing:.05em;text-transform:uppercase;
border-radius:4px;padding:1px 6px;color:#fff;background:var(--c);white-space:nowrap}
.badge.o-skipped{color:var(--fg)}
.tag{display:inline-block;font-size:12px;color:var(--muted);border:1px solid var(--line);border-radius:4px;
padding:0 5px}
details.res{background:var(--card);border:1px solid var(--line);border-left:5px solid var(--c);border-radius:8px;
margin:0 0 10px}
details.res>summary{cursor:pointer;padding:10px 14px;display:flex;gap:10px;align-items:baseline;flex-wrap:wrap;
list-style:none}
details.res>summary::-webkit-details-marker{display:none}
details.res>summary:before{content:"\\25B8";color:var(--muted);width:10px}
details.res[open]>summary:before{content:"\\25BE"}
details.res>summary:hover{background:var(--hover)}
details.res .title{font-weight:600;flex:1 1 300px}
.res .body{padding:0 16px 14px 38px}
.reason{margin:4px 0 10px;white-space:pre-wrap;word-break:break-word}
blockquote{margin:0 0 12px;padding:8px 14px;border-left:4px solid var(--line);background:var(--code);
border-radius:0 6px 6px 0}
blockquote p{margin:0;font-style:italic}
blockquote footer{margin-top:4px;font-size:13px;color:var(--muted)}
.ex h4{margin:12px 0 4px;font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.ex ol{list-style:none;margin:0;padding:0;border:1px solid var(--line);border-radius:6px;overflow:hidden}
.ex li{display:grid;grid-template-columns:64px 92px 1fr;gap:8px;padding:4px 8px;border-top:1px solid var(--line)}
.ex li:first-child{border-top:0}
.ex li.d-sent{background:rgba(9,105,218,.05)}
.ex li.d-received{background:rgba(26,127,55,.05)}
.ex li.d-stderr{background:rgba(179,89,0,.06)}
.ex .at{color:var(--muted);font-family:var(--mono);font-size:12px;text-align:right;padding-top:2px}
.ex .dir{font-size:12px;font-weight:600;padding-top:2px;white-space:nowrap}
.d-sent .dir{color:var(--not_observed)}.d-received .dir{color:var(--pass)}.d-stderr .dir{color:var(--warning)}
.d-event .dir,.d-note .dir,.d-omitted .dir{color:var(--muted)}
.ex pre{margin:0;white-space:pre-wrap;word-break:break-word;max-height:28em;overflow:auto}
.http h4{margin:12px 0 4px;font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.http ol{list-style:none;margin:0;padding:0;border:1px solid var(--line);border-radius:6px;overflow:hidden}
.http li{padding:6px 8px;border-top:1px solid var(--line)}.http li:first-child{border-top:0}
.http .line{font-family:var(--mono);font-size:13px;word-break:break-all}
.http .st{font-weight:700}.http .st.bad{color:var(--fail)}
.http dl{display:grid;grid-template-columns:max-content 1fr;gap:0 12px;margin:4px 0 0 16px;font-family:var(--mono);
font-size:12px}.http dt{color:var(--muted)}.http dd{margin:0;word-break:break-all}
.http pre{margin:4px 0 0 16px;white-space:pre-wrap;word-break:break-word;max-height:14em;overflow:auto}
.j-k{color:#953800}.j-s{color:#0a3069}.j-n{color:#0550ae}.j-l{color:#8250df}.j-p{color:var(--muted)}
@media (prefers-color-scheme:dark){.j-k{color:#ffa657}.j-s{color:#a5d6ff}.j-n{color:#79c0ff}.j-l{color:#d2a8ff}}
.cut{display:block;margin-top:4px;font-family:system-ui,sans-serif;font-size:12px;color:var(--warning)}
.results td.reason-cell{color:var(--muted);font-size:13px;word-break:break-word}
.results td{font-size:14px;padding:5px 12px}.results td.nw{white-space:nowrap}
section{scroll-margin-top:56px}
.empty{color:var(--muted);font-style:italic;padding:10px 2px}
.empty-filter{display:none}
.js .none-visible>.empty-filter{display:block}
.stale{border-left:5px solid var(--fail);background:var(--card);padding:10px 14px;border-radius:8px;margin-bottom:10px}
body>footer{color:var(--muted);font-size:13px;padding:28px 24px 40px}
@media print{.filters{display:none}details.res .body{display:block}}
"""

JS: Final = """
(function () {
  "use strict";
  var root = document.documentElement;
  root.className = root.className.replace(/\\bnojs\\b/, "js");
  var violations = 0;
  document.addEventListener("securitypolicyviolation", function () {
    violations += 1;
    if (document.body) { document.body.setAttribute("data-csp-violations", String(violations)); }
  });
  var SHOW = {all: null, problems: ["fail", "error", "warning", "not_observed"], failures: ["fail", "error"]};
  function params() { return new URLSearchParams(location.hash.replace(/^#/, "")); }
  function revisions() { return (document.body.getAttribute("data-revisions") || "").split(" "); }
  function state() {
    var p = params();
    var show = p.get("show");
    var rev = p.get("rev");
    if (!Object.prototype.hasOwnProperty.call(SHOW, show)) { show = "all"; }
    if (revisions().indexOf(rev) < 0) { rev = "all"; }
    return {show: show, rev: rev};
  }
  function apply() {
    var s = state();
    var wanted = SHOW[s.show];
    var body = document.body;
    var visible = 0;
    var items = document.querySelectorAll(".r");
    for (var i = 0; i < items.length; i++) {
      var el = items[i];
      var ok = (!wanted || wanted.indexOf(el.getAttribute("data-outcome")) >= 0) &&
        (s.rev === "all" || el.getAttribute("data-revision") === s.rev);
      el.hidden = !ok;
      if (ok && el.tagName === "TR") { visible += 1; }
    }
    var lists = document.querySelectorAll(".filterable");
    for (var j = 0; j < lists.length; j++) {
      var any = lists[j].querySelector(".r:not([hidden])") !== null;
      lists[j].classList.toggle("none-visible", !any);
    }
    var cols = document.querySelectorAll("[data-col]");
    for (var k = 0; k < cols.length; k++) {
      cols[k].classList.toggle("col-dim", s.rev !== "all" && cols[k].getAttribute("data-col") !== s.rev);
    }
    root.classList.toggle("rev-on", s.rev !== "all");
    var buttons = document.querySelectorAll(".filters button[data-key]");
    for (var b = 0; b < buttons.length; b++) {
      var key = buttons[b].getAttribute("data-key");
      buttons[b].setAttribute("aria-pressed", String(buttons[b].getAttribute("data-value") === s[key]));
    }
    var total = document.querySelectorAll("tr.r").length;
    var counter = document.getElementById("shown");
    if (counter) { counter.textContent = "showing " + visible + " of " + total + " results"; }
    body.setAttribute("data-show", s.show);
    body.setAttribute("data-rev", s.rev);
    body.setAttribute("data-visible", String(visible));
  }
  function choose(key, value) {
    var p = params();
    if (value === "all") { p.delete(key); } else { p.set(key, value); }
    location.hash = p.toString();
  }
  document.addEventListener("DOMContentLoaded", function () {
    var buttons = document.querySelectorAll(".filters button[data-key]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (event) {
        var b = event.currentTarget;
        choose(b.getAttribute("data-key"), b.getAttribute("data-value"));
      });
    }
    var expand = document.getElementById("expand");
    if (expand) {
      expand.addEventListener("click", function () {
        var all = document.querySelectorAll("details.res");
        var open = expand.getAttribute("aria-pressed") !== "true";
        for (var d = 0; d < all.length; d++) { all[d].open = open; }
        expand.setAttribute("aria-pressed", String(open));
      });
    }
    window.addEventListener("hashchange", apply);
    apply();
    document.body.setAttribute("data-csp-violations", String(violations));
    document.body.setAttribute("data-js", "ready");
  });
  window.addEventListener("load", function () {
    var entries = window.performance && performance.getEntriesByType ? performance.getEntriesByType("resource") : [];
    document.body.setAttribute("data-resources", String(entries.length));
  });
})();
"""


def script_hash(script: str = JS) -> str:
    """The CSP source expression that allows exactly ``script`` inline."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


#: Nothing but the inline stylesheet, the inline script (by hash) and a ``data:`` favicon.
CSP: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src {script_hash()}; base-uri 'none'; form-action 'none'"
)
