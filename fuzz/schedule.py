"""The run's schedule: units of work, given examples in rounds, within a time budget that is a bound.

Theory of operation: the work is cut into units: the list check (first: it is cheap), one unit per
tool (those :func:`~fuzz.runner.select_tools` allows), one per protocol kind
(:data:`~fuzz.messages.PROTOCOL_KINDS`), and the stateful machine. Units get their examples in
*rounds*: in round ``r`` every unit that is not done is brought up to ``targets[r]`` examples
(one, then 10 %, 20 %, 40 %, 80 % and all of ``max_examples``), so every unit gets examples before
any gets many, however slow the server or however early a bug is found. Within a round each unit
may use an equal share of the time left (time a unit does not use goes to the next). Each round
is a new Hypothesis run, which starts from the simplest example again: an example an earlier round
ran is rejected (not run, not counted); the stateful machine, whose sequences cannot be told apart
before they run, gets one sequence in the first round and all the others in the second.

A unit's examples in one round are one Hypothesis test built at run time (a fresh seed per round,
derived from ``seed``): the example is a list of steps (a ``tools/call`` with generated
arguments, or a few protocol messages), always followed by a liveness probe. Isolation:

- ``"auto"`` (default): examples share a session, which is replaced as soon as one misbehaves.
  A violation seen on a session that earlier examples used is run again on a fresh session
  before it counts, so every finding stands on its own and its trace replays from a fresh process.
- ``"process"``: a fresh process per example (over HTTP with a command: the server restarted).

A violation raises its oracle's exception class; Hypothesis shrinks the failure to its minimal
example, which becomes a finding, grouped by root cause (:mod:`fuzz.clusters`): a later failing
example whose input has the shape of a cause already found is counted as a member of it, not
raised, so the search goes on for other causes. Shrinking one finding may take ``shrink_time``
seconds at most (then the smallest failing example so far is reported, marked as such). Each
finding is replayed once more on a fresh session: a missed deadline with a longer one
(``confirm_deadline``), so a server that was only slow becomes an ``answer-slow`` warning.

The budget: :class:`Clock` holds the end of the run. Every wait of the exchange stops there (an
example cut short counts for nothing, see :attr:`~fuzz.exchange.Observation.cut`), and nothing
new (example, replay, unit) starts after it. Units that got fewer than ``min_examples`` examples
(or none) are a coverage gap, reported and failing the run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky, HypothesisWarning, Unsatisfiable

from .clusters import ABLATABLE, FEATURES, Clusters, ablate, cause_unit, features
from .exchange import Observation, Profile, Step, declared_seconds, execute, pace, prologue, request
from .messages import protocol_steps
from .oracles import LISTS, ORACLES, OracleFailure, Violation, check, failure_class, list_stability, slow_answer
from .runner import (
    BUDGET_GRACE_S,
    Config,
    EndpointRefused,
    Finding,
    OutOfTime,
    Report,
    UnitStats,
    learn,
    make_target,
    run_steps,
    select_tools,
)
from .schemas import arguments, is_valid, schema_problem, validator_for
from .wire import Entry, Peer, Target, end_every_process

__all__ = ["Clock", "database_key", "declared_seconds", "rounds", "run", "shrink_time", "tool_steps"]

log = logging.getLogger("mcpwire.fuzz.schedule")

PROBE_ID = "mcpwire-fuzz-probe"
#: progress lines while a unit runs: at most one per this many seconds
PROGRESS_EVERY_S = 5.0
#: with a time budget, one finding is shrunk for at most this share of it (and at least the floor)
SHRINK_BUDGET_SHARE = 0.1
SHRINK_FLOOR_S = 2.0


@dataclass(slots=True)
class Clock:
    """The run's time: its start and, with a budget, its end (``until``, a ``time.monotonic()`` moment)."""

    start: float
    until: float | None

    def left(self) -> float | None:
        return None if self.until is None else max(0.0, self.until - time.monotonic())

    def over(self, now: float | None = None) -> bool:
        return self.until is not None and (time.monotonic() if now is None else now) >= self.until

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def shrink_time(config: Config) -> float:
    """Seconds one finding may be shrunk for: ``shrink_time``, and with a budget at most a tenth of
    it (at least :data:`SHRINK_FLOOR_S`), so shrinking one bug never starves the other units."""
    if config.time_budget is None:
        return config.shrink_time
    return min(config.shrink_time, max(SHRINK_FLOOR_S, config.time_budget * SHRINK_BUDGET_SHARE))


def rounds(max_examples: int) -> list[int]:
    """The examples every unit has after each round: one, then doubling from a tenth of ``max_examples``."""
    if max_examples <= 1:
        return [1]
    targets = [1]
    n = max(2, math.ceil(max_examples / 10))
    while n < max_examples:
        targets.append(n)
        n *= 2
    return [*targets, max_examples]


def _troubled(obs: Observation) -> bool:
    return (
        obs.died_after is not None
        or bool(obs.timed_out)
        or obs.write_failed is not None
        or obs.barrier_timed_out is not None
        or obs.oversized
        or obs.cut
    )


class _Sessions:
    """Isolation (see the module docstring): a shared session replaced after trouble, or a fresh one."""

    def __init__(self, config: Config, target: Target, profile: Profile, clock: Clock) -> None:
        self.config, self.target, self.profile, self.clock = config, target, profile, clock
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
            until=self.clock.until,
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
            peer,
            [*setup, *steps],
            deadline=self.config.deadline,
            settle=self.config.settle,
            barrier=self.profile.probe,
            until=self.clock.until,
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


def _settings(config: Config, max_examples: int, first_round: bool) -> settings:
    # the database's examples (failures of earlier runs) are replayed in the first round only
    phases = [Phase.explicit, Phase.reuse] if first_round else []
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=_database(config),
        derandomize=False,
        phases=[*phases, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
        print_blob=False,
        verbosity=Verbosity.quiet,  # the CLI's stdout is the report (--json)
    )


def _round_seed(config: Config, unit: str, round_no: int) -> int | None:
    if config.seed is None:
        return None
    if round_no == 0:
        return config.seed
    digest = hashlib.sha256(f"{config.seed}/{unit}/{round_no}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _collect(exc: BaseException, flaky: bool = False) -> Iterator[tuple[OracleFailure, bool]]:
    if isinstance(exc, OracleFailure):
        yield exc, flaky
    elif isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _collect(inner, flaky or isinstance(exc, Flaky))


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
class Unit:
    """One unit of work and its state across rounds."""

    tag: str
    phase: str
    tool: str | None
    strategy: st.SearchStrategy[list[Step]] | None
    stats: UnitStats
    #: the examples it should have in the end (the stateful machine: rule sequences)
    limit: int
    done: bool = False
    #: the stateful machine's counts, kept across rounds
    counts: Any = None
    #: digests of the examples run, across rounds
    seen: set[bytes] = field(default_factory=set)


@dataclass(slots=True)
class _Run:
    """One fuzzing run's shared state."""

    config: Config
    target: Target
    profile: Profile
    report: Report
    #: one shared session for all units (a fresh one after any trouble; see _Sessions)
    sessions: _Sessions
    clock: Clock
    clusters: Clusters = field(default_factory=Clusters)

    def say(self, message: str) -> None:
        if self.config.progress is not None:
            left = self.clock.left()
            status = f"{self.report.examples} examples, {len(self.report.findings)} findings" + (
                "" if left is None else f", {left:.0f}s left"
            )
            self.config.progress(f"{message}  [{status}]")

    def found(self, tag: str, finding: Finding) -> None:
        finding.found_at = self.clock.elapsed()
        self.report.findings.append(finding)
        self.say(f"{tag}: FOUND [{finding.violation.oracle}] {finding.violation.message[:200]}")


def _confirm(run: _Run, finding: Finding) -> None:
    """Replays a finding on a fresh session; a missed deadline is replayed with the longer one."""
    config = run.config
    oracle = finding.violation.oracle
    if run.clock.over():
        return  # not confirmed: no time left (reproduced stays None)
    deadline = config.slow_deadline if oracle == "answer-deadline" else config.deadline
    steps = [s for s in finding.observation.steps if not s.setup]
    try:
        obs, _ = run_steps(
            run.target,
            run.profile,
            steps,
            deadline=deadline,
            settle=config.settle,
            startup=config.connect_timeout,
            until=run.clock.until,
        )
    except (OSError, RuntimeError) as exc:  # the server could not be started again
        log.info("could not replay a finding: %s", exc)
        return
    if obs.cut:
        return
    again = check(obs, run.profile)
    finding.reproduced = any(v.oracle == oracle for v in again)
    if finding.reproduced:
        return
    slow = slow_answer(dataclasses.replace(finding.violation, message=finding.detail), again, deadline)
    if slow is not None:
        finding.violation, finding.detail = slow.at(run.profile), slow.message
        finding.violations = [finding.violation]
    else:
        finding.flaky = True


def _essential(run: _Run, oracle: str, obs: Observation) -> dict[str, Any]:
    """The trigger shape of a minimal failing example without its bystanders: each feature that can
    be taken out (:func:`~fuzz.clusters.ablate`) is, in a run of its own on a fresh session; when
    the failure stays, the feature was not the cause (an id beyond 2^53 on a method in the wrong
    case: the id, or the case, or both)."""
    shape = features(obs.steps)
    body = [s for s in obs.steps if not s.setup]
    for name in [f for f in FEATURES if f in shape and f in ABLATABLE]:
        if run.clock.over():
            break
        try:
            trial, _ = run.sessions.fresh(ablate(body, frozenset({name})))
        except (OSError, RuntimeError) as exc:
            log.info("could not run an example without %s: %s", name, exc)
            break
        if trial.cut:
            break
        if any(v.oracle == oracle for v in check(trial, run.profile)):
            del shape[name]  # it fails without it: a bystander
    return shape


def _same_as_plain(run: _Run, unit: Unit, oracle: str, obs: Observation, shape: dict[str, Any]) -> bool:
    """Whether a failure with named features is the unit's featureless cause seen before: it fails
    the same way once every feature that can be taken out is."""
    if run.clusters.featureless(oracle, unit.tag) is None or not shape.keys() & ABLATABLE:
        return False
    body = [s for s in obs.steps if not s.setup]
    trial, _ = run.sessions.fresh(ablate(body, frozenset(shape.keys() & ABLATABLE)))
    return not trial.cut and any(v.oracle == oracle for v in check(trial, run.profile))


def _record(
    run: _Run, unit: Unit, violation: Violation, obs: Observation, entries: list[Entry], flaky: bool, note: str = ""
) -> None:
    """A shrunk failure: a new finding if its root cause is new, else one more member of its cluster."""
    shape = {} if violation.oracle == "list-stable" else _essential(run, violation.oracle, obs)
    cluster, new = run.clusters.add(violation.oracle, shape, _cause_unit(unit, violation, obs), unit.tag)
    if not new:
        unit.stats.known += 1
        return
    others = [v for v in check(obs, run.profile) if (v.oracle, v.message) != (violation.oracle, violation.message)]
    finding = Finding(violation, unit.phase, unit.tool, obs, entries, flaky, violations=[violation, *others])
    finding.cluster, finding.detail = cluster, violation.message + note
    _headline(finding)
    unit.stats.findings += 1
    run.found(unit.tag, finding)


def _cause_unit(unit: Unit, violation: Violation, obs: Observation) -> str:
    """The unit a cause without a named trigger shape belongs to (see :func:`~fuzz.clusters.cause_unit`)."""
    step = obs.steps[violation.step] if violation.step is not None and 0 <= violation.step < len(obs.steps) else None
    return cause_unit(violation.oracle, unit.tag, None if step is None else step.tool)


def _headline(finding: Finding) -> None:
    """The finding's message: its trigger and effect (as its current oracle judges it), then the detail."""
    seen = finding.violation
    message = finding.detail if finding.cluster is None else finding.cluster.headline(finding.detail, seen.oracle)
    finding.violation = dataclasses.replace(seen, message=message)
    finding.violations[0] = finding.violation


def _confirm_all(run: _Run) -> None:
    """Every finding replayed on a fresh session, after the rounds, while the budget lasts (a
    replay is no example: it must not take time from a unit's share); one left unconfirmed for
    want of time keeps ``reproduced`` None."""
    for finding in run.report.findings:
        if run.clock.over():
            break
        if finding.violation.oracle in ("list-stable", "sse-endpoint") or finding.reproduced is not None:
            continue
        _confirm(run, finding)  # may turn a missed deadline into answer-slow
        _headline(finding)


# -- one round of one unit -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Attempt:
    """The state of one Hypothesis test (one round of one unit)."""

    started: float
    share_end: float | None
    ran: int = 0
    failing: bool = False
    shrink_until: float | None = None
    said: float = 0.0
    #: the smallest failing example seen per oracle, in case the time stops the shrinking
    smallest: dict[str, tuple[int, Violation, Observation, list[Entry]]] = field(default_factory=dict)
    gone: tuple[Violation, Observation, list[Entry]] | None = None
    #: the examples earlier rounds ran (see _example)
    earlier: frozenset[bytes] = frozenset()


def _example(run: _Run, unit: Unit, attempt: _Attempt, steps: list[Step]) -> None:
    """One example of a unit (the body of its Hypothesis test)."""
    profile, stats, sessions = run.profile, unit.stats, run.sessions
    now = time.monotonic()
    # the first example of a round always runs (within the budget): every unit gets examples
    past_share = attempt.share_end is not None and now > attempt.share_end and attempt.ran > 0
    if run.clock.over(now) or (not attempt.failing and past_share):
        stats.cut_short = True
        raise OutOfTime
    if attempt.shrink_until is not None and now > attempt.shrink_until:
        stats.cut_short = True
        raise OutOfTime  # shrinking took too long: the smallest failures so far are reported
    # every round is a new Hypothesis run, which starts again from the simplest example: one an
    # earlier round ran is rejected (Hypothesis draws another, and does not count it); the same set
    # all through this run, shrinking included, so every example gets the same verdict each time
    key = hashlib.blake2b(b"\n".join(s.line for s in steps), digest_size=16).digest()
    if key in attempt.earlier:
        reject()
    unit.seen.add(key)
    stats.examples += 1
    attempt.ran += 1
    if not attempt.failing and (known := run.clusters.predicts(features(steps), unit.tag)) is not None:
        known.predicted[unit.tag] += 1  # the whole trigger shape of a cause this unit showed: not run
        stats.known += 1
        return
    body = [*steps, profile.probe(PROBE_ID)]
    obs, entries, fresh = sessions.run(body)
    violations = [] if obs.cut else check(obs, profile)
    if violations and not fresh and not attempt.failing:
        known = run.clusters.match(violations[0].oracle, features(obs.steps), unit.tag)
        if known is not None:  # a known cause: counted, no need to see it again on a fresh session
            known.members[unit.tag] += 1  # (a session in trouble was closed by run())
            stats.known += 1
            return
    if violations and not fresh:
        sessions.close()  # seen on a used session: it counts only if a fresh one shows it too
        obs, entries = sessions.fresh(body)
        violations = [] if obs.cut else check(obs, profile)
    if obs.cut:
        stats.examples -= 1  # the budget ended during it: it counts for nothing
        raise OutOfTime
    if violations:
        _failed(run, unit, attempt, violations[0], obs, entries)
    if now - attempt.said >= PROGRESS_EVERY_S:
        attempt.said = now
        run.say(f"{unit.tag}: {stats.examples}/{unit.limit} examples")


def _failed(run: _Run, unit: Unit, attempt: _Attempt, first: Violation, obs: Observation, entries: list[Entry]) -> None:
    """A failing example: counted for a known cause, else raised for Hypothesis to shrink."""
    run.sessions.close()
    shape = features(obs.steps)
    known = run.clusters.match(first.oracle, shape, unit.tag)
    if known is None and not attempt.failing and _same_as_plain(run, unit, first.oracle, obs, shape):
        known = run.clusters.featureless(first.oracle, unit.tag)
    if known is not None:
        if not attempt.failing:
            known.members[unit.tag] += 1
            unit.stats.known += 1
        return  # a cause already reported: keep searching for others
    if first.oracle == "server-alive" and not run.target.restartable:
        # the server is gone for good: every later example would "fail" the same way, so
        # shrinking would only make up a wrong minimal input; keep this one as it is
        attempt.gone = (first, obs, entries)
        raise OutOfTime
    if not attempt.failing:
        attempt.failing = True
        cap = time.monotonic() + shrink_time(run.config)
        attempt.shrink_until = cap if run.clock.until is None else min(cap, run.clock.until)
    if unit.stats.first_failure is None:
        unit.stats.first_failure = unit.stats.examples
    size = sum(len(s.line) for s in obs.steps)
    if first.oracle not in attempt.smallest or size < attempt.smallest[first.oracle][0]:
        attempt.smallest[first.oracle] = (size, first, obs, entries)
    failure = failure_class(first.oracle)(first, obs)
    failure.entries = entries  # type: ignore[attr-defined]
    raise failure


def _unit_round(run: _Run, unit: Unit, target: int, share_end: float | None, round_no: int) -> bool:
    """Brings a unit towards ``target`` examples; ``True`` when it found a new cause (the caller
    may give it another go in the same round)."""
    config, stats = run.config, unit.stats
    quota = target - stats.examples
    assert unit.strategy is not None and quota > 0
    attempt = _Attempt(time.monotonic(), share_end, said=time.monotonic(), earlier=frozenset(unit.seen))
    test = given(unit.strategy)(lambda steps: _example(run, unit, attempt, steps))
    chosen = _round_seed(config, f"{unit.tag}/{stats.rounds}", round_no)
    if chosen is not None:
        test = seed(chosen)(test)
    test = _settings(config, quota, first_round=stats.rounds == 0)(test)
    test._hypothesis_internal_database_key = database_key(run.target, unit.tag)  # type: ignore[attr-defined]
    stats.rounds += 1
    found_before = stats.findings
    try:
        with _quiet_hypothesis():
            test()
        if attempt.ran < quota:
            unit.done = True  # Hypothesis ran out of distinct examples
    except OutOfTime:
        _out_of_time(run, unit, attempt)
    except (OracleFailure, BaseExceptionGroup) as exc:
        found = list(_collect(exc))
        if not found:
            _unit_error(run, unit, exc)
        for failure, flaky in found:
            if failure.observation is not None:
                entries = getattr(failure, "entries", [])
                _record(run, unit, failure.violation, failure.observation, entries, flaky)
    except Exception as exc:  # the unit could not run (e.g. no example satisfies a schema): say so, go on
        _unit_error(run, unit, exc)
    finally:
        stats.duration += time.monotonic() - attempt.started
        if stats.examples >= unit.limit:
            unit.done = True
    return stats.findings > found_before


def _out_of_time(run: _Run, unit: Unit, attempt: _Attempt) -> None:
    if attempt.gone is not None:
        first, obs, entries = attempt.gone
        note = "; not shrunk: the server cannot be restarted (give its command after -- to have it restarted)"
        _record(run, unit, first, obs, entries, False, note)
        run.report.error = f"the server at {run.target.describe().get('url')} went away; the run stopped"
    for _, violation, obs, entries in attempt.smallest.values():
        note = "; shrinking was stopped by the time limit (the smallest failing example so far)"
        _record(run, unit, violation, obs, entries, False, note)


def _unit_error(run: _Run, unit: Unit, exc: BaseException) -> None:
    log.warning("%s stopped", unit.tag, exc_info=exc)
    unit.stats.error = f"{type(exc).__name__}: {str(exc)[:300]}"
    unit.done = True
    run.say(f"{unit.tag}: stopped: {unit.stats.error}")


# -- the units ----------------------------------------------------------------------------------------------


def tool_steps(profile: Profile, tool: dict[str, Any], deadline: float) -> st.SearchStrategy[list[Step]]:
    """A ``tools/call`` of ``tool`` with generated arguments (valid ones mostly), carrying a
    progress token (its progress notifications extend its deadline) and waiting longer when the
    arguments ask for a duration (see :func:`~fuzz.exchange.pace`)."""
    name = tool["name"]
    schema = tool.get("inputSchema")
    if schema_problem(schema) is not None:  # reported as tool-schema by the lists phase; still call it
        schema = {"type": "object"}
    # "arguments": null is how a client says "no arguments": fine for a tool that needs none
    empty_ok = is_valid(validator_for(schema), {})

    def build(case: tuple[bool, Any]) -> list[Step]:
        valid, args = case
        params = profile.params({"name": name, "arguments": args, "_meta": {"progressToken": "mcpwire-fuzz-1"}})
        step = request(1, "tools/call", params, tool=name, valid=None if args is None and empty_ok else valid)
        pace(step, "mcpwire-fuzz-1", schema, args, deadline)
        return [step]

    return arguments(schema).map(build)


def _units(run: _Run, tools: list[dict[str, Any]]) -> list[Unit]:
    config, profile = run.config, run.profile
    units: list[Unit] = []
    if "tools" in config.phases:
        for tool in tools:
            tag = f"tools:{tool['name']}"
            strategy = tool_steps(profile, tool, config.deadline)
            units.append(Unit(tag, "tools", str(tool["name"]), strategy, UnitStats(tag), config.max_examples))
    if "protocol" in config.phases:
        # the protocol phase names real tools too, but only those the selection lets through
        allowed = dataclasses.replace(profile, tools=tools)
        # framing (pieces, line ends, lines) exists only on a byte stream: over HTTP a body is a message
        kinds = [k for k in config.protocol_kinds if k != "framing" or run.target.transport == "stdio"]
        for kind in kinds:
            tag = f"protocol-{kind}"
            units.append(Unit(tag, tag, None, protocol_steps(allowed, kind), UnitStats(tag), config.max_examples))
    if "stateful" in config.phases:
        units.append(Unit("stateful", "stateful", None, None, UnitStats("stateful"), config.machine_runs))
    return units


def _check_lists(run: _Run) -> None:
    """list-stable: a fresh session lists the tools, prompts and resources (those the server has)
    twice each, and each list must be the one learnt at the start."""
    config, profile = run.config, run.profile
    methods = [m for m, (key, _) in LISTS.items() if key in profile.capabilities]
    if not methods:
        return
    unit = Unit("lists", "lists", None, None, UnitStats("lists"), 1)
    stats = unit.stats
    run.report.units.append(stats)
    started = time.monotonic()
    steps = [request(f"{method}-{n}", method, profile.params(None)) for method in methods for n in (1, 2)]
    obs, entries = run_steps(
        run.target,
        profile,
        steps,
        deadline=config.deadline,
        settle=config.settle,
        startup=config.connect_timeout,
        until=run.clock.until,
    )
    stats.duration = time.monotonic() - started
    if obs.cut:
        return
    stats.examples, stats.rounds = 1, 1
    run.report.examples += 1
    seen: set[str] = set()
    for violation in check(obs, profile):  # the list answers: schema shape, tool-schema (SV-29)
        if violation.oracle not in seen:
            seen.add(violation.oracle)
            _record(run, unit, violation, obs, entries, False)
    changed = list_stability(obs, profile)
    if changed:
        stats.first_failure = 1
        message = "; ".join(v.message for v in changed) + " (in a new session)"
        violation = dataclasses.replace(changed[0], message=message)
        _record(run, unit, violation, obs, entries, False)
        run.report.findings[-1].reproduced = True


def _stateful_round(run: _Run, unit: Unit, target: int, share_end: float | None, round_no: int, tools: Any) -> None:
    from .stateful import Limits, MachineStats, machine_for, run_machine

    config, profile, stats = run.config, run.profile, unit.stats
    if unit.counts is None:
        unit.counts = MachineStats()
    counts: MachineStats = unit.counts
    quota = target - stats.examples
    started = time.monotonic()
    limits = Limits(share_end=share_end, until=run.clock.until, shrink_time=shrink_time(config), first_run=counts.runs)
    machine = machine_for(
        run.target,
        profile,
        deadline=config.deadline,
        tools=tools,
        limits=limits,
        startup=config.connect_timeout,
        stats=counts,
        clusters=run.clusters,
    )
    run.say(f"stateful: {quota} rule sequences of up to {config.machine_steps} rules")
    runs_before = counts.runs
    counts.smallest, counts.stopped = None, False
    stats.rounds += 1
    failures: list[tuple[OracleFailure, bool]] = []
    try:
        with _quiet_hypothesis():
            run_machine(
                machine,
                max_examples=quota,
                steps=config.machine_steps,
                seed=_round_seed(config, "stateful", round_no),
                database=_database(config),
                reuse=stats.rounds == 1,
                # the rule sequences of one server (and era) are kept apart from any other's
                database_key=database_key(run.target, f"stateful-{profile.era}"),
            )
        if counts.runs - runs_before < quota and not counts.stopped:
            unit.done = True
    except Unsatisfiable:
        unit.done = True  # every sequence met a cause already reported
    except (OracleFailure, BaseExceptionGroup) as exc:
        failures = list(_collect(exc))
        if not failures and not counts.stopped:
            _unit_error(run, unit, exc)
    except Exception as exc:  # e.g. Hypothesis finding the server too unsteady to replay a sequence
        if not counts.stopped:
            _unit_error(run, unit, exc)
    finally:
        stats.cut_short = stats.cut_short or counts.stopped
        stats.examples = counts.runs
        stats.rules = dict(counts.rules)
        stats.first_failure = counts.first_failure
        stats.known = counts.known
        stats.fed = counts.fed
        stats.duration += time.monotonic() - started
        if stats.examples >= unit.limit:
            unit.done = True
    if counts.stopped and counts.smallest is not None:
        # the time stopped the machine while it shrank: what Hypothesis says of its last, idle
        # replays means nothing; the shortest failing sequence run is the finding
        violation, obs, entries = counts.smallest
        note = "; shrinking was stopped by the time limit (the shortest failing sequence so far)"
        _record(run, unit, violation, obs, entries, False, note)
        return
    for failure, flaky in failures:
        assert failure.observation is not None
        _record(run, unit, failure.violation, failure.observation, getattr(failure, "entries", []), flaky)


def _rounds(run: _Run, units: list[Unit], tools: list[dict[str, Any]]) -> None:
    """Every unit gets examples round by round (see the module docstring)."""
    config, report = run.config, run.report
    plan = rounds(config.max_examples)
    for round_no, share in enumerate(plan):
        active = [u for u in units if not u.done]
        if not active or report.error is not None or run.clock.over():
            break
        for index, unit in enumerate(active):
            if report.error is not None or run.clock.over():
                break
            left = run.clock.left()
            share_end = None if left is None else time.monotonic() + left / (len(active) - index)
            target = max(1, math.ceil(unit.limit * share / config.max_examples))
            if unit.strategy is None and round_no > 0:
                # every round of the machine starts again from the simplest rule sequence: after its
                # first one it gets all it may have at once (its share of the time still bounds it)
                target = unit.limit
            if unit.stats.examples >= target:
                continue
            examples_before = unit.stats.examples
            if unit.strategy is None:
                run.sessions.close()
                _stateful_round(run, unit, target, share_end, round_no, tools)
            else:
                if unit.stats.rounds == 0:
                    run.say(f"{unit.tag}: fuzzing (up to {unit.limit} examples, in rounds)")
                # a unit that found a new cause gets another go while its share and quota last
                for _ in range(5):
                    if not _unit_round(run, unit, target, share_end, round_no) or unit.done:
                        break
                    if unit.stats.examples >= target or (share_end is not None and time.monotonic() > share_end):
                        break
            report.examples += unit.stats.examples - examples_before
        run.sessions.close()


def _coverage(run: _Run, units: list[Unit]) -> None:
    config, report = run.config, run.report
    for unit in units:
        # a rule sequence is not an example: the machine is held to --machine-runs at most
        floor = max(1, min(config.min_examples, unit.limit) if unit.strategy is None else config.min_examples)
        if unit.stats.examples < floor:
            report.coverage_gaps.append(unit.tag)


def _refused_finding(run_config: Config, target: Target, exc: EndpointRefused, report: Report) -> None:
    profile = Profile(target.describe(), "legacy", "2024-11-05")
    report.profile = profile
    violation = Violation("sse-endpoint", str(exc)).at(profile)
    obs = Observation([])
    finding = Finding(violation, "connect", None, obs, exc.entries, reproduced=True, violations=[violation])
    report.findings.append(finding)
    report.error = "the server's SSE endpoint was refused (nothing was sent to it); the run stopped"


def run(config: Config) -> Report:
    """Runs every phase within the budgets; never raises for what the server does."""
    start = time.monotonic() if config.started is None else config.started
    clock = Clock(start, start + config.time_budget if config.time_budget else None)
    try:
        target = make_target(config)
    except ValueError as exc:
        return Report(None, error=str(exc))
    report = Report(None, time_budget=config.time_budget)
    bound = getattr(target, "bound", None)
    if bound is not None:
        bound(clock.until)  # starting an HTTP server waits no longer than the budget either
    try:
        try:
            profile = learn(config, target, clock.until)
        except EndpointRefused as exc:
            _refused_finding(config, target, exc, report)
            return report
        except (RuntimeError, OSError) as exc:
            report.error = str(exc)
            return report
        report.profile = profile
        run = _Run(config, target, profile, report, _Sessions(config, target, profile, clock), clock)
        tools, skipped = select_tools(config, profile.tools)
        report.skipped_tools = list(skipped)
        report.skipped_reasons = skipped
        run.say(
            f"server {profile.server_info.get('name', '?')} ({profile.transport}): {profile.era} {profile.revision}, "
            f"{len(profile.tools)} tools ({len(tools)} fuzzed), {len(profile.prompts)} prompts, "
            f"{len(profile.resources)} resources"
        )
        if "lists" in config.phases:
            _check_lists(run)
        units = _units(run, tools)
        report.units += [u.stats for u in units]
        _rounds(run, units, tools)
        run.sessions.close()
        _confirm_all(run)
        _coverage(run, units)
        assert all(f.violation.oracle in ORACLES for f in report.findings)
        return report
    finally:
        target.close()
        left_over = end_every_process()
        if left_over:
            log.warning("%d server process(es) were still running at the end of the run; ended them", left_over)
        report.duration = time.monotonic() - start
        if clock.until is not None and report.duration > config.time_budget + BUDGET_GRACE_S:  # type: ignore[operator]
            log.warning("the run took %.1fs, past its budget and grace", report.duration)
