"""One round of one unit: a Hypothesis test whose examples run on the server and are judged.

Theory of operation: :func:`unit_round` builds the round's Hypothesis test at run time (a fresh
seed per round, the unit's database key) and runs it; :func:`run_example` is its body. An example
an earlier round ran is rejected (every round starts again from the simplest example); one whose
whole trigger shape is a cause the unit already showed is counted, not run. A violation on a used
session counts only if a fresh session shows it too. A failing example of a known cause is counted
as a member; a new one is raised (:func:`on_failure`) for Hypothesis to shrink, within
``shrink_time``. When the time stops the round, the smallest failing example so far is recorded
(:func:`out_of_time`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field

from hypothesis import given, reject, seed

from .budget import shrink_time
from .clusters import features
from .exchange import PROBE_ID, Observation, Step
from .findings import record, same_as_plain, unit_of_cause
from .oracles import OracleFailure, Violation, check, failure_class
from .runner import OutOfTime
from .units import FuzzRun, Unit, database_key, oracle_failures, quiet_hypothesis, round_seed, round_settings
from .wire import Entry

__all__ = [
    "PROBE_ID",
    "PROGRESS_EVERY_S",
    "Attempt",
    "on_failure",
    "out_of_time",
    "run_example",
    "unit_error",
    "unit_round",
]

log = logging.getLogger("mcpwire.fuzz.attempt")

#: progress lines while a unit runs: at most one per this many seconds
PROGRESS_EVERY_S = 5.0


@dataclass(slots=True)
class Attempt:
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
    #: the examples earlier rounds ran (see run_example)
    earlier: frozenset[bytes] = frozenset()


def run_example(run: FuzzRun, unit: Unit, attempt: Attempt, steps: list[Step]) -> None:
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
    # while shrinking, a hang need not be waited for as long as a first sighting (see shrink_deadline)
    deadline = sessions.shrink_deadline() if attempt.failing else None
    obs, entries, fresh = sessions.run(body, deadline)
    violations = [] if obs.cut else check(obs, profile)
    if violations and not fresh and not attempt.failing:
        cause = unit_of_cause(unit, violations[0], obs)
        known = run.clusters.match(violations[0].oracle, features(obs.steps, violations[0].step), cause)
        if known is not None:  # a known cause: counted, no need to see it again on a fresh session
            known.members[unit.tag] += 1  # (a session in trouble was closed by run())
            stats.known += 1
            return
    if violations and not fresh:
        sessions.close()  # seen on a used session: it counts only if a fresh one shows it too
        obs, entries = sessions.fresh(body, deadline)
        violations = [] if obs.cut else check(obs, profile)
    if obs.cut:
        stats.examples -= 1  # the budget ended during it: it counts for nothing
        raise OutOfTime
    if violations:
        on_failure(run, unit, attempt, violations[0], obs, entries)
    if now - attempt.said >= PROGRESS_EVERY_S:
        attempt.said = now
        run.say(f"{unit.tag}: {stats.examples}/{unit.limit} examples")


def on_failure(
    run: FuzzRun, unit: Unit, attempt: Attempt, first: Violation, obs: Observation, entries: list[Entry]
) -> None:
    """A failing example: counted for a known cause, else raised for Hypothesis to shrink."""
    run.sessions.close()
    shape = features(obs.steps, first.step)
    known = run.clusters.match(first.oracle, shape, unit_of_cause(unit, first, obs))
    if known is None and not attempt.failing and same_as_plain(run, unit, first.oracle, obs, shape):
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


def unit_round(run: FuzzRun, unit: Unit, target: int, share_end: float | None, round_no: int) -> bool:
    """Brings a unit towards ``target`` examples; ``True`` when it found a new cause (the caller
    may give it another go in the same round)."""
    config, stats = run.config, unit.stats
    quota = target - stats.examples
    assert unit.strategy is not None and quota > 0
    attempt = Attempt(time.monotonic(), share_end, said=time.monotonic(), earlier=frozenset(unit.seen))
    test = given(unit.strategy)(lambda steps: run_example(run, unit, attempt, steps))
    chosen = round_seed(config, f"{unit.tag}/{stats.rounds}", round_no)
    if chosen is not None:
        test = seed(chosen)(test)
    test = round_settings(config, quota, first_round=stats.rounds == 0)(test)
    test._hypothesis_internal_database_key = database_key(run.target, unit.tag)  # type: ignore[attr-defined]
    stats.rounds += 1
    found_before = stats.findings
    try:
        with quiet_hypothesis():
            test()
        if attempt.ran < quota:
            unit.done = True  # Hypothesis ran out of distinct examples
    except OutOfTime:
        out_of_time(run, unit, attempt)
    except (OracleFailure, BaseExceptionGroup) as exc:
        found = list(oracle_failures(exc))
        if not found:
            unit_error(run, unit, exc)
        for failure, flaky in found:
            if failure.observation is not None:
                entries = getattr(failure, "entries", [])
                record(run, unit, failure.violation, failure.observation, entries, flaky)
    except Exception as exc:  # the unit could not run (e.g. no example satisfies a schema): say so, go on
        unit_error(run, unit, exc)
    finally:
        stats.duration += time.monotonic() - attempt.started
        if stats.examples >= unit.limit:
            unit.done = True
    return stats.findings > found_before


def out_of_time(run: FuzzRun, unit: Unit, attempt: Attempt) -> None:
    if attempt.gone is not None:
        first, obs, entries = attempt.gone
        note = "; not shrunk: the server cannot be restarted (give its command after -- to have it restarted)"
        record(run, unit, first, obs, entries, False, note)
        run.report.error = f"the server at {run.target.describe().get('url')} went away; the run stopped"
    for _, violation, obs, entries in attempt.smallest.values():
        note = "; shrinking was stopped by the time limit (the smallest failing example so far)"
        record(run, unit, violation, obs, entries, False, note)


def unit_error(run: FuzzRun, unit: Unit, exc: BaseException) -> None:
    log.warning("%s stopped", unit.tag, exc_info=exc)
    unit.stats.error = f"{type(exc).__name__}: {str(exc)[:300]}"
    unit.done = True
    run.say(f"{unit.tag}: stopped: {unit.stats.error}")
