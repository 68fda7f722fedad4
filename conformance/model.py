"""What a checker run produces: probes, results and the run, as the reports read them.

Theory of operation: plain data. A :class:`Probe` says what one revision's handshake found, a
:class:`Result` is one check in one revision with its evidence (already redacted, see
:mod:`.evidence`), and a :class:`Run` holds them all with the verdict rules: a run fails when a
check failed or errored, or when a baseline entry is stale. Nothing here runs anything.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Final

from .evidence import ExchangeEntry

__all__ = [
    "ALL_REVISIONS",
    "STATUSES",
    "Probe",
    "Result",
    "Run",
    "SkipKind",
    "Violation",
    "era_of",
    "spec_url",
]

ALL_REVISIONS: Final = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Result statuses; ``not_observed`` is never counted as a pass.
STATUSES: Final = ("pass", "fail", "warning", "skipped", "not_observed", "expected_fail", "error")


class SkipKind(enum.StrEnum):
    """Why a check was skipped, as the reports group skips (:attr:`Result.skipped_for`); set where
    the skip is decided, so a report never reads it back out of the message."""

    #: the tool-call policy allows no tool call at all
    TOOLS_OFF = "tools-off"
    #: the policy allows none of the tools the server lists
    TOOLS_REFUSED = "tools-refused"
    #: the check is not defined in the revision (another era, or outside its range)
    REVISION = "revision"
    #: the check is for another transport
    TRANSPORT = "transport"
    #: the server does not advertise what the check tests (:attr:`Result.skip_detail`: which)
    CAPABILITY = "capability"
    #: the server does not accept the revision
    NOT_ACCEPTED = "not-accepted"
    #: the revision's handshake broke a rule (that failure is its own result)
    HANDSHAKE = "handshake"


_SPEC_SITE: Final = "https://modelcontextprotocol.io/specification"
_SPEC_REF = re.compile(r"^(?:(\d{4}-\d{2}-\d{2})/)?([a-z0-9_/-]+)\.mdx(?:\s+§(.+))?$")


def era_of(revision: str) -> str:
    return "modern" if revision >= "2026-07-28" else "legacy"


def spec_url(spec: str, revision: str) -> str | None:
    """``basic/transports.mdx §Session Management`` -> its page and anchor for ``revision``."""
    match = _SPEC_REF.match(spec.strip())
    if match is None:
        return None
    pinned, path, section = match.groups()
    url = f"{_SPEC_SITE}/{pinned or revision}/{path}"
    if section:
        url += "#" + re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-")
    return url


@dataclass(frozen=True, slots=True)
class Violation:
    """A rule the handshake's answer broke, so that no check can open a session in that revision.

    ``check_id`` names the catalogue check whose rule it is; ``evidence`` is the probe's exchange.
    """

    check_id: str
    message: str
    evidence: tuple[ExchangeEntry, ...] = ()
    http: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class Probe:
    """What one revision probe found."""

    revision: str
    accepted: bool
    capabilities: dict[str, Any] = field(default_factory=dict)
    detail: str = ""
    #: ``serverInfo`` from ``initialize`` (legacy) or the discover result's ``_meta`` (2026-07-28)
    server_info: dict[str, Any] = field(default_factory=dict)
    #: legacy: the ``protocolVersion`` the server answered instead of this revision (a JSON value)
    counter_offer: Any = None
    #: the handshake broke a rule (the revision is reported with that failure, its checks skipped)
    violation: Violation | None = None
    #: the server answered the probe at all (any JSON-RPC answer or HTTP status)
    answered: bool = False


@dataclass(slots=True)
class Result:
    """The outcome of one check in one revision."""

    id: str
    title: str
    level: str
    spec: str
    quote: str
    revision: str
    status: str
    message: str = ""
    duration_s: float = 0.0
    #: the evidence, first and last entries (see :func:`.evidence.collect`), redacted
    exchanges: list[ExchangeEntry] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    #: HTTP targets: every HTTP exchange of a failed/warned check, as dicts with method, url,
    #: request_headers, request_body, status, response_headers, content_type, body, events
    #: (event, id, retry, data), complete, error, and rate_limited (the 429 answers waited out, when
    #: there were any); credentials redacted as "***"
    http_exchanges: list[dict[str, Any]] = field(default_factory=list)
    #: the transport the check ran over: "stdio", "http" or "sse"
    transport: str = "stdio"
    #: the spec page of ``spec`` for this revision on modelcontextprotocol.io, when it names one
    spec_url: str | None = None
    #: a skipped result: why, as a kind (None: only ``message`` says), and what it names (the
    #: capabilities the server does not advertise)
    skipped_for: SkipKind | None = None
    skip_detail: tuple[str, ...] = ()


@dataclass(slots=True)
class Run:
    """Every result of one checker run."""

    #: the server checked, redacted (its name, URL or command line)
    target: str
    probes: list[Probe]
    #: revisions whose checks ran: accepted ones, counter-offered ones (version negotiation checks
    #: only) and ones whose handshake broke a rule (that failure only)
    revisions: list[str]
    results: list[Result]
    stale_baseline: list[str] = field(default_factory=list)
    #: "stdio", "http" (Streamable HTTP) or "sse" (2024-11-05 HTTP+SSE)
    transport: str = "stdio"
    #: tool-call policy of the run: "none", "read-only" or "all"
    tool_calls: str = "none"
    #: stdio: server processes started, and sessions lent again to a later check (see ``pool``)
    processes_started: int = 0
    sessions_reused: int = 0

    def failed(self) -> list[Result]:
        return [r for r in self.results if r.status in ("fail", "error")]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts

    @property
    def accepted(self) -> list[str]:
        """The revisions the server accepted, in probe order."""
        return [p.revision for p in self.probes if p.accepted]

    @property
    def judged(self) -> bool:
        """Whether anything could be judged: a revision accepted, or a result other than skipped."""
        return bool(self.accepted) or any(r.status != "skipped" for r in self.results)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed() or self.stale_baseline else 0
