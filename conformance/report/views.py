"""What every report format shares: areas, outcome labels, the verdict, grouping and skip reasons.

Theory of operation: every report is a pure function of the :class:`~conformance.model.Run`; this
module holds the views of it the formats agree on. Results are grouped by *area* (framing,
lifecycle, tools, ..., HTTP, 2026-07-28): the first tag of a check found in :data:`AREA_PRIORITY`.
:func:`grouped` folds the results of one check across revisions into one entry per outcome (SV-31
failing in three revisions is one entry naming them), sorted by area and id; :func:`skip_reasons`
counts why checks were skipped and names the option that would run them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..model import STATUSES, Probe, Result, Run, SkipKind

__all__ = [
    "AREAS",
    "AREA_PRIORITY",
    "LABELS",
    "MARKS",
    "OUTCOMES",
    "Group",
    "SkipReason",
    "area_of",
    "area_order",
    "counts_of",
    "grouped",
    "id_key",
    "outcomes",
    "server_info",
    "skip_reasons",
    "spec_link",
    "generator_version",
    "matrix",
    "verdict",
    "verdict_detail",
]

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
#: Short marks of the outcomes on a terminal line.
MARKS: Final = {
    "pass": "ok",
    "fail": "FAIL",
    "warning": "warn",
    "skipped": "skip",
    "not_observed": "n/o",
    "expected_fail": "xfail",
    "error": "ERROR",
}


def generator_version() -> str:
    """The version of mcpwire that wrote the report."""
    try:
        from mcpwire import __version__
    except ImportError:  # pragma: no cover - conformance ships inside mcpwire
        return "unknown"
    return str(__version__)


def outcomes(seen: Iterable[str]) -> list[str]:
    """Every known outcome in display order, then any the runner added later."""
    known = list(OUTCOMES)
    return known + sorted(set(seen) - set(known))


def area_of(result: Result) -> str:
    """The report area of ``result``: the label of its highest-priority known tag."""
    tags = {t.lower() for t in result.tags}
    for tag in AREA_PRIORITY:
        if tag in tags:
            return AREAS[tag]
    return AREAS["other"]


def area_order(area: str) -> int:
    labels = list(AREAS.values())
    return labels.index(area) if area in labels else len(labels)


_ID = re.compile(r"^([A-Za-z]+)-?(\d*)(.*)$")


def id_key(check_id: str) -> tuple[str, int, str]:
    """Natural order of check ids: SV-9 before SV-10, SV-29 before SV-29b."""
    match = _ID.match(check_id)
    if match is None:  # pragma: no cover - the pattern matches any string
        return (check_id, 0, "")
    prefix, number, rest = match.groups()
    return (prefix.upper(), int(number) if number else -1, rest)


def counts_of(results: Iterable[Result]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts


def verdict(run: Run) -> str:
    return "pass" if run.exit_code == 0 else "fail"


def verdict_detail(run: Run) -> str:
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


def spec_link(result: Result) -> str | None:
    """A link to the spec section, when the result carries an http(s) URL (``Result.spec_url``,
    else ``spec`` itself when it is a URL). Any other scheme (``javascript:``, ``data:``) is never
    linked."""
    for candidate in (result.spec_url, result.spec):
        if isinstance(candidate, str) and re.match(r"^https?://[^\s\"'<>]+$", candidate.strip()):
            return candidate.strip()
    return None


def server_info(probe: Probe) -> dict[str, Any]:
    """``serverInfo`` from the probe's handshake (empty when the server gave none)."""
    return dict(probe.server_info) if isinstance(probe.server_info, Mapping) else {}


@dataclass(slots=True)
class Group:
    """The results of one check with one outcome, across revisions."""

    id: str
    status: str
    title: str
    level: str
    spec: str
    quote: str
    area: str
    #: (revision, reason) in the run's revision order
    revisions: list[tuple[str, str]] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)

    @property
    def reasons(self) -> list[tuple[list[str], str]]:
        """The distinct reasons, each with the revisions that gave it, in first-seen order."""
        by_reason: dict[str, list[str]] = {}
        for revision, reason in self.revisions:
            by_reason.setdefault(reason, []).append(revision)
        return [(revisions, reason) for reason, revisions in by_reason.items()]


def grouped(results: Sequence[Result], statuses: Iterable[str]) -> list[Group]:
    """The results with one of ``statuses``, one :class:`Group` per (check, outcome), sorted by
    area then id (the level and quote shown are those of the newest revision listed)."""
    wanted = set(statuses)
    groups: dict[tuple[str, str], Group] = {}
    for r in results:
        if r.status not in wanted:
            continue
        group = groups.get((r.id, r.status))
        if group is None:
            group = Group(r.id, r.status, r.title, r.level, r.spec, r.quote, area_of(r))
            groups[(r.id, r.status)] = group
        group.revisions.append((r.revision, r.message))
        group.results.append(r)
    return sorted(groups.values(), key=lambda g: (area_order(g.area), id_key(g.id), g.status))


@dataclass(frozen=True, slots=True)
class SkipReason:
    """Why some checks were skipped: ``count`` results, and the option that would run them."""

    reason: str
    count: int
    hint: str = ""


_TOOL_CALLS_OFF = "tool calls are off"
_TOOLS_REFUSED = "no listed tool may be called under the tool-call policy"
#: how a kind of skip is summed up
_SKIP_LABELS: Final[dict[SkipKind, str]] = {
    SkipKind.TOOLS_OFF: _TOOL_CALLS_OFF,
    SkipKind.TOOLS_REFUSED: _TOOLS_REFUSED,
    SkipKind.REVISION: "not defined in the revision",
    SkipKind.TRANSPORT: "not for this transport",
    SkipKind.CAPABILITY: "the server does not advertise what they test",
    SkipKind.NOT_ACCEPTED: "the revision is not accepted by the server",
    SkipKind.HANDSHAKE: "the revision's handshake broke a rule",
}
_HINTS: Final = {
    _TOOL_CALLS_OFF: "run with --call-tools read-only (tools annotated readOnlyHint), --call-tools all, or "
    "--call-tool NAME to run them",
    _TOOLS_REFUSED: "allow tools by name with --call-tool NAME, or --call-tools all",
}


def skip_reasons(results: Iterable[Result]) -> list[SkipReason]:
    """Why results were skipped, most frequent first, each with the option that unlocks them: by
    the kind the runner gave each skip (:attr:`~..model.Result.skipped_for`), else by its message."""
    counts: Counter[str] = Counter()
    details: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r.status != "skipped":
            continue
        if r.skipped_for is None:
            counts[r.message or "no reason given"] += 1
            continue
        label = _SKIP_LABELS[r.skipped_for]
        counts[label] += 1
        details[label].update(r.skip_detail)
    out = []
    for reason, count in counts.most_common():
        shown = f"{reason} ({', '.join(sorted(details[reason])[:6])})" if details.get(reason) else reason
        out.append(SkipReason(shown, count, _HINTS.get(reason, "")))
    return out


def matrix(runs: Sequence[tuple[str, Run]]) -> tuple[list[str], dict[str, dict[str, dict[str, int]]]]:
    """Servers x areas: the areas in display order (those with a result in any run), and for each
    server name, per area, its counts of pass, fail (errors included) and warn."""
    areas: set[str] = set()
    table: dict[str, dict[str, dict[str, int]]] = {}
    for name, run in runs:
        row: dict[str, dict[str, int]] = {}
        for r in run.results:
            area = area_of(r)
            areas.add(area)
            cell = row.setdefault(area, {"pass": 0, "fail": 0, "warn": 0})
            if r.status == "pass":
                cell["pass"] += 1
            elif r.status in ("fail", "error"):
                cell["fail"] += 1
            elif r.status in ("warning", "not_observed"):
                cell["warn"] += 1
        table[name] = row
    return sorted(areas, key=area_order), table
