"""The fuzzing run: what it is given, what it reports, learning the server, and one example's run.

Theory of operation: :func:`learn` opens a session on the :class:`~fuzz.wire.Target` (a stdio
command, or an HTTP URL with or without the command that serves it), detects the era (a
2026-07-28 ``server/discover`` probe, else the legacy ``initialize`` handshake on a fresh
session, restarting the process if the probe killed it) and reads the catalogue into a
:class:`~fuzz.exchange.Profile`. :func:`select_tools` decides which tools may be called: by
default only those whose annotations say calling them is harmless (read-only, or idempotent and
not destructive, and not open-world); ``tools="all"`` or a list of names opts in to others, and
``deny`` always wins. :func:`fuzz.schedule.run` then runs it: it cuts the run into
units (one per tool, one per protocol kind, the stateful machine, the list check) and gives them
examples in rounds within the time budget.

Time: with ``time_budget`` the run is a bound, not a wish. Every wait of the exchange stops at the
end of the budget (an example cut there counts for nothing), no example, confirming replay or
unit starts after it, and what remains (ending the current example's server, writing findings)
fits in :data:`BUDGET_GRACE_S`.

A finding is a :class:`Finding`: the minimal failing example (shrunk by Hypothesis), every
violation it produced, the root cause it belongs to (:class:`~fuzz.clusters.Cluster`: findings
with the same oracle and trigger shape are reported once, with their members), and whether a
replay on a fresh session showed it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clusters import Cluster
from .exchange import MODERN_REVISION, Observation, Profile, Step, dumps, execute, prologue, request
from .messages import PROTOCOL_KINDS
from .oracles import Violation
from .wire import Entry, Peer, StdioTarget, Target, decode_line

__all__ = [
    "BUDGET_GRACE_S",
    "PHASES",
    "SAFE_RULE",
    "SEVERITIES",
    "Config",
    "EndpointRefused",
    "Finding",
    "OutOfTime",
    "Report",
    "UnitStats",
    "learn",
    "make_target",
    "run_steps",
    "select_tools",
    "tool_risk",
]

log = logging.getLogger("mcpwire.fuzz.runner")

LEGACY_REVISIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PHASES = ("tools", "protocol", "stateful", "lists")
#: finding severities, most severe first
SEVERITIES = ("error", "warning")
#: how long the first request of a fresh session may take (the server may still be starting)
STARTUP_S = 20.0
#: a run with a time budget ends within the budget plus this (the server of the example in flight
#: is ended, findings are written)
BUDGET_GRACE_S = 5.0
#: the tools fuzzed by default
SAFE_RULE = "read-only, or idempotent and not destructive, and not open-world (by their annotations)"


@dataclass(slots=True)
class Config:
    """Everything a run needs; the CLI fills it from its options.

    ``argv`` is the stdio server's command, or (with ``url``) the command that serves the URL;
    with ``url`` and no ``argv`` the fuzzer talks to a server it does not manage.
    """

    argv: list[str] | None
    url: str | None = None
    transport: str = "auto"
    #: extra HTTP request headers (e.g. Authorization); never written to traces or reports
    headers: dict[str, str] = field(default_factory=dict)
    max_examples: int = 100
    time_budget: float | None = None
    deadline: float = 5.0
    #: the deadline a missed deadline is confirmed with (default: three times ``deadline``)
    confirm_deadline: float | None = None
    settle: float = 0.0
    connect_timeout: float = 20.0
    seed: int | None = None
    database: Path | None = None
    era: str = "auto"
    isolation: str = "auto"
    #: which tools to call: None (the safe ones, see :data:`SAFE_RULE`), ``"all"``, or names
    tools: str | Sequence[str] | None = None
    deny: Sequence[str] = ()
    #: the older spelling of a list of names (``--allow``): the same as ``tools=[...]``
    allow: Sequence[str] | None = None
    phases: Sequence[str] = PHASES
    #: the protocol phase's kinds (default: all of them)
    protocol_kinds: Sequence[str] = PROTOCOL_KINDS
    #: rule sequences of the stateful machine, and rules per sequence
    machine_runs: int = 10
    machine_steps: int = 12
    #: call each tool with the edge values first (see :mod:`fuzz.edges`)
    edges: bool = True
    #: units that run fewer examples than this are a coverage gap that fails the run (0: only units
    #: that ran none)
    min_examples: int = 0
    #: seconds one finding may be shrunk for (then the smallest failing example so far is kept)
    shrink_time: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    progress: Callable[[str], None] | None = None
    #: the ``time.monotonic()`` moment the budget counts from (default: when the run starts)
    started: float | None = None

    @property
    def slow_deadline(self) -> float:
        return self.confirm_deadline if self.confirm_deadline is not None else 3 * self.deadline


@dataclass(slots=True)
class Finding:
    """One root cause: its minimal failing example and what it broke."""

    violation: Violation
    phase: str
    tool: str | None
    observation: Observation
    entries: list[Entry]
    flaky: bool = False
    #: whether a replay on a fresh session showed it again (None: not replayed)
    reproduced: bool | None = None
    #: every violation the example produced (``violation`` is the first, most severe one)
    violations: list[Violation] = field(default_factory=list)
    cluster: Cluster | None = None
    #: seconds from the start of the run
    found_at: float = 0.0
    #: what was seen, without the trigger's words (``violation.message`` leads with them)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out = self.violation.to_json()
        out.update({"phase": self.phase, "tool": self.tool, "flaky": self.flaky, "reproduced": self.reproduced})
        out["input"] = [s.line.decode("utf-8", "replace") for s in self.observation.steps if not s.setup]
        out["found_at_s"] = round(self.found_at, 3)
        others = [v.to_json() for v in self.violations if v != self.violation]
        if others:
            out["also"] = others
        if self.cluster is not None:
            out["cluster"] = self.cluster.to_json()
        return out


@dataclass(slots=True)
class UnitStats:
    """What one unit of work (a tool, a protocol kind, the machine) did."""

    unit: str
    #: examples run (shrinking included); for the stateful machine, rule sequences started
    examples: int = 0
    duration: float = 0.0
    findings: int = 0
    #: the number of the first example that broke an oracle (1: the very first, e.g. one the
    #: example database kept from an earlier run), or None
    first_failure: int | None = None
    #: the stateful machine: how many times each rule ran (rules that did nothing are not counted)
    rules: dict[str, int] = field(default_factory=dict)
    #: it ran out of its share of the time budget before its example count
    cut_short: bool = False
    #: what stopped it, when not the server (e.g. a schema no example satisfies)
    error: str | None = None
    #: failing examples of a root cause already reported (counted, not reported again)
    known: int = 0
    #: rounds it got examples in
    rounds: int = 0
    #: the stateful machine: tool calls that got a value from an earlier result
    fed: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "unit": self.unit,
            "examples": self.examples,
            "duration_s": round(self.duration, 3),
            "findings": self.findings,
            "known_cause_examples": self.known,
            "first_failure": self.first_failure,
            "cut_short": self.cut_short,
            "rounds": self.rounds,
            "error": self.error,
        }
        if self.unit == "stateful":
            out["rules"] = dict(sorted(self.rules.items()))
            out["fed_values"] = self.fed
        return out


@dataclass(slots=True)
class Report:
    profile: Profile | None
    findings: list[Finding] = field(default_factory=list)
    examples: int = 0
    skipped_tools: list[str] = field(default_factory=list)
    #: why each skipped tool was skipped
    skipped_reasons: dict[str, str] = field(default_factory=dict)
    units: list[UnitStats] = field(default_factory=list)
    duration: float = 0.0
    error: str | None = None
    #: units that ran fewer examples than asked (``min_examples``) or none: the run did not cover them
    coverage_gaps: list[str] = field(default_factory=list)
    time_budget: float | None = None

    @property
    def first_finding(self) -> float | None:
        return min((f.found_at for f in self.findings), default=None)

    def failed(self, fail_on: str = "warning") -> bool:
        """Whether the run found something at ``fail_on`` severity or above (``"warning"``, the
        default: any finding; ``"error"``: errors only), left units uncovered, or could not go on."""
        if fail_on not in SEVERITIES:
            raise ValueError(f"fail_on must be one of {', '.join(SEVERITIES)}, not {fail_on!r}")
        worst = SEVERITIES.index(fail_on)
        return (
            self.error is not None
            or bool(self.coverage_gaps)
            or any(SEVERITIES.index(f.violation.severity) <= worst for f in self.findings)
        )


class OutOfTime(BaseException):
    """Ends a unit whose share of the time (or the run's budget) is used up. A BaseException, so
    Hypothesis lets it through at once instead of counting it as a failure of the example."""


class EndpointRefused(RuntimeError):
    """The HTTP+SSE server announced a POST endpoint on another origin: nothing was sent there."""

    def __init__(self, message: str, entries: list[Entry]) -> None:
        super().__init__(message)
        self.entries = entries


# -- which tools ------------------------------------------------------------------------------------


def tool_risk(tool: dict[str, Any]) -> str | None:
    """Why calling ``tool`` again and again may do harm, from its annotations, or ``None`` when it
    is safe to fuzz by default (:data:`SAFE_RULE`; the spec's defaults for a missing hint count:
    not read-only, destructive, not idempotent, open-world)."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, dict) or not annotations:
        return "no annotations (by default a tool may change things and reach the outside world)"
    if annotations.get("openWorldHint") is not False:
        return "open-world (openWorldHint is not false)"
    if annotations.get("readOnlyHint") is True:
        return None
    if annotations.get("idempotentHint") is True:
        if annotations.get("destructiveHint") is False:
            return None
        return "destructive (not read-only, destructiveHint is not false)"
    return "neither read-only nor idempotent"


def select_tools(config: Config, tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The tools the run may call, and why each other one is skipped."""
    wanted = config.tools if config.tools is not None else config.allow
    chosen: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for tool in tools:
        name = str(tool.get("name"))
        if name in config.deny:
            skipped[name] = "denied (--deny)"
        elif wanted == "all":
            chosen.append(tool)
        elif wanted is not None and not isinstance(wanted, str):
            if name in wanted:
                chosen.append(tool)
            else:
                skipped[name] = "not named (--tools)"
        elif (risk := tool_risk(tool)) is not None:
            skipped[name] = risk
        else:
            chosen.append(tool)
    return chosen, skipped


# -- targets and learning the server ----------------------------------------------------------------


def make_target(config: Config) -> Target:
    """The target a configuration names (raises ``ValueError`` for a bad URL or transport)."""
    if config.url:
        from .http_wire import HttpTarget

        return HttpTarget(
            config.url,
            transport=config.transport,
            argv=list(config.argv) if config.argv else None,
            env=config.env or None,
            cwd=config.cwd,
            headers=config.headers,
            start_timeout=config.connect_timeout,
        )
    if not config.argv:
        raise ValueError("give a server command or a URL")
    return StdioTarget(list(config.argv), config.env or None, config.cwd)


def _left(until: float | None, wanted: float) -> float:
    return wanted if until is None else max(0.0, min(wanted, until - time.monotonic()))


def _request_answer(peer: Peer, step: Step, timeout: float) -> dict[str, Any] | None:
    if not peer.send(step.line, timeout=timeout):
        return None
    until = time.monotonic() + timeout
    while (remaining := until - time.monotonic()) > 0:
        line = peer.receive(remaining)
        if line is None:
            if not peer.alive():
                return None
            continue
        message = decode_line(line)
        if isinstance(message, dict) and "method" not in message and message.get("id") == step.request_id:
            return message
        if isinstance(message, dict) and "method" not in message and message.get("id") is None and "error" in message:
            return message  # the one request in flight was refused unread (e.g. an HTTP 400 before the session)
        if isinstance(message, dict) and "method" in message and "id" in message:
            reply = {"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32601, "message": "not supported"}}
            peer.send(dumps(reply), timeout=1)
    return None


def _pages(
    peer: Peer, profile: Profile, method: str, key: str, timeout: float, until: float | None
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(100):
        params = {"cursor": cursor} if cursor is not None else None
        step = request(f"learn-{method}-{page}", method, profile.params(params))
        answer = _request_answer(peer, step, _left(until, timeout))
        result = answer.get("result") if answer else None
        if not isinstance(result, dict):
            break
        items.extend(i for i in result.get(key, []) if isinstance(i, dict))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or cursor in seen:
            break
        seen.add(cursor)
    return items


def _refused(peer: Peer) -> None:
    reason = getattr(peer, "endpoint_refused", None)
    if reason is not None:
        raise EndpointRefused(reason, list(peer.trace.entries))


def learn(config: Config, target: Target, until: float | None = None) -> Profile:
    """Detects the era and reads tools, prompts and resources (raises ``RuntimeError`` if it
    can't, :class:`EndpointRefused` for an SSE endpoint on another origin). No wait goes past
    ``until``."""
    era = config.era
    described = target.describe()
    if era in ("auto", "modern"):
        with target.open() as peer:
            _refused(peer)
            probe_profile = Profile(described, "modern", MODERN_REVISION)
            probe_timeout = config.connect_timeout if era == "modern" else min(config.connect_timeout, 5.0)
            modern_answer = _request_answer(peer, probe_profile.probe("learn-discover"), _left(until, probe_timeout))
            result = modern_answer.get("result") if modern_answer else None
            if isinstance(result, dict) and MODERN_REVISION in (result.get("supportedVersions") or []):
                profile = Profile(described, "modern", MODERN_REVISION, result.get("capabilities") or {})
                profile.server_info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
                return _catalogue(peer, profile, config, target, until)
        if era == "modern":
            raise RuntimeError("the server did not answer server/discover for 2026-07-28")
    stderr = ""
    for revision in LEGACY_REVISIONS:
        if until is not None and time.monotonic() >= until:
            raise RuntimeError("the time budget ran out while learning the server")
        # a fresh session each time: the probe (or a refused revision) may have upset or killed the last one
        with target.open() as peer:
            _refused(peer)
            profile = Profile(described, "legacy", revision)
            init, done = prologue(profile)
            answer = _request_answer(peer, init, _left(until, config.connect_timeout))
            result = answer.get("result") if answer else None
            if isinstance(result, dict):
                profile.revision = str(result.get("protocolVersion") or revision)
                profile.capabilities = result.get("capabilities") or {}
                profile.server_info = result.get("serverInfo") or {}
                peer.send(done.line, timeout=config.deadline, wait=True)
                return _catalogue(peer, profile, config, target, until)
            alive = peer.alive()
        stderr = peer.trace.stderr_tail or getattr(peer, "stderr_tail", "")
        if not alive:
            break
    raise RuntimeError(f"the server answered neither server/discover nor initialize: {stderr[-300:]}")


def _catalogue(peer: Peer, profile: Profile, config: Config, target: Target, until: float | None) -> Profile:
    caps = profile.capabilities
    for method, key in (("tools/list", "tools"), ("prompts/list", "prompts"), ("resources/list", "resources")):
        if key in caps:
            setattr(profile, key, _pages(peer, profile, method, key, config.connect_timeout, until))
    set_tools = getattr(target, "set_tools", None)
    if set_tools is not None:
        set_tools(profile.tools)  # 2026-07-28 HTTP: the x-mcp-header annotations become headers
    return profile


# -- running examples ---------------------------------------------------------------------------------


def run_steps(
    target: Target,
    profile: Profile,
    steps: Sequence[Step],
    *,
    deadline: float,
    settle: float = 0.0,
    startup: float = STARTUP_S,
    until: float | None = None,
) -> tuple[Observation, list[Entry]]:
    """Runs a whole example (prologue included) on a fresh session; returns what happened."""
    with target.open() as peer:
        opening = prologue(profile, startup)
        obs = execute(peer, [*opening, *steps], deadline=deadline, settle=settle, barrier=profile.probe, until=until)
    obs.stderr_tail = peer.trace.stderr_tail
    return obs, peer.trace.entries
