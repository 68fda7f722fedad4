"""The ``--html`` report: one self-contained page, and an index page for several servers.

Theory of operation: the page shows the verdict, a summary by area and revision, every problem with
the exchange that proves it, and every result. Everything is inline (no external CSS, JS, font or
image) and the page's Content-Security-Policy forbids loading anything and runs only its own
script (by hash). Much of the text comes from the server under test, so it is escaped everywhere
(:func:`mcpwire.redaction.clean_markup`, then HTML escaping): markup from the server stays text.
Payloads are pretty-printed JSON when they are JSON, shortened (long strings, many lines) and
bounded in depth (a payload nested deeper than :data:`MAX_DEPTH_SHOWN` shows its outer levels),
so a hostile answer of any size or depth still gives a page.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

from mcpwire.redaction import clean_markup

from ..evidence import depth, limit_depth
from ..model import Result, Run
from .assets import CSP, CSS, JS
from .views import (
    LABELS,
    area_of,
    area_order,
    counts_of,
    generator_version,
    matrix,
    outcomes,
    server_info,
    spec_link,
    verdict,
    verdict_detail,
)

__all__ = ["MAX_PAYLOAD_CHARS", "MAX_PAYLOAD_LINES", "MAX_STRING_CHARS", "index_html", "to_html"]

#: Evidence shown per exchange entry in the HTML page before it is cut (the JSON keeps it all).
MAX_PAYLOAD_LINES: Final = 60
MAX_PAYLOAD_CHARS: Final = 6000
MAX_STRING_CHARS: Final = 400
#: levels of a JSON payload shown; deeper containers are named, not shown
MAX_DEPTH_SHOWN: Final = 40
#: response headers the page shows (any ``mcp-*`` header too)
_RESPONSE_HEADERS_SHOWN: Final = frozenset(
    {"content-type", "www-authenticate", "x-accel-buffering", "allow", "location", "cache-control", "retry-after"}
)


def _h(text: object) -> str:
    """HTML text or attribute value."""
    return html.escape(clean_markup(str(text)), quote=True)


_JSON_TOKEN = re.compile(
    r'(?P<s>"(?:[^"\\]|\\.)*")(?P<colon>\s*:)?'
    r"|(?P<n>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<l>true|false|null)"
    r"|(?P<p>[{}\[\],])"
)


def _highlight(line: str) -> str:
    """One line of ``json.dumps(indent=2)`` output as escaped HTML with token classes."""
    out: list[str] = []
    pos = 0
    for m in _JSON_TOKEN.finditer(line):
        out.append(_h(line[pos : m.start()]))
        pos = m.end()
        if m.group("s") is not None:
            kind = "j-k" if m.group("colon") else "j-s"
            out.append(f'<span class="{kind}">{_h(m.group("s"))}</span>{_h(m.group("colon") or "")}')
        else:
            kind = "j-n" if m.group("n") else "j-l" if m.group("l") else "j-p"
            out.append(f'<span class="{kind}">{_h(m.group())}</span>')
    out.append(_h(line[pos:]))
    return "".join(out)


def _shorten_strings(value: Any, cut: list[int]) -> Any:
    """``value`` (bounded in depth) with every string longer than MAX_STRING_CHARS cut; counts the
    cuts in ``cut``."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        cut[0] += 1
        return value[:MAX_STRING_CHARS] + f"… ({len(value) - MAX_STRING_CHARS} more characters)"
    if isinstance(value, list):
        return [_shorten_strings(v, cut) for v in value]
    if isinstance(value, dict):
        return {k: _shorten_strings(v, cut) for k, v in value.items()}
    return value


def _decoded(text: str) -> Any:
    """``text`` decoded as JSON, or None (not JSON, or too deep for the decoder)."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _payload_html(text: str) -> str:
    """Pretty-printed, highlighted JSON when ``text`` is JSON, else the text; long payloads cut."""
    notes: list[str] = []
    body: str
    value = _decoded(text)
    parsed = isinstance(value, dict | list)
    if parsed:
        cut = [0]
        bounded = limit_depth(value, MAX_DEPTH_SHOWN)
        if depth(value) > MAX_DEPTH_SHOWN:
            notes.append(f"levels deeper than {MAX_DEPTH_SHOWN} not shown")
        pretty = json.dumps(_shorten_strings(bounded, cut), indent=2, ensure_ascii=False)
        if cut[0]:
            notes.append(f"{cut[0]} long string{'s' if cut[0] > 1 else ''} cut to {MAX_STRING_CHARS} characters")
        lines = pretty.split("\n")
        kept: list[str] = []
        size = 0
        for line in lines:
            if len(kept) >= MAX_PAYLOAD_LINES or size + len(line) > MAX_PAYLOAD_CHARS:
                break
            kept.append(line)
            size += len(line) + 1
        if len(kept) < len(lines):
            notes.append(f"{len(lines) - len(kept)} more lines not shown")
        body = "\n".join(_highlight(line) for line in kept)
    else:
        shown = text[:MAX_PAYLOAD_CHARS]
        if len(text) > MAX_PAYLOAD_CHARS:
            notes.append(f"{len(text) - MAX_PAYLOAD_CHARS} more characters not shown")
        body = _h(shown)
    if notes:
        note = "; ".join(notes) + ". The --json report has the whole recorded text."
        body += f'<span class="cut">{_h(note)}</span>'
    elif not parsed and text.lstrip().startswith(("{", "[")):
        body += '<span class="cut">not complete JSON: shown as recorded (the recording may be cut).</span>'
    return f"<pre>{body}</pre>"


_ARROWS: Final = {
    "sent": "→ sent",
    "received": "← received",
    "event": "• event",
    "stderr": "stderr",
    "omitted": "…",
    "note": "note",
}


def _exchange_html(r: Result) -> str:
    entries = r.exchanges
    if not entries:
        return '<p class="empty">No exchange was recorded for this result.</p>'
    parts: list[str] = []
    current: int | None = None
    for e in entries:
        if not parts or e.process != current:
            if parts:
                parts.append("</ol>")
            title = f"server process {e.process}" if e.process is not None else "evidence"
            parts.append(f"<h4>{_h(title)}</h4><ol>")
            current = e.process
        at = f"{e.at_s:.3f} s" if e.at_s is not None else ""
        parts.append(
            f'<li class="d-{_h(e.direction)}"><span class="at">{_h(at)}</span>'
            f'<span class="dir">{_h(_ARROWS.get(e.direction, e.direction))}</span>{_payload_html(e.text)}</li>'
        )
    return '<div class="ex">' + "".join(parts) + "</ol></div>"


def _http_html(r: Result) -> str:
    """The HTTP exchanges of ``r``: request line, status, the headers that matter, bodies cut."""
    if not r.http_exchanges:
        return ""
    items = []
    for e in r.http_exchanges:
        status = e.get("status")
        bad = status is None or (isinstance(status, int) and status >= 400)
        shown = str(status) if status is not None else f"no answer ({e.get('error') or 'none'})"
        line = (
            f'<div class="line">{_h(e.get("method", "?"))} {_h(e.get("url", ""))} → '
            f'<span class="st{" bad" if bad else ""}">{_h(shown)}</span>'
            + (f" {_h(e.get('content_type'))}" if e.get("content_type") else "")
            + "</div>"
        )
        request = e["request_headers"]
        response = {
            k: v for k, v in e["response_headers"].items() if k in _RESPONSE_HEADERS_SHOWN or k.startswith("mcp-")
        }
        parts = [line]
        limited = _rate_limited_text(e.get("rate_limited"))
        if limited:
            parts.append(f'<pre class="rate-limited" aria-label="rate-limited">{_h(limited)}</pre>')
        if request:
            rows = "".join(f"<dt>{_h(k)}</dt><dd>{_h(v)}</dd>" for k, v in request.items())
            parts.append(f'<dl class="req" aria-label="request headers">{rows}</dl>')
        if e.get("request_body"):
            parts.append(f'<pre class="req-body">{_h(str(e["request_body"])[:MAX_PAYLOAD_CHARS])}</pre>')
        if response:
            rows = "".join(f"<dt>{_h(k)}</dt><dd>{_h(v)}</dd>" for k, v in response.items())
            parts.append(f'<dl class="resp" aria-label="response headers">{rows}</dl>')
        events = e.get("events") or []
        if events:
            text = "\n".join(
                " ".join(f"{key}: {event.get(key)}" for key in ("event", "id", "retry") if event.get(key) is not None)
                + f" data: {str(event.get('data', ''))[:MAX_STRING_CHARS]}"
                for event in events[:MAX_PAYLOAD_LINES]
                if isinstance(event, Mapping)
            )
            parts.append(f'<pre class="resp-events">{_h(text)}</pre>')
        elif e.get("body"):
            parts.append(f'<pre class="resp-body">{_h(str(e["body"])[:MAX_PAYLOAD_CHARS])}</pre>')
        items.append(f"<li>{''.join(parts)}</li>")
    return f'<div class="http"><h4>HTTP exchanges</h4><ol>{"".join(items)}</ol></div>'


def _rate_limited_text(answers: Any) -> str:
    """The 429 answers an HTTP exchange waited out (see :mod:`conformance.ratelimit`), a line each."""
    if not isinstance(answers, list):
        return ""
    lines = []
    for a in answers[:MAX_PAYLOAD_LINES]:
        if not isinstance(a, Mapping):
            continue
        asked = f"Retry-After: {a.get('retry_after')!r}" if a.get("retry_after") is not None else "no Retry-After"
        done = f"resent after {a.get('waited_s')} s" if a.get("resent") else f"not resent ({a.get('gave_up')})"
        lines.append(f"429 Too Many Requests ({asked}), attempt {a.get('attempt')}: {done}")
    return "\n".join(lines)


def _attrs(r: Result) -> str:
    return (
        f'data-id="{_h(r.id)}" data-outcome="{_h(r.status)}" '
        f'data-revision="{_h(r.revision)}" data-area="{_h(area_of(r))}"'
    )


def _badge(status: str) -> str:
    return f'<span class="badge o-{_h(status)}">{_h(LABELS.get(status, status))}</span>'


def _bar(counts: Mapping[str, int], *, big: bool = False) -> str:
    total = sum(counts.values())
    label = ", ".join(f"{n} {LABELS.get(s, s)}" for s in outcomes(counts) if (n := counts.get(s, 0)))
    segs = "".join(
        f'<span class="seg o-{_h(s)}" style="width:{100 * n / total:.3f}%"></span>'
        for s in outcomes(counts)
        if (n := counts.get(s, 0)) and total
    )
    return f'<div class="bar{" big" if big else ""}" role="img" aria-label="{_h(label or "no results")}">{segs}</div>'


def _problem_html(r: Result, *, open_: bool) -> str:
    url = spec_link(r)
    cite = f"<cite>{_h(r.spec)}</cite>"
    if url:
        cite += f' · <a href="{_h(url)}" rel="noreferrer noopener">open the spec section</a>'
    quote = f"<p>“{_h(r.quote)}”</p>" if r.quote else ""
    return (
        f'<details class="res r o-{_h(r.status)}" {_attrs(r)}{" open" if open_ else ""}>'
        f"<summary>{_badge(r.status)}<code>{_h(r.id)}</code>"
        f'<span class="tag">{_h(r.level)}</span><span class="tag">{_h(r.revision)}</span>'
        f'<span class="title">{_h(r.title)}</span><span class="tag">{_h(area_of(r))}</span></summary>'
        f'<div class="body"><p class="reason">{_h(r.message)}</p>'
        f"<blockquote>{quote}<footer>{cite}</footer></blockquote>"
        f"{_exchange_html(r)}{_http_html(r)}</div></details>"
    )


def _cell(results: list[Result]) -> tuple[str, str]:
    """Status class and text of one area x revision cell."""
    if not results:
        return "", ""
    counts = Counter(r.status for r in results)
    for status, sign in (("fail", "✗"), ("error", "✗"), ("warning", "!"), ("not_observed", "?")):
        if counts[status]:
            n = counts[status] + (counts["error"] if status == "fail" else 0)
            return status, f"{sign} {n}"
    if counts["pass"] or counts["expected_fail"]:
        return "pass", f"✓ {counts['pass'] + counts['expected_fail']}"
    return "skipped", "\u2013"  # en dash: nothing applied


def _header_html(run: Run) -> str:
    outcome = verdict(run)
    detail = verdict_detail(run) or "no warnings"
    counts = run.counts()
    if outcome == "pass":
        summary = "every MUST rule checked passes"
    elif counts.get("fail") or counts.get("error"):
        summary = "rules the server must follow are broken"
    else:
        summary = "the baseline lists failures that no longer happen"
    infos = [info for p in run.probes if (info := server_info(p))]
    meta: list[str] = []
    if infos:
        info = infos[0]
        name = " ".join(str(info[k]) for k in ("title", "name", "version") if info.get(k) not in (None, ""))
        meta.append(f"<dt>server</dt><dd>{_h(name or _compact(info))}</dd>")
    chips = "".join(
        f'<span class="chip" title="{_h(", ".join(sorted(p.capabilities)) or "no capabilities")}">'
        f"{_h(p.revision)}</span>"
        for p in run.probes
        if p.revision in run.revisions and p.accepted
    )
    meta.append(f"<dt>revisions checked</dt><dd>{chips or 'none'}</dd>")
    broken = "".join(
        f'<span class="chip off" title="{_h(p.detail)}">{_h(p.revision)}: {_h(p.violation.check_id)}</span>'
        for p in run.probes
        if p.violation is not None
    )
    if broken:
        meta.append(f"<dt>handshake broken</dt><dd>{broken}</dd>")
    refused = "".join(
        f'<span class="chip off" title="{_h(p.detail)}">{_h(p.revision)}</span>'
        for p in run.probes
        if not p.accepted and p.violation is None
    )
    if refused:
        meta.append(f"<dt>not accepted</dt><dd>{refused}</dd>")
    caps = {p.revision: set(p.capabilities) for p in run.probes if p.accepted and p.revision in run.revisions}
    if caps:
        union = sorted(set().union(*caps.values()))
        items = []
        for name in union:
            missing = [rev for rev, have in caps.items() if name not in have]
            note = f" (not in {', '.join(missing)})" if missing else ""
            items.append(f'<span class="chip">{_h(name)}{_h(note)}</span>')
        meta.append(f"<dt>capabilities</dt><dd>{''.join(items) or 'none advertised'}</dd>")
    totals = "".join(
        f'<div class="total o-{_h(s)}{" zero" if not counts.get(s) else ""}" data-outcome="{_h(s)}" '
        f'data-count="{counts.get(s, 0)}"><b>{counts.get(s, 0)}</b><span>{_h(LABELS.get(s, s))}</span></div>'
        for s in outcomes(counts)
    )
    return (
        f'<header class="top v-{outcome}"><div class="top-inner">'
        f'<div class="verdict"><span class="big" id="verdict">{outcome.upper()}</span>'
        f"<p>{_h(summary)}<br><small>{_h(detail)}</small></p></div>"
        f'<h1 style="margin-top:14px"><small>mcpwire check</small>{_h(run.target)}</h1>'
        f'<dl class="meta">{"".join(meta)}</dl>'
        f'<div class="totals" id="totals" data-total="{len(run.results)}">{totals}</div>'
        f"{_bar(counts, big=True)}</div></header>"
    )


def _filters_html(run: Run) -> str:
    shows = "".join(
        f'<button type="button" data-key="show" data-value="{v}" aria-pressed="false">{label}</button>'
        for v, label in (("all", "all"), ("problems", "problems"), ("failures", "failures only"))
    )
    revs = '<button type="button" data-key="rev" data-value="all" aria-pressed="false">all</button>' + "".join(
        f'<button type="button" data-key="rev" data-value="{_h(rev)}" aria-pressed="false">{_h(rev)}</button>'
        for rev in run.revisions
    )
    return (
        '<nav class="filters" aria-label="filters"><div class="in">'
        f'<div class="group"><span>show</span>{shows}</div>'
        f'<div class="group"><span>revision</span>{revs}</div>'
        '<div class="group"><button type="button" id="expand" aria-pressed="false">expand all</button></div>'
        '<span class="count" id="shown"></span></div></nav>'
    )


def _areas_html(run: Run) -> str:
    by_area: dict[str, list[Result]] = defaultdict(list)
    for r in run.results:
        by_area[area_of(r)].append(r)
    head = "".join(f'<th data-col="{_h(rev)}">{_h(rev)}</th>' for rev in run.revisions)
    rows = []
    for area, results in sorted(by_area.items(), key=lambda kv: area_order(kv[0])):
        counts = counts_of(results)
        nums = "".join(
            f'<span class="o-{_h(s)}" data-outcome="{_h(s)}" data-count="{n}">{n} {_h(LABELS.get(s, s))}</span>'
            for s in outcomes(counts)
            if (n := counts.get(s, 0))
        )
        cells = []
        for rev in run.revisions:
            status, text = _cell([r for r in results if r.revision == rev])
            inner = f'<span class="cell o-{_h(status)}">{_h(text)}</span>' if status else ""
            cells.append(f'<td data-col="{_h(rev)}">{inner}</td>')
        rows.append(
            f'<tr data-area="{_h(area)}"><th scope="row" style="text-transform:none;font-size:14px;color:inherit;'
            f'background:none">{_h(area)}</th><td class="bar-cell">{_bar(counts)}<div class="nums">{nums}</div></td>'
            f"{''.join(cells)}</tr>"
        )
    if not rows:
        return '<p class="empty">No check was run.</p>'
    return (
        '<div class="card"><table class="areas" id="areas"><thead><tr><th>area</th><th>outcomes</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


_PROBLEMS: Final = ("fail", "error", "warning", "not_observed", "expected_fail")


def _problems_html(run: Run) -> str:
    rank = {s: i for i, s in enumerate(_PROBLEMS)}
    problems = sorted((r for r in run.results if r.status in rank), key=lambda r: rank[r.status])
    stale = "".join(
        f'<div class="stale"><b>stale baseline entry</b> <code>{_h(e)}</code>: the check no longer fails; '
        "remove it from the baseline (this fails the run).</div>"
        for e in run.stale_baseline
    )
    if not problems:
        return stale + '<p class="empty">No failure, warning or unobserved rule.</p>'
    open_ = sum(r.status in ("fail", "error") for r in problems) <= 5
    items = "".join(_problem_html(r, open_=open_ and r.status in ("fail", "error")) for r in problems)
    return (
        f'{stale}<div class="filterable" id="problems-list">{items}'
        '<p class="empty empty-filter">Nothing here matches the filter.</p></div>'
    )


def _results_html(run: Run) -> str:
    rows = "".join(
        f'<tr class="r" {_attrs(r)}><td class="nw">{_badge(r.status)}</td><td class="nw"><code>{_h(r.id)}</code></td>'
        f'<td class="nw">{_h(r.level)}</td><td class="nw">{_h(r.revision)}</td><td class="nw">{_h(area_of(r))}</td>'
        f"<td>{_h(r.title)}</td>"
        f'<td class="reason-cell">{_h(r.message)}</td></tr>'
        for r in run.results
    )
    return (
        '<div class="card filterable"><table class="results" id="results"><thead><tr><th>outcome</th><th>id</th>'
        "<th>level</th><th>revision</th><th>area</th><th>rule</th><th>reason</th></tr></thead>"
        f'<tbody>{rows}</tbody></table><p class="empty empty-filter" style="padding:10px 14px">'
        "Nothing here matches the filter.</p></div>"
    )


def _compact(value: Any) -> str:
    try:
        return json.dumps(limit_depth(value, MAX_DEPTH_SHOWN), ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return repr(type(value))


def to_html(run: Run) -> str:
    """A single self-contained page: verdict, summary by area, each problem with its exchange.

    Everything is inline (no external CSS, JS, font or image) and the Content-Security-Policy
    forbids loading anything. Without JavaScript every result is shown; with it, the filters
    (``#show=failures&rev=REVISION``) hide the others.
    """
    shown_verdict = verdict(run).upper()
    n_problems = sum(r.status in _PROBLEMS for r in run.results) + len(run.stale_baseline)
    return (
        '<!doctype html>\n<html lang="en" class="nojs"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{_h(CSP)}">'
        '<meta name="color-scheme" content="light dark"><meta name="referrer" content="no-referrer">'
        f"<title>{shown_verdict} · {_h(run.target)} · mcpwire check</title>"
        '<link rel="icon" href="data:,">'
        f"<style>{CSS}</style><script>{JS}</script></head>"
        f'<body data-verdict="{verdict(run)}" data-revisions="{_h(" ".join(run.revisions))}">'
        f"{_header_html(run)}{_filters_html(run)}<main>"
        f'<section id="summary"><h2>By area</h2>{_areas_html(run)}</section>'
        f'<section id="problems"><h2>Failures, warnings and rules not observed ({n_problems})</h2>'
        f"{_problems_html(run)}</section>"
        f'<section id="all"><h2>Every result ({len(run.results)})</h2>{_results_html(run)}</section>'
        "</main><footer>Generated by mcpwire check "
        f"{_h(generator_version())}. <b>not observed</b>: the server never exercised the rule, so it is not counted "
        "as a pass. <b>warning</b>: a SHOULD or MAY rule is broken (a SHOULD is a failure with --strict), or a "
        "deviation that proves no violation (a heuristic, a case the specification leaves open). "
        "This page is self-contained: it loads nothing from the network.</footer></body></html>\n"
    )


def index_html(servers: Sequence[tuple[str, Run | str, str | None]]) -> str:
    """The index page of several servers: one row per server (verdict, counts per area), each
    linking to its own report page (``href``, relative); ``Run | str``: a run, or why the server
    could not be checked."""
    runs = [(name, outcome) for name, outcome, _ in servers if isinstance(outcome, Run)]
    areas, table = matrix(runs)
    head = "".join(f"<th>{_h(area)}</th>" for area in areas)
    rows = []
    for name, outcome, href in servers:
        title = f'<a href="{_h(quote(href))}">{_h(name)}</a>' if href else _h(name)
        if not isinstance(outcome, Run):
            cells = f'<td colspan="{len(areas) + 1}" class="reason-cell">not checked: {_h(outcome)}</td>'
            rows.append(f'<tr data-server="{_h(name)}" data-outcome="error"><th scope="row">{title}</th>{cells}</tr>')
            continue
        shown = verdict(outcome)
        cells = f"<td>{_badge('pass' if shown == 'pass' else 'fail')}</td>"
        for area in areas:
            cell = table[name].get(area)
            text = "" if cell is None else f"✓ {cell['pass']} ✗ {cell['fail']} ! {cell['warn']}"
            status = "" if cell is None else "fail" if cell["fail"] else "warning" if cell["warn"] else "pass"
            inner = f'<span class="cell o-{status}">{_h(text)}</span>' if cell is not None else ""
            cells += f'<td data-area="{_h(area)}">{inner}</td>'
        rows.append(f'<tr data-server="{_h(name)}" data-outcome="{shown}"><th scope="row">{title}</th>{cells}</tr>')
    failed = sum(1 for _, outcome, _ in servers if not isinstance(outcome, Run) or outcome.exit_code)
    summary = f"{len(servers)} servers, {failed} failing or not checked"
    return (
        '<!doctype html>\n<html lang="en" class="nojs"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{_h(CSP)}">'
        '<meta name="color-scheme" content="light dark"><meta name="referrer" content="no-referrer">'
        f"<title>{_h(summary)} · mcpwire check</title>"
        f'<link rel="icon" href="data:,"><style>{CSS}</style></head><body data-servers="{len(servers)}">'
        f'<header class="top v-{"fail" if failed else "pass"}"><div class="top-inner">'
        f"<h1><small>mcpwire check</small>{_h(summary)}</h1></div></header><main>"
        '<section id="servers"><h2>Servers by area (✓ pass ✗ fail ! warning or not observed)</h2>'
        '<div class="card"><table class="areas" id="matrix"><thead><tr><th>server</th><th>verdict</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section></main>"
        f"<footer>Generated by mcpwire check {_h(generator_version())}. Each server's name links to its own "
        "report. This page is self-contained: it loads nothing from the network.</footer></body></html>\n"
    )
