"""Select applicable checks per revision, run each with a deadline, collect results.

Theory of operation: :func:`run` finds the transport of a URL and probes every revision
(:mod:`.handshake`), then runs every selected check for each revision under test, at most ``jobs``
at a time (revisions side by side; over stdio, checks that call tools run besides, up to ``jobs``
more, each waiting on its own server process), each in its own :class:`Context` and under a hard
deadline, in the order :func:`_schedule` gives.
The revisions under test are the accepted ones, every legacy revision the server counter-offered
another version for (there only the version negotiation checks run, ``on_counter_offer``), and
every revision whose handshake broke a rule (there that rule's failure is reported and the other
checks are skipped: none could open a session).

A check's ``fail`` is judged at the level the rule has in the revision: MUST fails the run, SHOULD
is a warning (a failure with ``strict``), MAY a warning; ``warn`` (a heuristic or a deviation the
spec leaves open) is a warning even with ``strict``. A result that is not a pass keeps its
evidence, collected and redacted once (:mod:`.evidence`) with the target's :class:`Redactor`: the
reports show it as it is.

Stdio processes come from one :class:`~.pool.WirePool` per run, which shuts them down in the
background and lends a process again to a later check only when nothing it did could have changed
it (``reuse=False`` gives every check its own processes).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import trio

from . import checks as _checks  # noqa: F401  (registers the catalogue)
from .audit import SchemaAudit
from .context import CheckEnded, Context, Target, ToolPolicy
from .evidence import Redactor, WireRecord, collect, record_of
from .handshake import detect_transport, probe
from .harness import NoAnswer, lone_errors
from .http_harness import EndpointRefused
from .levels import Level
from .model import ALL_REVISIONS, STATUSES, Probe, Result, Run, SkipKind, Violation, era_of, spec_url
from .pace import Pace
from .pool import WirePool
from .registry import CATALOGUE, Check

__all__ = [
    "ALL_REVISIONS",
    "STATUSES",
    "check_deadline",
    "Probe",
    "Result",
    "Run",
    "detect_transport",
    "era_of",
    "probe",
    "redactor_for",
    "run",
    "select",
    "spec_url",
]

_log = logging.getLogger("mcpwire.check.runner")

#: checks run at once by default: most of a check's time is waiting for the server (8: the bundled
#: server in 6.5 s instead of 10.6 s at 4 on 2 cores, the same findings there and on server-everything)
DEFAULT_JOBS: Final = 8
#: tags of checks that call tools and wait on them (scheduled first)
_SLOW_TAGS: Final = frozenset({"tool-calls", "cancellation", "progress"})
_TRANSPORT_NAMES: Final = {"stdio": "stdio", "http": "Streamable HTTP", "sse": "the 2024-11-05 HTTP+SSE transport"}


def check_deadline(timeout: float) -> float:
    """How long one check may take when one answer may take ``timeout`` seconds: a check waits for
    several answers (six answers' worth, at least 30 s)."""
    return max(30.0, 6 * timeout)


def redactor_for(target: Target) -> Redactor:
    """What no report about ``target`` may show: its header values, the secrets the user gave,
    the credentials in its URL and command line."""
    headers = dict(target.headers or {})
    return Redactor(
        values=[*headers.values(), *target.secrets],
        header_names=headers,
        url=target.url,
        argv=target.argv,
        extra=target.masked,
    )


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


def _result(check: Check, revision: str, transport: str, status: str = "pass", message: str = "") -> Result:
    spec, quote = check.reference(revision)
    return Result(
        check.id,
        check.title,
        check.level_at(revision).value,
        spec,
        quote,
        revision,
        status,
        message,
        tags=sorted(check.tags),
        transport=transport,
        spec_url=spec_url(spec, revision),
    )


def _skipped(
    check: Check, revision: str, transport: str, why: str, kind: SkipKind, detail: tuple[str, ...] = ()
) -> Result:
    result = _result(check, revision, transport, "skipped", why)
    result.skipped_for, result.skip_detail = kind, detail
    return result


def _not_applicable(check: Check, probe_: Probe, transport: str) -> Result | None:
    """The skipped result of a check that does not apply to the probe's revision, transport or
    capabilities (None when it applies)."""
    revision = probe_.revision
    why = check.applies_to_revision(revision, era_of(revision))
    if why is not None:
        return _skipped(check, revision, transport, why, SkipKind.REVISION)
    if transport not in check.transports:
        why = "applies to " + " and ".join(_TRANSPORT_NAMES[t] for t in sorted(check.transports)) + " only"
        return _skipped(check, revision, transport, why, SkipKind.TRANSPORT)
    missing = tuple(n for n in check.needs if n not in probe_.capabilities)
    if missing:
        why = f"the server does not advertise {', '.join(missing)}"
        return _skipped(check, revision, transport, why, SkipKind.CAPABILITY, missing)
    return None


def _records(ctx: Context) -> list[WireRecord]:
    return [w if isinstance(w, WireRecord) else record_of(w) for w in ctx.wires]


@dataclass(frozen=True, slots=True)
class _Settings:
    """What every check of one run is given: the run's processes and redaction, and its options."""

    pool: WirePool | None
    redactor: Redactor
    strict: bool
    timeout: float
    check_timeout: float
    tools: ToolPolicy
    #: the run's observed start-up and answer latencies (see :mod:`.pace`)
    pace: Pace
    #: every result received, validated against the revision's schema (see :mod:`.audit`)
    audit: SchemaAudit


async def _run_one(check: Check, probe_: Probe, target: Target, supported: tuple[str, ...], run: _Settings) -> Result:
    skipped = _not_applicable(check, probe_, target.transport)
    if skipped is not None:
        return skipped
    result = _result(check, probe_.revision, target.transport)
    level = check.level_at(probe_.revision)
    ctx = Context(
        target,
        probe_.revision,
        era_of(probe_.revision),
        probe_.capabilities,
        supported,
        timeout=run.timeout,
        tools=run.tools,
    )
    ctx.pool, ctx.pace, ctx.audit = run.pool, run.pace, run.audit
    began = time.monotonic()
    # the check's own deadline grows as its windows do (a slow machine makes every wait longer)
    deadline = run.check_timeout * run.pace.scale(run.timeout)
    try:
        with trio.fail_after(deadline):
            await check.fn(ctx)
    except CheckEnded as ended:
        result.status, result.message = ended.status, ended.message
        result.skipped_for, result.skip_detail = ended.skipped_for, ended.skip_detail
        if ended.level is not None:
            level = ended.level
            result.level = level.value
    except NoAnswer as exc:
        # a window that ended proves nothing of a rule that is not about time (a check whose rule
        # is, or that has other evidence, ends with fail itself): the server may only be slow. A
        # server that closed its output, answered HTTP without JSON-RPC, or answered something too
        # deep to read, did answer the request wrongly: that is evidence
        if exc.timed_out:
            result.status, result.message = "error", f"could not judge: {exc}"
        else:
            result.status, result.message = "fail", str(exc)
    except trio.TooSlowError:
        result.status, result.message = "error", f"could not judge: the check did not finish within {deadline:.0f} s"
    except EndpointRefused as exc:
        result.status, result.message = "error", f"cannot run the check: {exc}"
    except OSError as exc:
        result.status, result.message = "error", f"cannot run the server: {exc}"
    except Exception as exc:  # a bug in a check must not stop the run
        _log.warning("check %s raised %r", check.id, exc, exc_info=_log.isEnabledFor(logging.DEBUG))
        result.status, result.message = "error", f"the check raised {exc!r}"
    result.duration_s = time.monotonic() - began
    if result.status == "fail" and level is not Level.MUST and not (run.strict and level is Level.SHOULD):
        result.status = "warning"
    result.message = run.redactor.text(result.message)
    if result.status in ("fail", "warning", "error", "not_observed"):
        result.exchanges, result.http_exchanges = collect(_records(ctx), run.redactor)
    return result


def _violation_results(
    violation: Violation, revision: str, checks: Sequence[Check], transport: str, strict: bool
) -> list[Result]:
    """The results of a revision whose handshake broke a rule: that rule's failure, the rest
    skipped (with a pointer to it)."""
    found = CATALOGUE.get(violation.check_id)
    if found is not None:
        broken = _result(found, revision, transport, "fail", violation.message)
    else:  # pragma: no cover - every id the handshake uses is in the catalogue
        broken = Result(violation.check_id, "handshake", "MUST", "", "", revision, "fail", violation.message)
    level = Level(broken.level)
    if level is not Level.MUST and not (strict and level is Level.SHOULD):
        broken.status = "warning"
    broken.exchanges, broken.http_exchanges = list(violation.evidence), list(violation.http)
    why = f"not run: the handshake for {revision} broke {violation.check_id} (see that result)"
    out = [
        broken if c.id == violation.check_id else _skipped(c, revision, transport, why, SkipKind.HANDSHAKE)
        for c in checks
    ]
    if all(c.id != violation.check_id for c in checks):
        out.insert(0, broken)
    return out


def _slow(check: Check) -> bool:
    return bool(check.tags & _SLOW_TAGS)


def _schedule(tested: Sequence[Probe], checks: Sequence[Check], *, stdio: bool) -> list[tuple[int, int]]:
    """The order checks start in (workers take them in turn, so a run is reproducible): checks
    that call tools and wait on them first, across revisions (they are the long ones, and should not
    be left for the end), then the others, those that end their process after the rest (they take
    a process the others left, not a new one, see :mod:`.pool`).

    Over stdio the others go check by check across the revisions: each revision then has a check
    or two running at a time, whose processes serve its next checks, instead of a worker per check
    each starting a process of its own when its revision's turn comes. Over HTTP every check talks
    to the one server and they go revision by revision, each revision's sessions together: a server
    that serves one era at a time (FastMCP 4.1.2's proxy refuses a legacy session while a 2026-07-28
    request holds its backend) meets no more sessions of the other era than it always did."""
    pairs = [(i, j) for i, p in enumerate(tested) if p.violation is None for j in range(len(checks))]

    def order(pair: tuple[int, int]) -> tuple[int, int, int, int]:
        i, j = pair
        later, last = not _slow(checks[j]), checks[j].ends_session
        return (later, last, j, i) if stdio else (later, i, last, j)

    return sorted(pairs, key=order)


#: a result that could not be judged for want of an answer (see :func:`_second_chance`)
_UNANSWERED: Final = "could not judge: "
#: the windows of a second attempt, in the first's
SECOND_CHANCE_STRETCH: Final = 2.0


async def _second_chance(
    tested: Sequence[Probe],
    checks: Sequence[Check],
    rows: list[list[Result | None]],
    target: Target,
    supported: tuple[str, ...],
    settings: _Settings,
) -> None:
    """Checks that could not judge for want of an answer run once more, one at a time, with
    windows twice as long: the first attempt ran beside ``jobs`` others on a busy machine, and a
    second, alone, usually gets its answers. What it decides replaces the first result (a failure
    included: it is then proven on its own evidence); if it too gets no answer, it stays ``error``."""
    again = [
        (i, j)
        for i, row in enumerate(rows)
        for j, r in enumerate(row)
        if r is not None and r.status == "error" and r.message.startswith(_UNANSWERED)
    ]
    if not again:
        return
    _log.info("%d check(s) got no answer in time; running them again one at a time", len(again))
    settings.pace.stretch = SECOND_CHANCE_STRETCH
    try:
        for i, j in again:
            rows[i][j] = await _run_one(checks[j], tested[i], target, supported, settings)
    finally:
        settings.pace.stretch = 1.0


#: the check that reports what the schema audit found
_SCHEMA_CHECK: Final = "SV-06"


def _schema_findings(
    tested: Sequence[Probe], checks: Sequence[Check], rows: list[list[Result | None]], settings: _Settings
) -> None:
    """Each revision's SV-06 result gains the schema defects of every result received in it (see
    :mod:`.audit`): one line per defect, however many results, checks or calls showed it."""
    column = next((j for j, c in enumerate(checks) if c.id == _SCHEMA_CHECK), None)
    if column is None:
        return
    for i, probe_ in enumerate(tested):
        result = rows[i][column] if i < len(rows) else None
        defects = settings.audit.findings(probe_.revision)
        if result is None or not defects or result.status in ("skipped", "expected_fail"):
            continue
        lines = [d.line() for d in defects if _defect_key(d.line()) not in _defect_key(result.message)]
        if not lines:
            continue
        first = defects[0]
        detail = "; ".join(lines) + f" (first: {first.example})"
        message = detail if result.status != "fail" else f"{result.message}; {detail}"
        result.status, result.message = "fail", settings.redactor.text(message)
        level = Level(result.level)
        if level is not Level.MUST and not (settings.strict and level is Level.SHOULD):
            result.status = "warning"


def _defect_key(text: str) -> str:
    """A defect's line without its count (the count grows after SV-06 reported the line)."""
    return re.sub(r" \(\d+ results\)", "", text)


def _policy_label(tools: ToolPolicy) -> str:
    if not tools.allow:
        return tools.mode
    named = ", ".join(tools.allow) if len(tools.allow) <= 3 else f"{len(tools.allow)} tools by name"
    return f"{tools.mode} + {named}"


def _tested(probes: Sequence[Probe], revisions: Sequence[str], era: str | None) -> list[Probe]:
    if revisions:
        return [p for p in probes if p.revision in revisions]
    return [
        p
        for p in probes
        if (p.accepted or p.counter_offer is not None or p.violation is not None) and era in (None, era_of(p.revision))
    ]


async def run(
    target: Target,
    *,
    revisions: Sequence[str] = (),
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    strict: bool = False,
    timeout: float = 5.0,
    check_timeout: float | None = None,
    jobs: int = DEFAULT_JOBS,
    on_result: Callable[[Result], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    tools: ToolPolicy | None = None,
    reuse: bool = True,
) -> Run:
    """Probe the server, then run every selected check in every revision under test.

    ``revisions`` empty means every revision the server accepts (of the target's pinned era, if
    any), every legacy revision it answered with a counter-offer (where only the checks marked
    ``on_counter_offer`` run) and every revision whose handshake broke a rule; an explicitly
    requested revision the server refuses is still reported (its checks are skipped with the
    probe's answer, but for those). ``on_plan`` gets the number of results to come once the
    probes are done, ``on_result`` each result as it is decided. ``check_timeout`` bounds one
    check (None: :func:`check_deadline` of ``timeout``).

    Raises:
        OSError: the command cannot be started or the URL cannot be reached.

    Cancellation: every server process is shut down (shielded, bounded) before this returns.
    """
    tools = tools or ToolPolicy()
    if check_timeout is None:
        check_timeout = check_deadline(timeout)
    redactor = redactor_for(target)
    with lone_errors():  # the error of the run itself (a server that cannot start) comes out as itself
        async with trio.open_nursery() as nursery:
            pool = None if target.is_http else target.pool(nursery, reuse=reuse)
            settings = _Settings(pool, redactor, strict, timeout, check_timeout, tools, Pace(), SchemaAudit())
            try:
                return await _run(
                    target,
                    settings,
                    revisions=revisions,
                    checks=select(only, skip),
                    jobs=jobs,
                    on_result=on_result,
                    on_plan=on_plan,
                )
            finally:
                if pool is not None:
                    pool.close_all()


async def _run(
    target: Target,
    settings: _Settings,
    *,
    revisions: Sequence[str],
    checks: list[Check],
    jobs: int,
    on_result: Callable[[Result], None] | None,
    on_plan: Callable[[int], None] | None,
) -> Run:
    pool, redactor, strict, timeout = settings.pool, settings.redactor, settings.strict, settings.timeout
    target = await detect_transport(target, timeout=timeout)
    # every revision is probed: checks such as SV-09b need to know all the server accepts
    probes = await probe(target, list(ALL_REVISIONS), timeout=timeout, pool=pool, redactor=redactor, pace=settings.pace)
    for p in probes:
        p.detail = redactor.text(p.detail)
    supported = tuple(p.revision for p in probes if p.accepted)
    tested = _tested(probes, revisions, target.era)
    rows: list[list[Result | None]] = []
    for p in tested:
        if p.violation is not None:
            found = _violation_results(p.violation, p.revision, checks, target.transport, strict)
            row: list[Result | None] = list(found)
        else:
            row = [None] * len(checks)
        rows.append(row)
    if on_plan is not None:
        on_plan(sum(len(row) for row in rows))
    for row in rows:
        for r in row:
            if r is not None and on_result is not None:
                on_result(r)

    async def one(i: int, j: int) -> None:
        probe_, check = tested[i], checks[j]
        if not probe_.accepted and not (check.on_counter_offer and probe_.counter_offer is not None):
            why = f"the server does not accept {probe_.revision}: {probe_.detail}"
            r = _skipped(check, probe_.revision, target.transport, why, SkipKind.NOT_ACCEPTED)
        else:
            r = await _run_one(check, probe_, target, supported, settings)
        rows[i][j] = r
        if on_result is not None:
            on_result(r)

    queue = _schedule(tested, checks, stdio=pool is not None)

    async def worker() -> None:
        while queue:
            await one(*queue.pop(0))

    async def tool_worker() -> None:
        while queue and _slow(checks[queue[0][1]]):
            await one(*queue.pop(0))

    async with trio.open_nursery() as nursery:
        for _ in range(max(1, jobs)):
            nursery.start_soon(worker)
        if pool is not None:
            # over stdio a check that calls tools mostly waits for its own process's tools (a call
            # left unanswered holds it for a whole window): as many again run besides the others
            for _ in range(max(1, jobs)):
                nursery.start_soon(tool_worker)
    await _second_chance(tested, checks, rows, target, supported, settings)
    _schema_findings(tested, checks, rows, settings)
    results = [r for row in rows for r in row if r is not None]
    return Run(
        redactor.text(target.label),
        probes,
        [p.revision for p in tested],
        results,
        transport=target.transport,
        tool_calls=_policy_label(settings.tools),
        processes_started=pool.started if pool is not None else 0,
        sessions_reused=pool.reused if pool is not None else 0,
    )
