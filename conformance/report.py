"""Reports of a :class:`~conformance.runner.Run`: terminal, JSON, JUnit XML and HTML.

Theory of operation: every report is a pure function of the :class:`Run`; nothing here runs a
check or touches a file. Much of the text comes from the server under test (messages quote its
answers, the evidence is its output), so every report treats text as hostile: the terminal gets no
control characters (a server cannot move the cursor or recolour the screen), XML gets no
character that XML 1.0 forbids (they are written as visible ``\\xNN`` escapes instead), HTML is
escaped everywhere and the page's Content-Security-Policy runs only its own script. JSON stays
lossless: lone surrogates are written as ``\\uXXXX`` escapes so the document is valid UTF-8.

Results are grouped by *area* (framing, lifecycle, tools, ..., HTTP, 2026-07-28): the first tag
of a check found in :data:`AREA_PRIORITY`. The evidence a result carries (``Result.exchanges``, the
runner's text lines ``"  0.095 > {json}"``, ``"--- process 2"``, ``"stderr (tail): ..."``) is
parsed once by :func:`exchange_entries` for the JSON and the HTML reports.

HTTP targets also carry the structured exchanges (``Result.http_exchanges``: method, URL, status,
headers, bodies, SSE events): the JSON report keeps them whole, the HTML page shows each one's
request line, status and the headers that matter. Both redact again what could be a credential,
whatever the runner already masked: the values of ``Authorization``, cookies and any header named
like a token, key or secret, and URL query parameters named like them.

The JSON document (``--json``) is described by :data:`JSON_SCHEMA` (JSON Schema 2020-12); its
``schema_version`` changes only when a field is removed or changes meaning, never when one is
added.
"""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .report_assets import CSP, CSS, JS
from .runner import STATUSES, Probe, Result, Run

__all__ = [
    "AREAS",
    "JSON_SCHEMA",
    "SCHEMA_VERSION",
    "ExchangeEntry",
    "area_of",
    "exchange_entries",
    "progress_line",
    "to_dict",
    "to_html",
    "to_json",
    "to_junit",
    "to_terminal",
]

#: Version of the JSON document; bumped only when a field is removed or changes meaning.
SCHEMA_VERSION: Final = 1
FORMAT_NAME: Final = "mcpwire-check-report"

#: Areas in display order: tag -> label.
AREAS: Final[dict[str, str]] = {
    "framing": "framing",
    "lifecycle": "lifecycle",
    "capabilities": "capabilities",
    "tools": "tools",
    "resources": "resources",
    "prompts": "prompts",
    "completion": "completion",
    "logging": "logging",
    "pagination": "pagination",
    "progress": "progress",
    "cancellation": "cancellation",
    "stdio": "stdio",
    "http": "HTTP",
    "modern": "2026-07-28",
    "other": "other",
}
#: Which tag decides a result's area when it carries several: transport and era first.
AREA_PRIORITY: Final = (
    "http",
    "modern",
    "tools",
    "resources",
    "prompts",
    "completion",
    "logging",
    "pagination",
    "progress",
    "cancellation",
    "lifecycle",
    "framing",
    "capabilities",
    "stdio",
)

#: Display order of outcomes (most urgent first) and their human labels.
OUTCOMES: Final = ("fail", "error", "warning", "not_observed", "expected_fail", "pass", "skipped")
LABELS: Final = {
    "pass": "pass",
    "fail": "fail",
    "warning": "warning",
    "skipped": "skipped",
    "not_observed": "not observed",
    "expected_fail": "expected failure",
    "error": "error",
}
_MARK: Final = {
    "pass": "ok",
    "fail": "FAIL",
    "warning": "warn",
    "skipped": "skip",
    "not_observed": "n/o",
    "expected_fail": "xfail",
    "error": "ERROR",
}
_ANSI: Final = {
    "fail": "\x1b[1;31m",
    "error": "\x1b[1;35m",
    "warning": "\x1b[33m",
    "not_observed": "\x1b[36m",
    "expected_fail": "\x1b[2m",
    "pass": "\x1b[32m",
    "skipped": "\x1b[2m",
}
_RESET: Final = "\x1b[0m"
_BOLD: Final = "\x1b[1m"

#: Evidence shown per exchange entry in the HTML page before it is cut (the JSON keeps it all).
MAX_PAYLOAD_LINES: Final = 60
MAX_PAYLOAD_CHARS: Final = 6000
MAX_STRING_CHARS: Final = 400


def _outcomes(run_or_counts: Iterable[str]) -> list[str]:
    """Every known outcome in display order, then any the runner added later."""
    known = list(OUTCOMES)
    return known + sorted(set(run_or_counts) - set(known))


# -- hostile text -----------------------------------------------------------------------------

# XML 1.0 allows #x9 #xA #xD [#x20-#xD7FF] [#xE000-#xFFFD] [#x10000-#x10FFFF]; C1 controls and
# bidirectional overrides are allowed but would hide or reorder text, so they are shown too.
_UNSAFE_MARKUP = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
# the terminal also gets no tab or carriage return (they can overwrite what was printed)
_UNSAFE_TERMINAL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_markup(text: str) -> str:
    """``text`` with every character XML 1.0 forbids (and bidi overrides) as a visible escape."""
    return _UNSAFE_MARKUP.sub(_visible, text)


def clean_terminal(text: str) -> str:
    """``text`` safe to print: no escape sequence, carriage return or tab from the server."""
    return _UNSAFE_TERMINAL.sub(_visible, text)


def _h(text: object) -> str:
    """HTML text or attribute value."""
    return html.escape(clean_markup(str(text)), quote=True)


# -- shared model views -----------------------------------------------------------------------


def area_of(result: Result) -> str:
    """The report area of ``result``: the label of its highest-priority known tag."""
    tags = {t.lower() for t in result.tags}
    for tag in AREA_PRIORITY:
        if tag in tags:
            return AREAS[tag]
    return AREAS["other"]


def _area_order(area: str) -> int:
    labels = list(AREAS.values())
    return labels.index(area) if area in labels else len(labels)


def spec_url(result: Result) -> str | None:
    """A link to the spec section, when the result carries an http(s) URL.

    ``Result.spec_url`` (not in the model yet) wins; else ``spec`` itself when it is a URL. Any
    other scheme (``javascript:``, ``data:``) is never linked.
    """
    for candidate in (getattr(result, "spec_url", None), result.spec):
        if isinstance(candidate, str) and re.match(r"^https?://[^\s\"'<>]+$", candidate.strip()):
            return candidate.strip()
    return None


def _server_info(probe: Probe) -> dict[str, Any]:
    """``Probe.server_info`` (``serverInfo`` from the handshake) once the model records it."""
    info = getattr(probe, "server_info", None)
    return dict(info) if isinstance(info, Mapping) else {}


@dataclass(frozen=True, slots=True)
class ExchangeEntry:
    """One recorded line of evidence.

    ``direction``: ``sent`` (client to server), ``received``, ``event`` (the harness's own note,
    e.g. "stdin closed"), ``stderr`` (the tail of the server's stderr), ``omitted`` (lines the
    runner left out) or ``note`` (anything else, kept as it was recorded).
    """

    process: int | None
    at_s: float | None
    direction: str
    text: str


_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?) ([<>!]) ?(.*)$", re.DOTALL)
_PROCESS = re.compile(r"^--- process (\d+)\s*$")
_DIRECTIONS: Final = {">": "sent", "<": "received", "!": "event"}


def exchange_entries(lines: Iterable[str]) -> list[ExchangeEntry]:
    """The runner's evidence lines as structured entries (lossless: unknown lines become notes)."""
    entries: list[ExchangeEntry] = []
    process: int | None = None
    for line in lines:
        if m := _PROCESS.match(line):
            process = int(m.group(1))
        elif m := _LINE.match(line):
            entries.append(ExchangeEntry(process, float(m.group(1)), _DIRECTIONS[m.group(2)], m.group(3)))
        elif line.startswith("stderr (tail): "):
            entries.append(ExchangeEntry(process, None, "stderr", line[len("stderr (tail): ") :]))
        elif line.strip() == "...":
            entries.append(ExchangeEntry(process, None, "omitted", "lines left out of the evidence"))
        else:
            entries.append(ExchangeEntry(process, None, "note", line))
    return entries


def _verdict(run: Run) -> str:
    return "pass" if run.exit_code == 0 else "fail"


def _verdict_detail(run: Run) -> str:
    counts = run.counts()
    parts = []
    for status, one, many in (
        ("fail", "failure", "failures"),
        ("error", "error", "errors"),
        ("warning", "warning", "warnings"),
        ("not_observed", "rule not observed", "rules not observed"),
        ("expected_fail", "expected failure", "expected failures"),
    ):
        n = counts.get(status, 0)
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    if run.stale_baseline:
        n = len(run.stale_baseline)
        parts.append(f"{n} stale baseline {'entry' if n == 1 else 'entries'}")
    return ", ".join(parts)


# -- terminal ---------------------------------------------------------------------------------


def _paint(text: str, status: str, color: bool) -> str:
    return f"{_ANSI[status]}{text}{_RESET}" if color and status in _ANSI else text


def progress_line(result: Result, *, color: bool = False) -> str:
    """One short line per finished check, for the progress stream (ANSI colour only if asked)."""
    mark = _paint(f"{_MARK.get(result.status, result.status):5}", result.status, color)
    return f"[{clean_terminal(result.revision)}] {mark} {clean_terminal(result.id)}"


def _indented(label: str, text: str) -> list[str]:
    lines = clean_terminal(text).split("\n") if text else []
    if not lines:
        return []
    pad = " " * (6 + len(label))
    return [f"      {label}{lines[0]}", *(pad + line for line in lines[1:])]


def to_terminal(run: Run, *, color: bool = False) -> str:
    """The human summary: failures, then warnings, then rules not observed, then totals.

    Each listed result is one line ``MARK ID LEVEL REVISION TITLE [SPEC]`` followed by the reason
    and the spec quote, indented. Plain text unless ``color`` (the caller decides, e.g. for a TTY).
    """
    c = clean_terminal
    lines = [f"mcpwire check: {c(run.target)}"]
    accepted = [p.revision for p in run.probes if p.accepted]
    refused = [p.revision for p in run.probes if not p.accepted]
    lines.append(f"revisions checked: {c(', '.join(run.revisions)) or 'none'}")
    if accepted != run.revisions:
        lines.append(f"revisions accepted: {c(', '.join(accepted)) or 'none'}")
    if refused:
        lines.append(f"not accepted: {c(', '.join(refused))}")
    width = max((len(r.id) for r in run.results), default=5)
    sections = (
        ("failures", ("fail", "error"), "these fail the run (error: the check itself could not run)"),
        (
            "warnings",
            ("warning",),
            "SHOULD/MAY rules broken (with --strict the SHOULD ones are failures), or deviations that prove no "
            "violation",
        ),
        ("not observed", ("not_observed",), "the server never exercised these rules; not counted as passes"),
        ("expected failures", ("expected_fail",), "listed in the baseline"),
    )
    for name, statuses, meaning in sections:
        listed = [r for r in run.results if r.status in statuses]
        if not listed:
            continue
        header = f"{name} ({len(listed)}): {meaning}"
        lines += ["", _BOLD + header + _RESET if color else header]
        for r in listed:
            mark = _paint(f"{_MARK.get(r.status, r.status):5}", r.status, color)
            lines.append(f"{mark} {c(r.id):{width}} {c(r.level):6} {c(r.revision)}  {c(r.title)}  [{c(r.spec)}]")
            lines += _indented("", r.message)
            if r.quote:
                lines += _indented("spec: ", f'"{r.quote}"')
    if run.stale_baseline:
        lines += ["", f"stale baseline entries ({len(run.stale_baseline)}): these checks no longer fail"]
        lines += [f"STALE {c(entry)}: remove it from the baseline" for entry in run.stale_baseline]
    counts = run.counts()
    skipped = counts.get("skipped", 0)
    if skipped:
        why = "not applicable to the revision, transport or capabilities; --json says why"
        lines += ["", f"skipped: {skipped} ({why})"]
    total = ", ".join(f"{counts.get(s, 0)} {LABELS.get(s, s)}" for s in _outcomes(counts))
    lines += ["", f"totals: {total} ({len(run.results)} results)"]
    detail = _verdict_detail(run)
    verdict = "PASS" if run.exit_code == 0 else "FAIL"
    if color:
        verdict = _paint(verdict, "pass" if run.exit_code == 0 else "fail", True)
    lines.append(f"result: {verdict}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


# -- JSON -------------------------------------------------------------------------------------


def _version() -> str:
    try:
        from mcpwire import __version__
    except ImportError:  # pragma: no cover - conformance ships inside mcpwire
        return "unknown"
    return str(__version__)


def _counts(results: Iterable[Result]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts


#: header names whose values are never shown (lower case); see also :data:`_SECRET_NAME`
SECRET_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token"}
)
_SECRET_NAME = re.compile(r"token|secret|passw|api[-_]?key|credential|signature|^key$|^sig$|^code$", re.I)
REDACTED: Final = "***"
#: response headers the HTML page shows (any ``mcp-*`` header too)
_RESPONSE_HEADERS_SHOWN: Final = frozenset(
    {"content-type", "www-authenticate", "x-accel-buffering", "allow", "location", "cache-control", "retry-after"}
)


def _redact_url(url: str) -> str:
    """``url`` with the values of query parameters named like credentials replaced."""
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:  # user:password@host
        netloc = REDACTED + "@" + netloc.rsplit("@", 1)[1]
    if not parts.query and netloc == parts.netloc:
        return url
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = "&".join(
        f"{urllib.parse.quote(k, safe='')}={REDACTED if _SECRET_NAME.search(k) else urllib.parse.quote(v, safe='')}"
        for k, v in pairs
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_headers(headers: Any) -> dict[str, str]:
    if not isinstance(headers, Mapping):
        return {}
    return {
        str(k): REDACTED if str(k).lower() in SECRET_HEADERS or _SECRET_NAME.search(str(k)) else str(v)
        for k, v in headers.items()
    }


def http_exchange_view(exchange: Mapping[str, Any]) -> dict[str, Any]:
    """One recorded HTTP exchange for a report: every field kept, credentials redacted."""
    view = dict(exchange)
    view["url"] = _redact_url(str(exchange.get("url", "")))
    view["request_headers"] = _redact_headers(exchange.get("request_headers"))
    view["response_headers"] = _redact_headers(exchange.get("response_headers"))
    return view


def _result_dict(r: Result) -> dict[str, Any]:
    return {
        "id": r.id,
        "title": r.title,
        "level": r.level,
        "revision": r.revision,
        "area": area_of(r),
        "tags": list(r.tags),
        "outcome": r.status,
        "reason": r.message,
        "spec": {"ref": r.spec, "quote": r.quote, "url": spec_url(r)},
        "duration_s": round(r.duration_s, 6),
        "exchange": [
            {"process": e.process, "at_s": e.at_s, "direction": e.direction, "text": e.text}
            for e in exchange_entries(r.exchanges)
        ],
        "http": [http_exchange_view(e) for e in r.http_exchanges],
    }


def _probe_dict(p: Probe) -> dict[str, Any]:
    out: dict[str, Any] = {
        "revision": p.revision,
        "accepted": p.accepted,
        "capabilities": p.capabilities,
        "detail": p.detail,
    }
    info = _server_info(p)
    if info:
        out["server_info"] = info
    return out


def to_dict(run: Run) -> dict[str, Any]:
    """The JSON document as Python values (see :data:`JSON_SCHEMA`)."""
    by_area: dict[str, list[Result]] = defaultdict(list)
    for r in run.results:
        by_area[area_of(r)].append(r)
    return {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "mcpwire check", "version": _version()},
        "target": run.target,
        "verdict": _verdict(run),
        "exit_code": run.exit_code,
        "revisions": list(run.revisions),
        "probes": [_probe_dict(p) for p in run.probes],
        "total": len(run.results),
        "counts": run.counts(),
        "areas": [
            {"area": area, "counts": _counts(results)}
            for area, results in sorted(by_area.items(), key=lambda kv: _area_order(kv[0]))
        ],
        "stale_baseline": list(run.stale_baseline),
        "results": [_result_dict(r) for r in run.results],
    }


def to_json(run: Run) -> str:
    """The ``--json`` document: indented, UTF-8 text, valid even for lone surrogates."""
    text = json.dumps(to_dict(run), indent=2, ensure_ascii=False, default=str)
    # a lone surrogate can only sit inside a JSON string, where its escape means the same
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_OUTCOME_ENUM: Final = list(STATUSES)
_COUNTS_SCHEMA: Final = {
    "type": "object",
    "description": "Number of results per outcome; every outcome is present, zero included.",
    "required": _OUTCOME_ENUM,
    "additionalProperties": {"type": "integer", "minimum": 0},
}
#: JSON Schema (2020-12) of the ``--json`` document.
JSON_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "mcpwire check report",
    "type": "object",
    "required": [
        "format",
        "schema_version",
        "generator",
        "target",
        "verdict",
        "exit_code",
        "revisions",
        "probes",
        "total",
        "counts",
        "areas",
        "stale_baseline",
        "results",
    ],
    "properties": {
        "format": {"const": FORMAT_NAME, "description": "Identifies the document."},
        "schema_version": {
            "const": SCHEMA_VERSION,
            "description": "Bumped only when a field is removed or changes meaning; new fields may appear.",
        },
        "generator": {
            "type": "object",
            "required": ["name", "version"],
            "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
        },
        "target": {"type": "string", "description": "The server checked: its name or command line."},
        "verdict": {
            "enum": ["pass", "fail"],
            "description": "fail when a MUST check failed or errored, or a baseline entry is stale.",
        },
        "exit_code": {"enum": [0, 1], "description": "The exit status of mcpwire check for this run."},
        "revisions": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Protocol revisions checked, newest first.",
        },
        "probes": {
            "type": "array",
            "description": "What the server answered when asked, per revision, whether it accepts it.",
            "items": {
                "type": "object",
                "required": ["revision", "accepted", "capabilities", "detail"],
                "properties": {
                    "revision": {"type": "string"},
                    "accepted": {"type": "boolean"},
                    "capabilities": {"type": "object", "description": "As advertised in that revision."},
                    "detail": {"type": "string", "description": "Why the revision was not accepted."},
                    "server_info": {"type": "object", "description": "serverInfo, when recorded."},
                },
            },
        },
        "total": {"type": "integer", "minimum": 0, "description": "Number of results."},
        "counts": _COUNTS_SCHEMA,
        "areas": {
            "type": "array",
            "description": "Counts per area (framing, lifecycle, tools, ..., HTTP, 2026-07-28), in display order.",
            "items": {
                "type": "object",
                "required": ["area", "counts"],
                "properties": {"area": {"type": "string"}, "counts": _COUNTS_SCHEMA},
            },
        },
        "stale_baseline": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Baseline entries whose check no longer fails (they fail the run).",
        },
        "results": {
            "type": "array",
            "description": "One per check and revision, revisions in 'revisions' order, checks in catalogue order.",
            "items": {
                "type": "object",
                "required": [
                    "id",
                    "title",
                    "level",
                    "revision",
                    "area",
                    "tags",
                    "outcome",
                    "reason",
                    "spec",
                    "duration_s",
                    "exchange",
                ],
                "properties": {
                    "id": {"type": "string", "description": "The rule's id, e.g. SV-12."},
                    "title": {"type": "string"},
                    "level": {"enum": ["MUST", "SHOULD", "MAY"]},
                    "revision": {"type": "string"},
                    "area": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "outcome": {
                        "enum": _OUTCOME_ENUM,
                        "description": "warning: a SHOULD/MAY rule broken, or a deviation that proves no violation "
                        "(a heuristic, a case the spec leaves open); not_observed: the server never "
                        "exercised the rule (never a pass); expected_fail: broken but listed in the baseline; "
                        "error: the check could not run.",
                    },
                    "reason": {"type": "string", "description": "What was wrong, or why skipped/not observed."},
                    "spec": {
                        "type": "object",
                        "required": ["ref", "quote", "url"],
                        "properties": {
                            "ref": {"type": "string", "description": "Spec page and section."},
                            "quote": {"type": "string", "description": "The rule's text."},
                            "url": {"type": ["string", "null"], "description": "Link to the section, if known."},
                        },
                    },
                    "duration_s": {"type": "number", "minimum": 0},
                    "exchange": {
                        "type": "array",
                        "description": "The evidence: what was sent and what came back, in order "
                        "(recorded for failures, warnings, errors and rules not observed).",
                        "items": {
                            "type": "object",
                            "required": ["process", "at_s", "direction", "text"],
                            "properties": {
                                "process": {
                                    "type": ["integer", "null"],
                                    "description": "Which server process (a check may start several).",
                                },
                                "at_s": {"type": ["number", "null"], "description": "Seconds since it started."},
                                "direction": {"enum": ["sent", "received", "event", "stderr", "omitted", "note"]},
                                "text": {"type": "string", "description": "The line as recorded."},
                            },
                        },
                    },
                    "http": {
                        "type": "array",
                        "description": "HTTP targets: every HTTP exchange of the check, in order (recorded like "
                        "'exchange'); credentials are redacted as '***'.",
                        "items": {
                            "type": "object",
                            "required": ["method", "url", "status", "request_headers", "response_headers"],
                            "properties": {
                                "method": {"type": "string"},
                                "url": {"type": "string"},
                                "status": {"type": ["integer", "null"], "description": "null: no HTTP answer."},
                                "request_headers": {"type": "object", "additionalProperties": {"type": "string"}},
                                "request_body": {"type": "string"},
                                "response_headers": {
                                    "type": "object",
                                    "description": "Lower-case names; repeated headers joined with ', '.",
                                    "additionalProperties": {"type": "string"},
                                },
                                "content_type": {"type": "string"},
                                "body": {"type": "string", "description": "Empty for an SSE stream (see events)."},
                                "events": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "event": {"type": "string"},
                                            "id": {"type": ["string", "null"]},
                                            "retry": {"type": ["integer", "null"]},
                                            "data": {"type": "string"},
                                        },
                                    },
                                },
                                "complete": {"type": "boolean", "description": "The body was read to its end."},
                                "error": {"type": ["string", "null"]},
                            },
                        },
                    },
                },
            },
        },
    },
}


# -- JUnit XML --------------------------------------------------------------------------------


def _x(text: object) -> str:
    return clean_markup(str(text))


def _evidence_text(r: Result) -> str:
    parts = [r.message, f"spec: {r.spec}" + (f': "{r.quote}"' if r.quote else "")]
    if r.exchanges:
        parts += ["", "exchange:", *r.exchanges]
    return "\n".join(parts)


def _properties(parent: ET.Element, values: Mapping[str, str]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=_x(value))


def to_junit(run: Run) -> str:
    """JUnit XML: a testsuite per revision and area, a testcase per check.

    ``fail`` is a ``<failure>``, ``error`` an ``<error>``; ``skipped``, ``not_observed`` and
    ``expected_fail`` are ``<skipped>`` (with the reason); a warning passes with its evidence in
    ``<system-out>`` and ``outcome=warning`` in the testcase properties. A stale baseline entry is a
    failed testcase of its own, so CI shows why the run failed.
    """
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in run.results:
        groups[(r.revision, area_of(r))].append(r)
    rev_order = {rev: i for i, rev in enumerate(run.revisions)}
    totals: Counter[str] = Counter()
    root = ET.Element("testsuites", name=_x(f"mcpwire check: {run.target}"))
    for (revision, area), results in sorted(
        groups.items(), key=lambda kv: (rev_order.get(kv[0][0], len(rev_order)), _area_order(kv[0][1]))
    ):
        counts = Counter(r.status for r in results)
        n_skipped = counts["skipped"] + counts["not_observed"] + counts["expected_fail"]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_x(f"{revision} {area}"),
            tests=str(len(results)),
            failures=str(counts["fail"]),
            errors=str(counts["error"]),
            skipped=str(n_skipped),
            time=f"{sum(r.duration_s for r in results):.3f}",
        )
        totals.update(tests=len(results), failures=counts["fail"], errors=counts["error"], skipped=n_skipped)
        _properties(suite, {"revision": revision, "area": area, "target": run.target})
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_x(f"mcp.{revision}.{area}"),
                name=_x(f"{r.id} {r.title}"),
                time=f"{r.duration_s:.3f}",
            )
            _properties(case, {"id": r.id, "level": r.level, "outcome": r.status, "spec": r.spec})
            message = _x(r.message)
            if r.status == "fail":
                ET.SubElement(case, "failure", message=message, type=_x(r.level)).text = _x(_evidence_text(r))
            elif r.status == "error":
                ET.SubElement(case, "error", message=message, type="check error").text = _x(_evidence_text(r))
            elif r.status in ("skipped", "not_observed", "expected_fail"):
                label = LABELS[r.status]
                ET.SubElement(case, "skipped", message=_x(f"{label}: {r.message}"), type=r.status)
                if r.status != "skipped":
                    ET.SubElement(case, "system-out").text = _x(_evidence_text(r))
            elif r.status == "warning":
                what = f"{r.level} rule broken" if r.level != "MUST" else "a deviation that proves no violation"
                ET.SubElement(case, "system-out").text = _x(f"warning ({what}): {_evidence_text(r)}")
    if run.stale_baseline:
        suite = ET.SubElement(
            root,
            "testsuite",
            name="baseline",
            tests=str(len(run.stale_baseline)),
            failures=str(len(run.stale_baseline)),
            errors="0",
            skipped="0",
            time="0.000",
        )
        totals.update(tests=len(run.stale_baseline), failures=len(run.stale_baseline))
        for entry in run.stale_baseline:
            case = ET.SubElement(suite, "testcase", classname="mcp.baseline", name=_x(f"stale entry {entry}"))
            ET.SubElement(
                case, "failure", message=_x(f"{entry}: the check no longer fails; remove it from the baseline")
            )
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(totals[key]))
    root.set("time", f"{sum(r.duration_s for r in run.results):.3f}")
    ET.indent(root)
    return "<?xml version='1.0' encoding='utf-8'?>\n" + ET.tostring(root, encoding="unicode")


# -- HTML -------------------------------------------------------------------------------------

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
    """``value`` with every string longer than MAX_STRING_CHARS cut; counts the cuts in ``cut``."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        cut[0] += 1
        return value[:MAX_STRING_CHARS] + f"… ({len(value) - MAX_STRING_CHARS} more characters)"
    if isinstance(value, list):
        return [_shorten_strings(v, cut) for v in value]
    if isinstance(value, dict):
        return {k: _shorten_strings(v, cut) for k, v in value.items()}
    return value


def _payload_html(text: str) -> str:
    """Pretty-printed, highlighted JSON when ``text`` is JSON, else the text; long payloads cut."""
    notes: list[str] = []
    body: str
    try:
        value = json.loads(text)
    except ValueError:
        value = None
        parsed = False
    else:
        parsed = isinstance(value, dict | list)
    if parsed:
        cut = [0]
        pretty = json.dumps(_shorten_strings(value, cut), indent=2, ensure_ascii=False)
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
    entries = exchange_entries(r.exchanges)
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
    for raw in r.http_exchanges:
        e = http_exchange_view(raw)
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


def _attrs(r: Result) -> str:
    return (
        f'data-id="{_h(r.id)}" data-outcome="{_h(r.status)}" '
        f'data-revision="{_h(r.revision)}" data-area="{_h(area_of(r))}"'
    )


def _badge(status: str) -> str:
    return f'<span class="badge o-{_h(status)}">{_h(LABELS.get(status, status))}</span>'


def _bar(counts: Mapping[str, int], *, big: bool = False) -> str:
    total = sum(counts.values())
    label = ", ".join(f"{n} {LABELS.get(s, s)}" for s in _outcomes(counts) if (n := counts.get(s, 0)))
    segs = "".join(
        f'<span class="seg o-{_h(s)}" style="width:{100 * n / total:.3f}%"></span>'
        for s in _outcomes(counts)
        if (n := counts.get(s, 0)) and total
    )
    return f'<div class="bar{" big" if big else ""}" role="img" aria-label="{_h(label or "no results")}">{segs}</div>'


def _problem_html(r: Result, *, open_: bool) -> str:
    url = spec_url(r)
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
    verdict = _verdict(run)
    detail = _verdict_detail(run) or "no warnings"
    counts = run.counts()
    if verdict == "pass":
        summary = "every MUST rule checked passes"
    elif counts.get("fail") or counts.get("error"):
        summary = "rules the server must follow are broken"
    else:
        summary = "the baseline lists failures that no longer happen"
    infos = [info for p in run.probes if (info := _server_info(p))]
    meta: list[str] = []
    if infos:
        info = infos[0]
        name = " ".join(str(info[k]) for k in ("title", "name", "version") if info.get(k) not in (None, ""))
        meta.append(f"<dt>server</dt><dd>{_h(name or json.dumps(info, ensure_ascii=False))}</dd>")
    chips = "".join(
        f'<span class="chip" title="{_h(", ".join(sorted(p.capabilities)) or "no capabilities")}">'
        f"{_h(p.revision)}</span>"
        for p in run.probes
        if p.revision in run.revisions and p.accepted
    )
    meta.append(f"<dt>revisions checked</dt><dd>{chips or 'none'}</dd>")
    refused = "".join(
        f'<span class="chip off" title="{_h(p.detail)}">{_h(p.revision)}</span>' for p in run.probes if not p.accepted
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
        for s in _outcomes(counts)
    )
    return (
        f'<header class="top v-{verdict}"><div class="top-inner">'
        f'<div class="verdict"><span class="big" id="verdict">{verdict.upper()}</span>'
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
    for area, results in sorted(by_area.items(), key=lambda kv: _area_order(kv[0])):
        counts = _counts(results)
        nums = "".join(
            f'<span class="o-{_h(s)}" data-outcome="{_h(s)}" data-count="{n}">{n} {_h(LABELS.get(s, s))}</span>'
            for s in _outcomes(counts)
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


def to_html(run: Run) -> str:
    """A single self-contained page: verdict, summary by area, each problem with its exchange.

    Everything is inline (no external CSS, JS, font or image) and the Content-Security-Policy
    forbids loading anything. Without JavaScript every result is shown; with it, the filters
    (``#show=failures&rev=REVISION``) hide the others.
    """
    verdict = _verdict(run).upper()
    n_problems = sum(r.status in _PROBLEMS for r in run.results) + len(run.stale_baseline)
    return (
        '<!doctype html>\n<html lang="en" class="nojs"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{_h(CSP)}">'
        '<meta name="color-scheme" content="light dark"><meta name="referrer" content="no-referrer">'
        f"<title>{verdict} · {_h(run.target)} · mcpwire check</title>"
        '<link rel="icon" href="data:,">'
        f"<style>{CSS}</style><script>{JS}</script></head>"
        f'<body data-verdict="{_verdict(run)}" data-revisions="{_h(" ".join(run.revisions))}">'
        f"{_header_html(run)}{_filters_html(run)}<main>"
        f'<section id="summary"><h2>By area</h2>{_areas_html(run)}</section>'
        f'<section id="problems"><h2>Failures, warnings and rules not observed ({n_problems})</h2>'
        f"{_problems_html(run)}</section>"
        f'<section id="all"><h2>Every result ({len(run.results)})</h2>{_results_html(run)}</section>'
        "</main><footer>Generated by mcpwire check "
        f"{_h(_version())}. <b>not observed</b>: the server never exercised the rule, so it is not counted "
        "as a pass. <b>warning</b>: a SHOULD or MAY rule is broken (a SHOULD is a failure with --strict), or a "
        "deviation that proves no violation (a heuristic, a case the specification leaves open). "
        "This page is self-contained: it loads nothing from the network.</footer></body></html>\n"
    )
