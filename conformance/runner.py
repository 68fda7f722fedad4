"""Select applicable checks per revision, run each with a deadline, collect results.

Theory of operation: for a URL whose transport is not given, :func:`detect_transport` follows the
2026-07-28 backward-compatibility ladder (a POST that gets a JSON-RPC answer means Streamable
HTTP; otherwise a GET whose first event is ``endpoint`` means the 2024-11-05 HTTP+SSE transport).
:func:`probe` asks the server, on a fresh process (stdio) or a fresh HTTP client per revision,
whether it accepts that revision (legacy: ``initialize`` answered with the same version; modern:
``server/discover`` listing it) and what it advertises; a legacy ``initialize`` answered with another
version records that counter-offer. :func:`run` then runs every selected check for each revision
under test, at most ``jobs`` at a time, each in its own :class:`Context` and under a hard deadline.
The revisions under test are the accepted ones plus every legacy revision the server counter-offered
another version for: there only the version negotiation checks run (``on_counter_offer``), the
others are skipped. A check's ``fail`` is judged at the level the rule has in the revision:
MUST fails the run, SHOULD is a warning (a failure with ``strict``), MAY a warning; ``warn`` (a
heuristic or a deviation the spec leaves open) is a warning even with ``strict``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from . import checks as _checks  # noqa: F401  (registers the catalogue)
from .context import (
    CLIENT_INFO,
    META_CAPS,
    META_INFO,
    META_VERSION,
    CheckEnded,
    Context,
    Target,
    ToolPolicy,
)
from .harness import NoAnswer, WireBase, open_wire
from .registry import CATALOGUE, Check, Level

__all__ = [
    "ALL_REVISIONS",
    "STATUSES",
    "Probe",
    "Result",
    "Run",
    "detect_transport",
    "probe",
    "run",
    "select",
]

_log = logging.getLogger("mcpwire.check.runner")

ALL_REVISIONS: Final = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Result statuses; ``not_observed`` is never counted as a pass.
STATUSES: Final = ("pass", "fail", "warning", "skipped", "not_observed", "expected_fail", "error")
MAX_EVIDENCE_LINES: Final = 80
#: characters kept of one recorded message: enough for the usual answers to stay whole JSON (the
#: reports shorten what they show); bounded, so a 64 MiB answer costs a result no more than this
MAX_EVIDENCE_LINE_CHARS: Final = 8 * 1024


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
    exchanges: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    #: HTTP targets: every HTTP exchange of a failed/warned check, as dicts with method, url,
    #: request_headers, request_body, status, response_headers, content_type, body, events
    #: (event, id, retry, data), complete, error; secret headers are "***"
    http_exchanges: list[dict[str, Any]] = field(default_factory=list)
    #: the transport the check ran over: "stdio", "http" or "sse"
    transport: str = "stdio"
    #: the spec page of ``spec`` for this revision on modelcontextprotocol.io, when it names one
    spec_url: str | None = None


@dataclass(slots=True)
class Run:
    """Every result of one checker run."""

    target: str
    probes: list[Probe]
    revisions: list[str]
    results: list[Result]
    stale_baseline: list[str] = field(default_factory=list)
    #: "stdio", "http" (Streamable HTTP) or "sse" (2024-11-05 HTTP+SSE)
    transport: str = "stdio"
    #: tool-call policy of the run: "none", "read-only" or "all"
    tool_calls: str = "none"

    def failed(self) -> list[Result]:
        return [r for r in self.results if r.status in ("fail", "error")]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for r in self.results:
            counts[r.status] += 1
        return counts

    @property
    def exit_code(self) -> int:
        return 1 if self.failed() or self.stale_baseline else 0


_SPEC_SITE: Final = "https://modelcontextprotocol.io/specification"
_SPEC_REF = re.compile(r"^(?:(\d{4}-\d{2}-\d{2})/)?([a-z0-9_/-]+)\.mdx(?:\s+§(.+))?$")


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


def era_of(revision: str) -> str:
    return "modern" if revision >= "2026-07-28" else "legacy"


@asynccontextmanager
async def _connect(target: Target, revision: str) -> AsyncIterator[WireBase]:
    if target.is_http:
        from .http_harness import open_http_wire

        assert target.url is not None
        async with open_http_wire(target.url, revision, transport=target.transport, headers=target.headers) as wire:
            yield wire
    else:
        async with open_wire(target.argv, env=target.env, eof_grace=target.eof_grace, cwd=target.cwd) as stdio_wire:
            yield stdio_wire


async def _probe_one(target: Target, revision: str, timeout: float) -> Probe:
    if target.transport == "sse" and era_of(revision) == "modern":
        # 2026-07-28 defines stdio and Streamable HTTP only
        return Probe(revision, False, detail="the 2024-11-05 HTTP+SSE transport does not carry 2026-07-28")
    try:
        async with _connect(target, revision) as wire:
            if era_of(revision) == "legacy":
                params = {"protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}
                answer = await wire.request("initialize", params, timeout=timeout)
                result = answer.get("result")
                if isinstance(result, dict) and result.get("protocolVersion") == revision:
                    info = result.get("serverInfo")
                    return Probe(
                        revision,
                        True,
                        dict(result.get("capabilities") or {}),
                        server_info=dict(info) if isinstance(info, dict) else {},
                    )
                offer = result.get("protocolVersion") if isinstance(result, dict) else None
                detail = f"initialize answered {answer!r:.160}"
                if offer is not None:
                    detail = f"initialize {revision} was answered with protocolVersion {offer!r:.60}"
                return Probe(revision, False, detail=detail, counter_offer=offer)
            meta = {META_VERSION: revision, META_CAPS: {}, META_INFO: CLIENT_INFO}
            answer = await wire.request("server/discover", {"_meta": meta}, timeout=timeout)
            result = answer.get("result")
            if isinstance(result, dict) and revision in (result.get("supportedVersions") or []):
                info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo")
                return Probe(
                    revision,
                    True,
                    dict(result.get("capabilities") or {}),
                    server_info=dict(info) if isinstance(info, dict) else {},
                )
            return Probe(revision, False, detail=f"server/discover answered {answer!r:.160}")
    except NoAnswer as exc:
        return Probe(revision, False, detail=str(exc))


async def probe(target: Target, revisions: Sequence[str], *, timeout: float = 5.0) -> list[Probe]:
    """Which of ``revisions`` the server accepts, each on a fresh process or HTTP client.

    Raises:
        OSError: the command cannot be started, or the URL cannot be reached.
    """
    probes: dict[str, Probe] = {}

    async def one(revision: str) -> None:
        probes[revision] = await _probe_one(target, revision, timeout)

    # the first probe alone: a command that cannot start fails once, not five times
    await one(revisions[0])
    async with trio.open_nursery() as nursery:
        for revision in revisions[1:]:
            nursery.start_soon(one, revision)
    return [probes[r] for r in revisions]


async def detect_transport(target: Target, *, timeout: float = 5.0) -> Target:
    """``target`` with ``transport`` resolved when it is ``"auto"`` (2026-07-28 streamable-http
    §Backward Compatibility: POST first; on 400/404/405 without a modern JSON-RPC error body, GET
    and expect an ``endpoint`` event).

    Raises:
        OSError: nothing answers at the URL.
    """
    if not target.is_http or target.transport != "auto":
        return target
    from .http_harness import TargetUnreachable, open_http_wire

    assert target.url is not None
    meta = {META_VERSION: ALL_REVISIONS[0], META_CAPS: {}, META_INFO: CLIENT_INFO}
    attempts = (
        (ALL_REVISIONS[0], {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        (
            "2025-11-25",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO},
            },
        ),
    )
    for revision, message in attempts:
        async with open_http_wire(target.url, revision, headers=target.headers) as wire:
            reply = await wire.post(message, timeout=timeout, stop=lambda r: bool(r.messages))
            if any(isinstance(m, dict) and ("result" in m or "error" in m) for m in reply.messages):
                return dataclasses.replace(target, transport="http")
            if reply.status is not None and reply.status in (401, 403):
                return dataclasses.replace(target, transport="http")
    try:
        async with open_http_wire(target.url, "2024-11-05", transport="sse", headers=target.headers):
            return dataclasses.replace(target, transport="sse")
    except TargetUnreachable:
        return dataclasses.replace(target, transport="http")


def select(only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[Check]:
    """The catalogue filtered by id or tag (case-insensitive)."""

    def matches(c: Check, keys: Sequence[str]) -> bool:
        wanted = {k.lower() for k in keys}
        return c.id.lower() in wanted or bool({t.lower() for t in c.tags} & wanted)

    checks = list(CATALOGUE.values())
    if only:
        checks = [c for c in checks if matches(c, only)]
    if skip:
        checks = [c for c in checks if not matches(c, skip)]
    return checks


def _evidence(ctx: Context) -> list[str]:
    lines: list[str] = []
    for n, wire in enumerate(ctx.wires, 1):
        # "process" for every wire (the report parses it); Result.transport says which kind
        lines.append(f"--- process {n}")
        lines.extend(f"{e.at:7.3f} {e.direction} {e.text[:MAX_EVIDENCE_LINE_CHARS]}" for e in wire.exchanges)
        stderr = getattr(wire, "stderr", None)
        if stderr:
            tail = bytes(stderr[-400:]).decode("utf-8", "replace").strip()
            lines.append(f"stderr (tail): {tail}")
    return lines if len(lines) <= MAX_EVIDENCE_LINES else [*lines[:20], "...", *lines[-(MAX_EVIDENCE_LINES - 21) :]]


def _http_evidence(ctx: Context) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for wire in ctx.wires:
        for reply in getattr(wire, "replies", ()):
            out.append(reply.to_dict())
    return out[:MAX_EVIDENCE_LINES]


async def _run_one(
    check: Check,
    probe_: Probe,
    target: Target,
    supported: tuple[str, ...],
    *,
    strict: bool,
    timeout: float,
    check_timeout: float,
    tools: ToolPolicy,
) -> Result:
    spec, quote = check.reference(probe_.revision)
    level = check.level_at(probe_.revision)
    result = Result(
        check.id,
        check.title,
        level.value,
        spec,
        quote,
        probe_.revision,
        "pass",
        tags=sorted(check.tags),
        transport=target.transport,
        spec_url=spec_url(spec, probe_.revision),
    )
    why = check.applies_to_revision(probe_.revision, era_of(probe_.revision))
    if why is None and target.transport not in check.transports:
        names = {"stdio": "stdio", "http": "Streamable HTTP", "sse": "the 2024-11-05 HTTP+SSE transport"}
        why = "applies to " + " and ".join(names[t] for t in sorted(check.transports)) + " only"
    if why is None:
        missing = [n for n in check.needs if n not in probe_.capabilities]
        if missing:
            why = f"the server does not advertise {', '.join(missing)}"
    if why is not None:
        result.status, result.message = "skipped", why
        return result
    ctx = Context(
        target, probe_.revision, era_of(probe_.revision), probe_.capabilities, supported, timeout=timeout, tools=tools
    )
    began = time.monotonic()
    try:
        with trio.fail_after(check_timeout):
            await check.fn(ctx)
    except CheckEnded as ended:
        result.status, result.message = ended.status, ended.message
        if ended.level is not None:
            level = ended.level
            result.level = level.value
    except NoAnswer as exc:
        result.status, result.message = "fail", str(exc)
    except trio.TooSlowError:
        result.status, result.message = "fail", f"the check did not finish within {check_timeout:g} s"
    except OSError as exc:
        result.status, result.message = "error", f"cannot run the server: {exc}"
    except Exception as exc:  # a bug in a check must not stop the run
        _log.warning("check %s raised %r", check.id, exc, exc_info=_log.isEnabledFor(logging.DEBUG))
        result.status, result.message = "error", f"the check raised {exc!r}"
    result.duration_s = time.monotonic() - began
    if result.status == "fail" and level is not Level.MUST and not (strict and level is Level.SHOULD):
        result.status = "warning"
    if result.status in ("fail", "warning", "error", "not_observed"):
        result.exchanges = _evidence(ctx)
        result.http_exchanges = _http_evidence(ctx)
    return result


def _policy_label(tools: ToolPolicy) -> str:
    if not tools.allow:
        return tools.mode
    named = ", ".join(tools.allow) if len(tools.allow) <= 3 else f"{len(tools.allow)} tools by name"
    return f"{tools.mode} + {named}"


async def run(
    target: Target,
    *,
    revisions: Sequence[str] = (),
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    strict: bool = False,
    timeout: float = 5.0,
    check_timeout: float = 30.0,
    jobs: int = 2,
    on_result: Callable[[Result], None] | None = None,
    tools: ToolPolicy | None = None,
) -> Run:
    """Probe the server, then run every selected check in every revision under test.

    ``revisions`` empty means every revision the server accepts (of the target's pinned era, if
    any), and every legacy revision it answered with a counter-offer (where only the checks marked
    ``on_counter_offer`` run); an explicitly requested revision the server refuses is still
    reported (its checks are skipped with the probe's answer, but for those).

    Raises:
        OSError: the command cannot be started or the URL cannot be reached.
    """
    tools = tools or ToolPolicy()
    target = await detect_transport(target, timeout=timeout)
    # every revision is probed: checks such as SV-09b need to know all the server accepts
    probes = await probe(target, list(ALL_REVISIONS), timeout=timeout)
    supported = tuple(p.revision for p in probes if p.accepted)
    checks = select(only, skip)
    if revisions:
        tested = [p for p in probes if p.revision in revisions]
    else:
        tested = [
            p
            for p in probes
            if (p.accepted or p.counter_offer is not None) and target.era in (None, era_of(p.revision))
        ]
    slots: list[list[Result | None]] = [[None] * len(checks) for _ in tested]
    limiter = trio.CapacityLimiter(max(1, jobs))

    async def one(i: int, j: int) -> None:
        probe_ = tested[i]
        async with limiter:
            if not probe_.accepted and not (checks[j].on_counter_offer and probe_.counter_offer is not None):
                c = checks[j]
                spec, quote = c.reference(probe_.revision)
                r = Result(
                    c.id,
                    c.title,
                    c.level_at(probe_.revision).value,
                    spec,
                    quote,
                    probe_.revision,
                    "skipped",
                    f"the server does not accept {probe_.revision}: {probe_.detail}",
                    tags=sorted(c.tags),
                    transport=target.transport,
                    spec_url=spec_url(spec, probe_.revision),
                )
            else:
                r = await _run_one(
                    checks[j],
                    probe_,
                    target,
                    supported,
                    strict=strict,
                    timeout=timeout,
                    check_timeout=check_timeout,
                    tools=tools,
                )
        slots[i][j] = r
        if on_result is not None:
            on_result(r)

    async with trio.open_nursery() as nursery:
        for i in range(len(tested)):
            for j in range(len(checks)):
                nursery.start_soon(one, i, j)
    results = [r for row in slots for r in row if r is not None]
    return Run(
        target.label,
        probes,
        [p.revision for p in tested],
        results,
        transport=target.transport,
        tool_calls=_policy_label(tools),
    )
