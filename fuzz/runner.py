"""The fuzzing run: learn the server, then fuzz each tool and the protocol, and keep minimal findings.

Theory of operation: :func:`learn` opens a session on the :class:`~fuzz.wire.Target` (a stdio
command, or an HTTP URL with or without the command that serves it), detects the era (a
2026-07-28 ``server/discover`` probe, else the legacy ``initialize`` handshake on a fresh
session, restarting the process if the probe killed it) and reads the catalogue into a
:class:`~fuzz.exchange.Profile`. Then the work is cut into units: one per tool, one per
protocol kind (:data:`~fuzz.messages.PROTOCOL_KINDS`), the stateful machine, and the list check.
With ``time_budget`` each unit gets an equal share of what is left when it starts (time a unit
does not use goes to the next), so every phase is reached however slow the server is.

A unit is one Hypothesis test built at run time: the example is a list of steps (a
``tools/call`` with generated arguments, or a few protocol messages), always followed by a
liveness probe. Isolation (``isolation``):

- ``"auto"`` (default): examples share a session, which is replaced as soon as one misbehaves
  (a crash, a hang or any violation). A violation seen on a session that earlier examples used
  is run again on a fresh session before it counts, so every finding stands on its own, and its
  trace replays from a fresh process. This is fast (no start-up per example) and safe.
- ``"process"``: a fresh process per example (over HTTP with a command: the server restarted).

An oracle violation raises the oracle's own exception class; Hypothesis shrinks each distinct
failure to its minimal example and replays it last, so the exception that comes out carries the
minimal exchange, which becomes a :class:`Finding`. Each finding is then replayed once more on a
fresh session: a missed deadline with a longer one (``confirm_deadline``), so a server that was
only slow under load becomes an ``answer-slow`` warning rather than a hang.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky, HypothesisWarning

from .exchange import MODERN_REVISION, Observation, Profile, Step, dumps, execute, prologue, request
from .messages import PROTOCOL_KINDS, protocol_steps
from .oracles import LISTS, ORACLES, OracleFailure, Violation, check, failure_class, list_stability, slow_answer
from .schemas import arguments, schema_problem
from .wire import Entry, Peer, StdioTarget, Target, decode_line

__all__ = [
    "PHASES",
    "SEVERITIES",
    "Config",
    "Finding",
    "Report",
    "UnitStats",
    "database_key",
    "fuzz",
    "learn",
    "make_target",
    "run_steps",
]

log = logging.getLogger("mcpwire.fuzz.runner")

PROBE_ID = "mcpwire-fuzz-probe"
LEGACY_REVISIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PHASES = ("tools", "protocol", "stateful", "lists")
#: finding severities, most severe first
SEVERITIES = ("error", "warning")
#: how long the first request of a fresh session may take (the server may still be starting)
STARTUP_S = 20.0
#: progress lines while a unit runs: at most one per this many seconds
PROGRESS_EVERY_S = 5.0


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
    deny: Sequence[str] = ()
    allow: Sequence[str] | None = None
    phases: Sequence[str] = PHASES
    #: the protocol phase's kinds (default: all of them)
    protocol_kinds: Sequence[str] = PROTOCOL_KINDS
    #: rule sequences of the stateful machine, and rules per sequence
    machine_runs: int = 10
    machine_steps: int = 12
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    progress: Callable[[str], None] | None = None

    @property
    def slow_deadline(self) -> float:
        return self.confirm_deadline if self.confirm_deadline is not None else 3 * self.deadline


@dataclass(slots=True)
class Finding:
    """One minimal failing example and what it broke."""

    violation: Violation
    phase: str
    tool: str | None
    observation: Observation
    entries: list[Entry]
    flaky: bool = False
    #: whether a replay on a fresh session showed it again (None: not replayed)
    reproduced: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.violation.to_json()
        out.update({"phase": self.phase, "tool": self.tool, "flaky": self.flaky, "reproduced": self.reproduced})
        out["input"] = [s.line.decode("utf-8", "replace") for s in self.observation.steps if not s.setup]
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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "unit": self.unit,
            "examples": self.examples,
            "duration_s": round(self.duration, 3),
            "findings": self.findings,
            "first_failure": self.first_failure,
            "cut_short": self.cut_short,
            "error": self.error,
        }
        if self.unit == "stateful":
            out["rules"] = dict(sorted(self.rules.items()))
        return out


@dataclass(slots=True)
class Report:
    profile: Profile | None
    findings: list[Finding] = field(default_factory=list)
    examples: int = 0
    skipped_tools: list[str] = field(default_factory=list)
    units: list[UnitStats] = field(default_factory=list)
    duration: float = 0.0
    error: str | None = None

    def failed(self, fail_on: str = "warning") -> bool:
        """Whether the run found something at ``fail_on`` severity or above (``"warning"``, the
        default: any finding; ``"error"``: errors only), or could not go on (``error``)."""
        if fail_on not in SEVERITIES:
            raise ValueError(f"fail_on must be one of {', '.join(SEVERITIES)}, not {fail_on!r}")
        worst = SEVERITIES.index(fail_on)
        return self.error is not None or any(
            SEVERITIES.index(f.violation.info.severity) <= worst for f in self.findings
        )


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


def _pages(peer: Peer, profile: Profile, method: str, key: str, timeout: float) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(100):
        params = {"cursor": cursor} if cursor is not None else None
        answer = _request_answer(peer, request(f"learn-{method}-{page}", method, profile.params(params)), timeout)
        result = answer.get("result") if answer else None
        if not isinstance(result, dict):
            break
        items.extend(i for i in result.get(key, []) if isinstance(i, dict))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or cursor in seen:
            break
        seen.add(cursor)
    return items


def learn(config: Config, target: Target) -> Profile:
    """Detects the era and reads tools, prompts and resources (raises ``RuntimeError`` if it can't)."""
    era = config.era
    described = target.describe()
    if era in ("auto", "modern"):
        with target.open() as peer:
            probe_profile = Profile(described, "modern", MODERN_REVISION)
            probe_timeout = config.connect_timeout if era == "modern" else min(config.connect_timeout, 5.0)
            modern_answer = _request_answer(peer, probe_profile.probe("learn-discover"), probe_timeout)
            result = modern_answer.get("result") if modern_answer else None
            if isinstance(result, dict) and MODERN_REVISION in (result.get("supportedVersions") or []):
                profile = Profile(described, "modern", MODERN_REVISION, result.get("capabilities") or {})
                profile.server_info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
                return _catalogue(peer, profile, config, target)
        if era == "modern":
            raise RuntimeError("the server did not answer server/discover for 2026-07-28")
    stderr = ""
    for revision in LEGACY_REVISIONS:
        # a fresh session each time: the probe (or a refused revision) may have upset or killed the last one
        with target.open() as peer:
            profile = Profile(described, "legacy", revision)
            init, done = prologue(profile)
            answer = _request_answer(peer, init, config.connect_timeout)
            result = answer.get("result") if answer else None
            if isinstance(result, dict):
                profile.revision = str(result.get("protocolVersion") or revision)
                profile.capabilities = result.get("capabilities") or {}
                profile.server_info = result.get("serverInfo") or {}
                peer.send(done.line, timeout=config.deadline, wait=True)
                return _catalogue(peer, profile, config, target)
            alive = peer.alive()
        stderr = peer.trace.stderr_tail or getattr(peer, "stderr_tail", "")
        if not alive:
            break
    raise RuntimeError(f"the server answered neither server/discover nor initialize: {stderr[-300:]}")


def _catalogue(peer: Peer, profile: Profile, config: Config, target: Target) -> Profile:
    caps = profile.capabilities
    if "tools" in caps:
        profile.tools = _pages(peer, profile, "tools/list", "tools", config.connect_timeout)
    if "prompts" in caps:
        profile.prompts = _pages(peer, profile, "prompts/list", "prompts", config.connect_timeout)
    if "resources" in caps:
        profile.resources = _pages(peer, profile, "resources/list", "resources", config.connect_timeout)
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
) -> tuple[Observation, list[Entry]]:
    """Runs a whole example (prologue included) on a fresh session; returns what happened."""
    with target.open() as peer:
        opening = prologue(profile, startup)
        obs = execute(peer, [*opening, *steps], deadline=deadline, settle=settle, barrier=profile.probe)
    obs.stderr_tail = peer.trace.stderr_tail
    return obs, peer.trace.entries


def _troubled(obs: Observation) -> bool:
    return (
        obs.died_after is not None
        or bool(obs.timed_out)
        or obs.write_failed is not None
        or obs.barrier_timed_out is not None
        or obs.oversized
    )


class _Sessions:
    """Isolation (see the module docstring): a shared session replaced after trouble, or a fresh one."""

    def __init__(self, config: Config, target: Target, profile: Profile) -> None:
        self.config = config
        self.target = target
        self.profile = profile
        self.peer: Peer | None = None

    def fresh(self, steps: Sequence[Step], deadline: float | None = None) -> tuple[Observation, list[Entry]]:
        """The steps on a session of their own (over HTTP with ``isolation="process"``: a restarted server)."""
        self.close()
        restart = getattr(self.target, "restart", None)
        if self.config.isolation == "process" and restart is not None:
            restart()
        return run_steps(
            self.target,
            self.profile,
            steps,
            deadline=self.config.deadline if deadline is None else deadline,
            settle=self.config.settle,
            startup=self.config.connect_timeout,
        )

    def run(self, steps: Sequence[Step]) -> tuple[Observation, list[Entry], bool]:
        """Runs an example; the flag says whether it ran on a fresh session (its trace stands alone)."""
        if self.config.isolation == "process":
            obs, entries = self.fresh(steps)
            return obs, entries, True
        fresh = self.peer is None
        if self.peer is None:
            self.peer = self.target.open()
        peer = self.peer
        mark = len(peer.trace.entries)
        setup = prologue(self.profile, self.config.connect_timeout) if fresh else []
        obs = execute(
            peer, [*setup, *steps], deadline=self.config.deadline, settle=self.config.settle, barrier=self.profile.probe
        )
        entries = list(peer.trace.entries[mark:])
        if _troubled(obs):
            self.close()
            obs.stderr_tail = peer.trace.stderr_tail
        return obs, entries, fresh

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()
            self.peer = None


def database_key(target: Target, unit: str) -> bytes:
    """The key of a unit's examples in the example database: its target (command or URL) and its
    name, so a database shared by several servers, or by both eras of one, keeps them apart."""
    described = target.describe()
    return hashlib.sha256(repr((described.get("argv"), described.get("url"), unit)).encode()).digest()


def _database(config: Config) -> ExampleDatabase | None:
    if config.database is None:
        return None
    return DirectoryBasedExampleDatabase(str(config.database))


def _settings(config: Config) -> settings:
    return settings(
        max_examples=config.max_examples,
        deadline=None,
        database=_database(config),
        derandomize=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
        print_blob=False,
        verbosity=Verbosity.quiet,  # the CLI's stdout is the report (--json)
    )


def _collect(exc: BaseException, flaky: bool = False) -> Iterator[tuple[OracleFailure, bool]]:
    if isinstance(exc, OracleFailure):
        yield exc, flaky
    elif isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _collect(inner, flaky or isinstance(exc, Flaky))


class _OutOfTime(BaseException):
    """Ends a unit whose share of the time budget is used up (Hypothesis lets it through at once)."""


@contextmanager
def _quiet_hypothesis() -> Iterator[None]:
    logger = logging.getLogger("hypothesis")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # the strategy of a large request schema has a large repr, which Hypothesis builds for
            # its statistics when a filter retries, and warns about: noise on the CLI's stderr
            warnings.filterwarnings("ignore", "Generating overly large repr", HypothesisWarning)
            yield
    finally:
        logger.setLevel(level)


@dataclass(slots=True)
class _Run:
    """One fuzzing run's shared state."""

    config: Config
    target: Target
    profile: Profile
    report: Report
    #: one shared session for all units (a fresh one after any trouble; see _Sessions)
    sessions: _Sessions

    def say(self, message: str) -> None:
        if self.config.progress is not None:
            self.config.progress(message)

    def found(self, tag: str, finding: Finding) -> None:
        self.report.findings.append(finding)
        self.say(f"{tag}: FOUND [{finding.violation.oracle}] {finding.violation.message[:200]}")


def _confirm(run: _Run, finding: Finding) -> None:
    """Replays a finding on a fresh session; a missed deadline is replayed with the longer one."""
    config = run.config
    oracle = finding.violation.oracle
    deadline = config.slow_deadline if oracle == "answer-deadline" else config.deadline
    steps = [s for s in finding.observation.steps if not s.setup]
    try:
        obs, _ = run_steps(
            run.target, run.profile, steps, deadline=deadline, settle=config.settle, startup=config.connect_timeout
        )
    except (OSError, RuntimeError) as exc:  # the server could not be started again
        log.info("could not replay a finding: %s", exc)
        return
    again = check(obs, run.profile)
    finding.reproduced = any(v.oracle == oracle for v in again)
    if finding.reproduced:
        return
    slow = slow_answer(finding.violation, again, deadline)
    if slow is not None:
        finding.violation = slow
    else:
        finding.flaky = True


def _phase(
    run: _Run,
    name: str,
    tool: str | None,
    strategy: st.SearchStrategy[list[Step]],
    stop_at: float | None,
) -> None:
    config, profile = run.config, run.profile
    sessions = run.sessions
    tag = f"{name}:{tool}" if tool else name
    stats = UnitStats(tag)
    run.report.units.append(stats)
    started = time.monotonic()
    state: dict[str, Any] = {"failing": False, "said": started}
    #: the smallest failing example seen so far per oracle, in case the budget stops shrinking
    smallest: dict[str, tuple[int, Violation, Observation, list[Entry]]] = {}
    # shrinking may go past the unit's share, but not by more than the share again
    shrink_until = None if stop_at is None else stop_at + max(stop_at - started, 1.0)

    def example(steps: list[Step]) -> None:
        now = time.monotonic()
        if stop_at is not None and now > stop_at and not state["failing"]:
            stats.cut_short = True
            raise _OutOfTime
        if shrink_until is not None and now > shrink_until:
            stats.cut_short = True
            raise _OutOfTime  # shrinking took too long: the smallest failures so far are reported
        stats.examples += 1
        body = [*steps, profile.probe(PROBE_ID)]
        obs, entries, fresh = sessions.run(body)
        violations = check(obs, profile)
        if violations and not fresh:
            sessions.close()  # seen on a used session: it counts only if a fresh one shows it too
            obs, entries = sessions.fresh(body)
            violations = check(obs, profile)
        if violations:
            sessions.close()
            first = violations[0]
            if first.oracle == "server-alive" and not run.target.restartable:
                # the server is gone for good: every later example would "fail" the same way, so
                # shrinking would only make up a wrong minimal input; keep this one as it is
                state["gone"] = (first, obs, entries)
                raise _OutOfTime
            state["failing"] = True
            if stats.first_failure is None:
                stats.first_failure = stats.examples
            size = sum(len(s.line) for s in obs.steps)
            if first.oracle not in smallest or size < smallest[first.oracle][0]:
                smallest[first.oracle] = (size, first, obs, entries)
            failure = failure_class(first.oracle)(first, obs)
            failure.entries = entries  # type: ignore[attr-defined]
            raise failure
        now = time.monotonic()
        if now - state["said"] >= PROGRESS_EVERY_S:
            state["said"] = now
            run.say(f"{tag}: {stats.examples}/{config.max_examples} examples")

    test = given(strategy)(example)
    if config.seed is not None:
        test = seed(config.seed)(test)
    test = _settings(config)(test)
    test._hypothesis_internal_database_key = database_key(run.target, tag)  # type: ignore[attr-defined]
    run.say(f"{tag}: fuzzing (up to {config.max_examples} examples)")
    try:
        with _quiet_hypothesis():
            test()
    except _OutOfTime:
        if "gone" in state:
            first, obs, entries = state["gone"]
            note = "; not shrunk: the server cannot be restarted (give its command after -- to have it restarted)"
            violation = Violation(first.oracle, first.message + note, first.step)
            stats.findings += 1
            run.found(tag, Finding(violation, name, tool, obs, entries))
            run.report.error = f"the server at {run.target.describe().get('url')} went away; the run stopped"
        for _, violation, obs, entries in smallest.values():
            note = "; shrinking was stopped by the time budget (the smallest failing example so far)"
            stopped = Violation(violation.oracle, violation.message + note, violation.step)
            finding = Finding(stopped, name, tool, obs, entries)
            _confirm(run, finding)
            stats.findings += 1
            run.found(tag, finding)
    except (OracleFailure, BaseExceptionGroup) as exc:
        seen: set[tuple[str, str]] = set()
        for failure, flaky in _collect(exc):
            key = (failure.violation.oracle, failure.violation.message)
            if key in seen or failure.observation is None:
                continue
            seen.add(key)
            entries = getattr(failure, "entries", [])
            finding = Finding(failure.violation, name, tool, failure.observation, entries, flaky)
            _confirm(run, finding)
            stats.findings += 1
            run.found(tag, finding)
        if not seen:
            _unit_error(run, stats, exc)
    except Exception as exc:  # the unit could not run (e.g. no example satisfies a schema): say so, go on
        _unit_error(run, stats, exc)
    finally:
        if stats.findings:
            sessions.close()
        stats.duration = time.monotonic() - started
        run.report.examples += stats.examples


def _unit_error(run: _Run, stats: UnitStats, exc: BaseException) -> None:
    log.warning("%s stopped", stats.unit, exc_info=exc)
    stats.error = f"{type(exc).__name__}: {str(exc)[:300]}"
    run.say(f"{stats.unit}: stopped: {stats.error}")


def _tool_steps(profile: Profile, tool: dict[str, Any]) -> st.SearchStrategy[list[Step]]:
    name = tool["name"]
    schema = tool.get("inputSchema")
    if schema_problem(schema) is not None:  # reported as tool-schema by the lists phase; still call it
        schema = {"type": "object"}

    def build(case: tuple[bool, Any]) -> list[Step]:
        valid, args = case
        params = profile.params({"name": name, "arguments": args})
        return [request(1, "tools/call", params, tool=name, valid=valid)]

    return arguments(schema).map(build)


def _selected(config: Config, tools: list[dict[str, Any]], report: Report | None) -> list[dict[str, Any]]:
    chosen = []
    for tool in tools:
        name = str(tool.get("name"))
        if name in config.deny or (config.allow is not None and name not in config.allow):
            if report is not None:
                report.skipped_tools.append(name)
            continue
        chosen.append(tool)
    return chosen


def _check_lists(run: _Run) -> None:
    """list-stable: a fresh session lists the tools, prompts and resources (those the server has)
    twice each, and each list must be the one learnt at the start."""
    config, profile = run.config, run.profile
    methods = [m for m, (key, _) in LISTS.items() if key in profile.capabilities]
    if not methods:
        return
    stats = UnitStats("lists")
    run.report.units.append(stats)
    started = time.monotonic()
    steps = [request(f"{method}-{n}", method, profile.params(None)) for method in methods for n in (1, 2)]
    obs, entries = run_steps(
        run.target, profile, steps, deadline=config.deadline, settle=config.settle, startup=config.connect_timeout
    )
    stats.examples, stats.duration = 1, time.monotonic() - started
    run.report.examples += 1
    seen: set[str] = set()
    for violation in check(obs, profile):  # the list answers: schema shape, tool-schema (SV-29)
        if violation.oracle not in seen:
            seen.add(violation.oracle)
            stats.findings += 1
            finding = Finding(violation, "lists", None, obs, entries)
            _confirm(run, finding)
            run.found("lists", finding)
    changed = list_stability(obs, profile)
    if changed:
        stats.findings += 1
        stats.first_failure = 1
        violation = Violation("list-stable", "; ".join(v.message for v in changed) + " (in a new session)", None)
        run.found("lists", Finding(violation, "lists", None, obs, entries, reproduced=True))


def _stateful(run: _Run, stop_at: float | None) -> None:
    from .stateful import MachineStats, machine_for, run_machine

    config, profile = run.config, run.profile
    stats = UnitStats("stateful")
    run.report.units.append(stats)
    started = time.monotonic()
    tools = _selected(config, profile.tools, None)
    counts = MachineStats()
    machine = machine_for(
        run.target,
        profile,
        deadline=config.deadline,
        tools=tools,
        stop_at=stop_at,
        startup=config.connect_timeout,
        stats=counts,
    )
    run.say(f"stateful: {config.machine_runs} rule sequences of up to {config.machine_steps} rules")
    try:
        with _quiet_hypothesis():
            run_machine(
                machine,
                max_examples=config.machine_runs,
                steps=config.machine_steps,
                seed=config.seed,
                database=_database(config),
                # the rule sequences of one server (and era) are kept apart from any other's
                database_key=database_key(run.target, f"stateful-{profile.era}"),
            )
    except (OracleFailure, BaseExceptionGroup) as exc:
        found = list(_collect(exc))
        if not found:
            raise
        for failure, flaky in found:
            assert failure.observation is not None
            entries = getattr(failure, "entries", [])
            finding = Finding(failure.violation, "stateful", None, failure.observation, entries, flaky)
            if failure.violation.oracle != "list-stable":
                _confirm(run, finding)
            stats.findings += 1
            run.found("stateful", finding)
    finally:
        stats.examples = counts.runs
        stats.rules = dict(counts.rules)
        stats.first_failure = counts.first_failure
        stats.cut_short = stop_at is not None and time.monotonic() > stop_at
        stats.duration = time.monotonic() - started
        run.report.examples += counts.runs


def fuzz(config: Config) -> Report:
    """Runs every phase within the budgets; never raises for what the server does."""
    start = time.monotonic()
    deadline_at = start + config.time_budget if config.time_budget else None
    try:
        target = make_target(config)
    except ValueError as exc:
        return Report(None, error=str(exc))
    try:
        try:
            profile = learn(config, target)
        except (RuntimeError, OSError) as exc:
            return Report(None, error=str(exc), duration=time.monotonic() - start)
        report = Report(profile)
        run = _Run(config, target, profile, report, _Sessions(config, target, profile))
        run.say(
            f"server {profile.server_info.get('name', '?')} ({profile.transport}): {profile.era} {profile.revision}, "
            f"{len(profile.tools)} tools, {len(profile.prompts)} prompts, {len(profile.resources)} resources"
        )
        # the protocol phase names real tools too, but only those the allow/deny lists let through
        allowed = dataclasses.replace(profile, tools=_selected(config, profile.tools, None))
        units: list[tuple[str, Any]] = []
        if "tools" in config.phases:
            units += [("tools", t) for t in _selected(config, profile.tools, report)]
        if "protocol" in config.phases:
            # framing (pieces, line ends, lines) exists only on a byte stream: over HTTP a body is a message
            kinds = [k for k in config.protocol_kinds if k != "framing" or target.transport == "stdio"]
            units += [("protocol", kind) for kind in kinds]
        if "stateful" in config.phases:
            units.append(("stateful", None))
        for index, (name, item) in enumerate(units):
            if report.error is not None:
                break
            stop_at = None
            if deadline_at is not None:
                now = time.monotonic()
                stop_at = now + max(0.0, deadline_at - now) / (len(units) - index)  # a fair share of what is left
            if name == "tools":
                _phase(run, "tools", str(item["name"]), _tool_steps(profile, item), stop_at)
            elif name == "protocol":
                _phase(run, f"protocol-{item}", None, protocol_steps(allowed, item), stop_at)
            else:
                run.sessions.close()
                _stateful(run, stop_at)
        run.sessions.close()
        if "lists" in config.phases and report.error is None:
            _check_lists(run)
        report.duration = time.monotonic() - start
        assert all(f.violation.oracle in ORACLES for f in report.findings)
        return report
    finally:
        target.close()
