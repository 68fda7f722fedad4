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
import logging
import math
import time
from typing import Any, Final

from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from .attempt import unit_error, unit_round
from .budget import Clock, rounds, shrink_time
from .edges import Edge, edge_cases, edge_pass
from .exchange import Observation, Profile, Step, declared_seconds, pace, request
from .findings import confirm_all, record
from .messages import protocol_steps
from .oracles import LISTS, ORACLES, OracleFailure, Violation, check, list_stability
from .runner import (
    BUDGET_GRACE_S,
    Config,
    EndpointRefused,
    Finding,
    Report,
    UnitStats,
    learn,
    make_target,
    run_steps,
    select_tools,
)
from .schemas import arguments, is_valid, schema_problem, validator_for
from .units import (
    FuzzRun,
    Sessions,
    Unit,
    database_key,
    example_database,
    oracle_failures,
    quiet_hypothesis,
    round_seed,
)
from .wire import Target, end_every_process

__all__ = ["Clock", "database_key", "declared_seconds", "rounds", "run", "shrink_time", "tool_steps"]

log = logging.getLogger("mcpwire.fuzz.schedule")


def tool_steps(profile: Profile, tool: dict[str, Any], deadline: float) -> st.SearchStrategy[list[Step]]:
    """A ``tools/call`` of ``tool`` with generated arguments (valid ones mostly), carrying a
    progress token (its progress notifications extend its deadline) and waiting longer when the
    arguments ask for a duration (see :func:`~fuzz.exchange.pace`)."""
    name = tool["name"]
    schema = tool.get("inputSchema")
    if schema_problem(schema) is not None:  # reported as tool-schema by the lists phase; still call it
        schema = {"type": "object"}
    # "arguments": null is how a client says "no arguments", and a server that reads any value that
    # is not an object (0, "", []) as no arguments does no harm to a tool that needs none: accepting
    # such a call breaks no rule, so it is not judged (a tool with required fields still is)
    empty_ok = is_valid(validator_for(schema), {})

    def build(case: tuple[bool, Any]) -> list[Step]:
        valid, args = case
        return tool_call(
            profile, name, schema, args, None if empty_ok and not isinstance(args, dict) else valid, deadline
        )

    return arguments(schema).map(build)


def tool_call(profile: Profile, name: str, schema: Any, args: Any, valid: bool | None, deadline: float) -> list[Step]:
    """The steps of one ``tools/call`` of ``name`` with ``args`` (``valid``: whether they satisfy
    the ``inputSchema``, None when that is not judged)."""
    params = profile.params({"name": name, "arguments": args, "_meta": {"progressToken": "mcpwire-fuzz-1"}})
    step = request(1, "tools/call", params, tool=name, valid=valid)
    pace(step, "mcpwire-fuzz-1", schema, args, deadline)
    return [step]


def _edges(run: FuzzRun, tools: list[dict[str, Any]]) -> dict[str, list[Edge]]:
    """Each fuzzed tool's edge examples (see :mod:`fuzz.edges`), by unit tag."""
    if "tools" not in run.config.phases or not run.config.edges:
        return {}
    out: dict[str, list[Edge]] = {}
    for tool in tools:
        name, schema = str(tool["name"]), tool.get("inputSchema")
        if schema_problem(schema) is not None:
            continue

        def build(args: Any, valid: bool | None, name: str = name, schema: Any = schema) -> list[Step]:
            return tool_call(run.profile, name, schema, args, valid, run.config.deadline)

        out[f"tools:{name}"] = edge_cases(schema, build)
    return out


def _units(run: FuzzRun, tools: list[dict[str, Any]]) -> list[Unit]:
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


def _check_lists(run: FuzzRun) -> None:
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
            record(run, unit, violation, obs, entries, False)
    changed = list_stability(obs, profile)
    if changed:
        stats.first_failure = 1
        message = "; ".join(v.message for v in changed) + " (in a new session)"
        violation = dataclasses.replace(changed[0], message=message)
        record(run, unit, violation, obs, entries, False)
        run.report.findings[-1].reproduced = True


def _stateful_round(run: FuzzRun, unit: Unit, target: int, share_end: float | None, round_no: int, tools: Any) -> None:
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
        with quiet_hypothesis():
            run_machine(
                machine,
                max_examples=quota,
                steps=config.machine_steps,
                seed=round_seed(config, "stateful", round_no),
                database=example_database(config),
                reuse=stats.rounds == 1,
                # the rule sequences of one server (and era) are kept apart from any other's
                database_key=database_key(run.target, f"stateful-{profile.era}"),
            )
        if counts.runs - runs_before < quota and not counts.stopped:
            unit.done = True
    except Unsatisfiable:
        unit.done = True  # every sequence met a cause already reported
    except (OracleFailure, BaseExceptionGroup) as exc:
        failures = list(oracle_failures(exc))
        if not failures and not counts.stopped:
            unit_error(run, unit, exc)
    except Exception as exc:  # e.g. Hypothesis finding the server too unsteady to replay a sequence
        if not counts.stopped:
            unit_error(run, unit, exc)
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
        record(run, unit, violation, obs, entries, False, note)
        return
    for failure, flaky in failures:
        assert failure.observation is not None
        record(run, unit, failure.violation, failure.observation, getattr(failure, "entries", []), flaky)


def _rounds(run: FuzzRun, units: list[Unit], tools: list[dict[str, Any]]) -> None:
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
                    if not unit_round(run, unit, target, share_end, round_no) or unit.done:
                        break
                    if unit.stats.examples >= target or (share_end is not None and time.monotonic() > share_end):
                        break
            report.examples += unit.stats.examples - examples_before
        run.sessions.close()


#: the coverage gap of a server none of whose tools the safe default lets the fuzzer call
NO_TOOLS_GAP: Final = "tools (0 of {count} fuzzed: {why}; --tools all, or --tools NAME,..., fuzzes them)"


def _tool_coverage(run: FuzzRun, tools: list[dict[str, Any]]) -> None:
    """A server that lists tools of which the run fuzzes none, by the safe default's choice (not a
    --deny or --tools the user gave), is a coverage gap named with the option that unlocks it."""
    config, report = run.config, run.report
    listed = run.profile.tools
    if tools or not listed or "tools" not in config.phases or config.tools is not None or config.allow is not None:
        return
    if all(reason == "denied (--deny)" for reason in report.skipped_reasons.values()):
        return
    reasons = sorted({r for r in report.skipped_reasons.values() if r != "denied (--deny)"})
    why = reasons[0] if len(reasons) == 1 else f"{len(reasons)} reasons, first: {reasons[0]}"
    report.coverage_gaps.append(NO_TOOLS_GAP.format(count=len(listed), why=why))


def _coverage(run: FuzzRun, units: list[Unit]) -> None:
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
        run = FuzzRun(config, target, profile, report, Sessions(config, target, profile, clock), clock)
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
        edge_pass(run, units, _edges(run, tools))
        _rounds(run, units, tools)
        run.sessions.close()
        confirm_all(run)
        _coverage(run, units)
        _tool_coverage(run, tools)
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
