"""Findings: recording a shrunk failure under its root cause, and confirming it on a fresh session.

Theory of operation: a failure Hypothesis shrank is first reduced to its trigger shape (each
feature that can be taken out, :func:`~fuzz.clusters.ablate`, is, in a run of its own on a fresh
session; a feature whose removal keeps the failure was a bystander). A shape already known is one
more member of its cluster; a new one is a :class:`~fuzz.runner.Finding` (:func:`record`). After
the rounds every finding is replayed once more on a fresh session (:func:`confirm_all`): a missed
deadline with a longer one, so a server that was only slow becomes an ``answer-slow`` warning,
and a finding that does not come back is marked flaky.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from .clusters import ABLATABLE, FEATURES, ablate, cause_unit, features
from .exchange import Observation
from .oracles import Violation, check, slow_answer
from .runner import Finding, run_steps
from .units import FuzzRun, Unit
from .wire import Entry

__all__ = ["confirm", "confirm_all", "essential_shape", "record", "same_as_plain", "set_headline", "unit_of_cause"]

log = logging.getLogger("mcpwire.fuzz.findings")


def confirm(run: FuzzRun, finding: Finding) -> None:
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


def essential_shape(run: FuzzRun, oracle: str, obs: Observation) -> dict[str, Any]:
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


def same_as_plain(run: FuzzRun, unit: Unit, oracle: str, obs: Observation, shape: dict[str, Any]) -> bool:
    """Whether a failure with named features is the unit's featureless cause seen before: it fails
    the same way once every feature that can be taken out is."""
    if run.clusters.featureless(oracle, unit.tag) is None or not shape.keys() & ABLATABLE:
        return False
    body = [s for s in obs.steps if not s.setup]
    trial, _ = run.sessions.fresh(ablate(body, frozenset(shape.keys() & ABLATABLE)))
    return not trial.cut and any(v.oracle == oracle for v in check(trial, run.profile))


def record(
    run: FuzzRun, unit: Unit, violation: Violation, obs: Observation, entries: list[Entry], flaky: bool, note: str = ""
) -> None:
    """A shrunk failure: a new finding if its root cause is new, else one more member of its cluster."""
    shape = {} if violation.oracle == "list-stable" else essential_shape(run, violation.oracle, obs)
    cluster, new = run.clusters.add(violation.oracle, shape, unit_of_cause(unit, violation, obs), unit.tag)
    if not new:
        unit.stats.known += 1
        return
    others = [v for v in check(obs, run.profile) if (v.oracle, v.message) != (violation.oracle, violation.message)]
    finding = Finding(violation, unit.phase, unit.tool, obs, entries, flaky, violations=[violation, *others])
    finding.cluster, finding.detail = cluster, violation.message + note
    set_headline(finding)
    unit.stats.findings += 1
    run.found(unit.tag, finding)


def unit_of_cause(unit: Unit, violation: Violation, obs: Observation) -> str:
    """The unit a cause without a named trigger shape belongs to (see :func:`~fuzz.clusters.cause_unit`)."""
    step = obs.steps[violation.step] if violation.step is not None and 0 <= violation.step < len(obs.steps) else None
    return cause_unit(violation.oracle, unit.tag, None if step is None else step.tool)


def set_headline(finding: Finding) -> None:
    """The finding's message: its trigger and effect (as its current oracle judges it), then the detail."""
    seen = finding.violation
    message = finding.detail if finding.cluster is None else finding.cluster.headline(finding.detail, seen.oracle)
    finding.violation = dataclasses.replace(seen, message=message)
    finding.violations[0] = finding.violation


def confirm_all(run: FuzzRun) -> None:
    """Every finding replayed on a fresh session, after the rounds, while the budget lasts (a
    replay is no example: it must not take time from a unit's share); one left unconfirmed for
    want of time keeps ``reproduced`` None."""
    for finding in run.report.findings:
        if run.clock.over():
            break
        if finding.violation.oracle in ("list-stable", "sse-endpoint") or finding.reproduced is not None:
            continue
        confirm(run, finding)  # may turn a missed deadline into answer-slow
        set_headline(finding)
