"""Select applicable checks per revision, run each with a deadline, collect results.

Theory of operation: :func:`probe` asks the server, on a fresh process per revision, whether it
accepts that revision (legacy: ``initialize`` answered with the same version; modern:
``server/discover`` listing it) and what it advertises. :func:`run` then runs every selected check
for each revision under test, at most ``jobs`` at a time, each in its own :class:`Context` and
under a hard deadline. A check's ``fail`` on a SHOULD/MAY rule becomes a warning unless strict.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import trio

import conformance.checks  # noqa: F401  (registers the catalogue)
from conformance.context import CLIENT_INFO, META_CAPS, META_INFO, META_VERSION, CheckEnded, Context, Target
from conformance.harness import NoAnswer, open_wire
from conformance.registry import CATALOGUE, Check, Level

__all__ = ["ALL_REVISIONS", "STATUSES", "Probe", "Result", "Run", "probe", "run", "select"]

_log = logging.getLogger("mcpwire.check.runner")

ALL_REVISIONS: Final = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Result statuses; ``not_observed`` is never counted as a pass.
STATUSES: Final = ("pass", "fail", "warning", "skipped", "not_observed", "expected_fail", "error")
MAX_EVIDENCE_LINES: Final = 80


@dataclass(slots=True)
class Probe:
    """What one revision probe found."""

    revision: str
    accepted: bool
    capabilities: dict[str, Any] = field(default_factory=dict)
    detail: str = ""


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


@dataclass(slots=True)
class Run:
    """Every result of one checker run."""

    target: str
    probes: list[Probe]
    revisions: list[str]
    results: list[Result]
    stale_baseline: list[str] = field(default_factory=list)

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


def era_of(revision: str) -> str:
    return "modern" if revision >= "2026-07-28" else "legacy"


async def _probe_one(target: Target, revision: str, timeout: float) -> Probe:
    try:
        async with open_wire(target.argv, env=target.env, eof_grace=target.eof_grace) as wire:
            if era_of(revision) == "legacy":
                params = {"protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}
                answer = await wire.request("initialize", params, timeout=timeout)
                result = answer.get("result")
                if isinstance(result, dict) and result.get("protocolVersion") == revision:
                    return Probe(revision, True, dict(result.get("capabilities") or {}))
                return Probe(revision, False, detail=f"initialize answered {answer!r:.160}")
            meta = {META_VERSION: revision, META_CAPS: {}, META_INFO: CLIENT_INFO}
            answer = await wire.request("server/discover", {"_meta": meta}, timeout=timeout)
            result = answer.get("result")
            if isinstance(result, dict) and revision in (result.get("supportedVersions") or []):
                return Probe(revision, True, dict(result.get("capabilities") or {}))
            return Probe(revision, False, detail=f"server/discover answered {answer!r:.160}")
    except NoAnswer as exc:
        return Probe(revision, False, detail=str(exc))


async def probe(target: Target, revisions: Sequence[str], *, timeout: float = 5.0) -> list[Probe]:
    """Which of ``revisions`` the server accepts, each on a fresh process.

    Raises:
        OSError: the command cannot be started.
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
        lines.append(f"--- process {n}")
        lines.extend(f"{e.at:7.3f} {e.direction} {e.text[:400]}" for e in wire.exchanges)
        if wire.stderr:
            tail = bytes(wire.stderr[-400:]).decode("utf-8", "replace").strip()
            lines.append(f"stderr (tail): {tail}")
    return lines if len(lines) <= MAX_EVIDENCE_LINES else [*lines[:20], "...", *lines[-(MAX_EVIDENCE_LINES - 21) :]]


async def _run_one(
    check: Check,
    probe_: Probe,
    target: Target,
    supported: tuple[str, ...],
    *,
    strict: bool,
    timeout: float,
    check_timeout: float,
) -> Result:
    result = Result(
        check.id,
        check.title,
        check.level.value,
        check.spec,
        check.quote,
        probe_.revision,
        "pass",
        tags=sorted(check.tags),
    )
    why = check.applies_to_revision(probe_.revision, era_of(probe_.revision))
    if why is None and "stdio" not in check.transports:
        why = "applies to HTTP only"
    if why is None:
        missing = [n for n in check.needs if n not in probe_.capabilities]
        if missing:
            why = f"the server does not advertise {', '.join(missing)}"
    if why is not None:
        result.status, result.message = "skipped", why
        return result
    ctx = Context(target, probe_.revision, era_of(probe_.revision), probe_.capabilities, supported, timeout=timeout)
    began = time.monotonic()
    try:
        with trio.fail_after(check_timeout):
            await check.fn(ctx)
    except CheckEnded as ended:
        result.status, result.message = ended.status, ended.message
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
    if result.status == "fail" and check.level is not Level.MUST and not strict:
        result.status = "warning"
    if result.status == "warning" and strict:
        result.status = "fail"
    if result.status in ("fail", "warning", "error", "not_observed"):
        result.exchanges = _evidence(ctx)
    return result


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
) -> Run:
    """Probe the server, then run every selected check in every revision under test.

    ``revisions`` empty means every revision the server accepts; an explicitly requested revision
    the server refuses is still reported (its checks are skipped with the probe's answer).
    """
    # every revision is probed: checks such as SV-09b need to know all the server accepts
    probes = await probe(target, list(ALL_REVISIONS), timeout=timeout)
    supported = tuple(p.revision for p in probes if p.accepted)
    checks = select(only, skip)
    tested = [p for p in probes if p.revision in revisions] if revisions else [p for p in probes if p.accepted]
    slots: list[list[Result | None]] = [[None] * len(checks) for _ in tested]
    limiter = trio.CapacityLimiter(max(1, jobs))

    async def one(i: int, j: int) -> None:
        probe_ = tested[i]
        async with limiter:
            if not probe_.accepted:
                c = checks[j]
                r = Result(
                    c.id,
                    c.title,
                    c.level.value,
                    c.spec,
                    c.quote,
                    probe_.revision,
                    "skipped",
                    f"the server does not accept {probe_.revision}: {probe_.detail}",
                    tags=sorted(c.tags),
                )
            else:
                r = await _run_one(
                    checks[j], probe_, target, supported, strict=strict, timeout=timeout, check_timeout=check_timeout
                )
        slots[i][j] = r
        if on_result is not None:
            on_result(r)

    async with trio.open_nursery() as nursery:
        for i in range(len(tested)):
            for j in range(len(checks)):
                nursery.start_soon(one, i, j)
    results = [r for row in slots for r in row if r is not None]
    return Run(target.label, probes, [p.revision for p in tested], results)
