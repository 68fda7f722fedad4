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
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from .budget import shrink_time
from .clusters import (
    ABLATABLE,
    DEEP,
    FEATURES,
    HUGE_LINE,
    INVALID_REQUEST,
    NOT_A_MESSAGE,
    NOT_JSON,
    Cluster,
    ablate,
    cause_unit,
    depth_of,
    features,
)
from .delta import Delta, apply, name_by_delta, refine
from .exchange import PROBE_ID, Observation, Step, dumps
from .oracles import Violation, check, slow_answer
from .runner import Finding, run_steps
from .units import FuzzRun, Unit
from .wire import Entry

__all__ = [
    "confirm",
    "confirm_all",
    "essential_shape",
    "probe_behaviour",
    "record",
    "same_as_plain",
    "set_headline",
    "unit_of_cause",
]

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


def essential_shape(run: FuzzRun, oracle: str, obs: Observation, blamed: int | None = None) -> dict[str, Any]:
    """The trigger shape of a minimal failing example without its bystanders: each feature that can
    be taken out (:func:`~fuzz.clusters.ablate`) is, in a run of its own on a fresh session; when
    the failure stays, the feature was not the cause (an id beyond 2^53 on a method in the wrong
    case: the id, or the case, or both). ``blamed``: the step the violation names (see
    :func:`~fuzz.clusters.features`)."""
    shape = features(obs.steps, blamed)
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
    run: FuzzRun,
    unit: Unit,
    violation: Violation,
    obs: Observation,
    entries: list[Entry],
    flaky: bool,
    note: str = "",
    delta: Delta | None = None,
) -> None:
    """A shrunk failure: a new finding if its root cause is new, else one more member of its cluster.
    ``delta``: its trigger when already known (an edge example: one change from a passing call)."""
    shape = {} if violation.oracle == "list-stable" else essential_shape(run, violation.oracle, obs, violation.step)
    cause = unit_of_cause(unit, violation, obs)
    plain = run.clusters.featureless(violation.oracle, cause)
    if plain is not None and run.clock.over():
        # no time was left to take this example's features out: a cause of the same oracle and
        # unit without any is the likelier one (what the features add was never shown)
        plain.members[unit.tag] += 1
        unit.stats.known += 1
        return
    behaviour = None
    if run.clusters.wants_probe(violation.oracle, shape, unit.tag):
        behaviour = probe_behaviour(run, violation.oracle, shape)
    if violation.oracle not in DELTA_ORACLES or shape.keys() & ABLATABLE:
        delta = None
    elif delta is None and run.clusters.match(violation.oracle, shape, unit_of_cause(unit, violation, obs)) is None:
        delta = trigger_by_delta(run, violation.oracle, obs)
    if delta is not None:
        delta = refine(_example_body(obs), delta, _fresh_trial(run, violation.oracle))
        smaller = apply(_example_body(obs), delta)
        if smaller is not None and not run.clock.over():
            # the finding's example is the smallest one: run once more, with the full deadline
            again, again_entries = run.sessions.fresh([*smaller, run.profile.probe(PROBE_ID)])
            seen = [v for v in check(again, run.profile) if v.oracle == violation.oracle]
            if not again.cut and seen:
                obs, entries, violation = again, again_entries, seen[0]
    if delta is not None:
        # depth or size is no cause when a shallow, short value fails the same way
        text = dumps(delta.value)
        if "deep-nesting" in shape and depth_of(text) <= DEEP:
            del shape["deep-nesting"]
        if "huge-line" in shape and len(text) < HUGE_LINE // 2:
            del shape["huge-line"]
    if behaviour is not None:
        run.clusters.adopt(behaviour, unit.tag)
        cluster, new = behaviour, True
    else:
        cluster, new = run.clusters.add(violation.oracle, shape, unit_of_cause(unit, violation, obs), unit.tag)
    if not new:
        unit.stats.known += 1
        return
    if delta is not None and behaviour is None and (cluster.words is None or not shape):
        cluster.words = delta.words
    others = [v for v in check(obs, run.profile) if (v.oracle, v.message) != (violation.oracle, violation.message)]
    finding = Finding(violation, unit.phase, unit.tool, obs, entries, flaky, violations=[violation, *others])
    finding.cluster, finding.detail = cluster, violation.message + note
    set_headline(finding)
    unit.stats.findings += 1
    run.found(unit.tag, finding)


#: oracles whose failure an input causes, so that a delta from a passing input names it
DELTA_ORACLES: Final = frozenset({"answer-deadline", "server-alive", "answer-slow", "one-answer", "output-schema"})


def passing_request(run: FuzzRun, step: Step) -> dict[str, Any] | None:
    """A request of ``step``'s method that should pass: a tool call with the simplest valid
    arguments of its ``inputSchema``, anything else with no parameters but the era's ``_meta``."""
    try:
        message = json.loads(step.line)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    method = message["method"]
    params: dict[str, Any] = {}
    if method == "tools/call" and step.tool is not None:
        tool = next((t for t in run.profile.tools if t.get("name") == step.tool), None)
        schema = tool.get("inputSchema") if tool is not None else None
        from .edges import minimal_instance
        from .schemas import is_valid, validator_for

        arguments = minimal_instance(schema)
        if not isinstance(schema, dict) or not is_valid(validator_for(schema), arguments):
            arguments = simplest_valid(schema)
        if arguments is None:
            return None
        params = {"name": step.tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": run.profile.params(params)}


def simplest_valid(schema: Any) -> Any:
    """The simplest arguments that satisfy ``schema`` (what Hypothesis shrinks a valid example to)."""
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import HypothesisException

    from .schemas import SchemaError, valid_arguments

    try:
        quiet = settings(database=None, max_examples=50, suppress_health_check=list(HealthCheck))
        return find(
            valid_arguments(schema if isinstance(schema, dict) else {"type": "object"}), bool_true, settings=quiet
        )
    except (HypothesisException, SchemaError, ValueError) as exc:
        log.info("no valid arguments to start a delta from: %s", exc)
        return None


def bool_true(_: Any) -> bool:
    return True


def _example_body(obs: Observation) -> list[Step]:
    """The example without its setup and the liveness probe the units append."""
    return [s for s in obs.steps if not s.setup and s.request_id != PROBE_ID]


def _fresh_trial(run: FuzzRun, oracle: str) -> Callable[[list[Step]], bool | None]:
    """Runs steps on a fresh session: whether ``oracle`` fires (None: could not tell)."""
    until = None if run.clock.until is None else min(run.clock.until, time.monotonic() + shrink_time(run.config))

    def fails(steps: list[Step]) -> bool | None:
        if run.clock.over() or (until is not None and time.monotonic() > until):
            return None
        try:
            # a trial that hangs need not wait a first sighting's deadline (see shrink_deadline)
            trial, _ = run.sessions.fresh(steps, run.sessions.shrink_deadline())
        except (OSError, RuntimeError) as exc:
            log.info("could not run a delta trial: %s", exc)
            return None
        if trial.cut:
            return None
        return any(v.oracle == oracle for v in check(trial, run.profile))

    return fails


def trigger_by_delta(run: FuzzRun, oracle: str, obs: Observation) -> Delta | None:
    """The finding's trigger as the smallest change from a passing request (:mod:`fuzz.delta`)."""
    body = _example_body(obs)
    requests = [s for s in body if s.kind == "request"]
    if len(body) != 1 or len(requests) != 1:
        return None
    return name_by_delta(body, passing_request(run, requests[0]), _fresh_trial(run, oracle))


def probe_behaviour(run: FuzzRun, oracle: str, shape: dict[str, Any]) -> Cluster | None:
    """Whether the server does what ``oracle`` saw to any line it cannot decode, each probe alone on
    a fresh session (see :class:`~fuzz.clusters.Clusters`): a line that is not JSON, then JSON that
    is no message; for a request never answered, also a request it can read but not accept."""
    probes: list[tuple[str, Step]] = [("not-json", Step(NOT_JSON, "malformed"))]
    if oracle == "server-alive":
        probes.append(("not-message", Step(NOT_A_MESSAGE, "malformed")))
    else:
        invalid = Step(INVALID_REQUEST, "request", "mcpwire-fuzz-invalid", "ping")
        probes.append(("invalid-request", invalid))
    found: str | None = None
    ran = False
    for name, step in probes:
        if run.clock.over():
            break
        try:
            trial, _ = run.sessions.fresh([step])
        except (OSError, RuntimeError) as exc:
            log.info("could not probe the server's behaviour: %s", exc)
            break
        if trial.cut:
            break
        ran = True
        fired = any(v.oracle == oracle for v in check(trial, run.profile))
        if name == "not-json" and fired:
            found = name
            if oracle != "server-alive":
                break  # it stops answering after an unparseable line: the smallest of the two
        elif fired:
            found = name
        elif name == "not-json" and oracle == "server-alive":
            break
    if not ran:
        return None  # not probed: asked again by the next such failure
    return run.clusters.behaviour(oracle, found, shape)


def unit_of_cause(unit: Unit, violation: Violation, obs: Observation) -> str:
    """The unit a cause without a named trigger shape belongs to (see :func:`~fuzz.clusters.cause_unit`)."""
    step = obs.steps[violation.step] if violation.step is not None and 0 <= violation.step < len(obs.steps) else None
    return cause_unit(
        violation.oracle, unit.tag, None if step is None else step.tool, None if step is None else step.method
    )


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
