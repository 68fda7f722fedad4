"""Edge values first: each tool called with the values that break servers most often, before any
random example.

Theory of operation: most bugs a fuzzer finds in a tool are one value in one argument: the empty
string, a string past some length, a NUL or a lone surrogate, a negative number, an integer past
64 bits. Random generation reaches them within a few rounds, but every round visits every unit
(and a hang costs a whole deadline), so the first sighting can come late. :func:`edge_cases` builds,
per tool, the simplest valid arguments of its ``inputSchema`` (what Hypothesis shrinks a valid
example to) and, for each of its first :data:`MAX_PROPERTIES` properties, that property set to each
edge value of its type (:data:`STRING_EDGES`, :data:`INTEGER_EDGES`, :data:`NUMBER_EDGES`): one
change from a passing call, so a failure is already minimal and its trigger is that change.
:func:`edge_pass` runs them once, before the rounds, within the run's budget, as examples of the
tool's unit (judged, confirmed on a fresh session and recorded as any failure is). Edge values
outside the schema are invalid arguments, judged as such.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .clusters import features
from .delta import Delta
from .exchange import PROBE_ID, Step, declared_seconds
from .findings import record, simplest_valid, unit_of_cause
from .oracles import check
from .schemas import is_valid, validator_for
from .units import FuzzRun, Unit

__all__ = [
    "Edge",
    "INTEGER_EDGES",
    "MAX_PROPERTIES",
    "NUMBER_EDGES",
    "STRING_EDGES",
    "edge_cases",
    "edge_pass",
    "minimal_instance",
]

log = logging.getLogger("mcpwire.fuzz.edges")

#: string values that break servers most often: empty, NUL, a lone surrogate, long
STRING_EDGES: Final[tuple[str, ...]] = ("", "\x00", "\ud800", "a" * 1000)
#: integers: negative, zero's neighbours, past 32 and 64 bits, and below -2^63
INTEGER_EDGES: Final[tuple[int, ...]] = (-1, 2**31, 2**63, -(2**63) - 1)
NUMBER_EDGES: Final[tuple[float, ...]] = (-1.0, 1e308, 5e-324)
#: properties of one tool given edge values
MAX_PROPERTIES: Final = 4
#: the share of the time left that the edge examples may take (the rounds get the rest)
EDGE_SHARE: Final = 0.15
_EDGES: Final[dict[str, tuple[Any, ...]]] = {"string": STRING_EDGES, "integer": INTEGER_EDGES, "number": NUMBER_EDGES}

#: makes the steps of one call: (arguments, whether they are valid) -> steps
Build = Callable[[Any, bool | None], list[Step]]


def _kind(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k in _EDGES), None)
    return kind if isinstance(kind, str) and kind in _EDGES else None


def minimal_instance(schema: Any, depth: int = 0) -> Any:
    """The simplest value of ``schema`` by hand (what Hypothesis would shrink to, for the plain
    cases): its const, default, first enum value or example, else the least value of its type, and
    an object with its required properties only. A caller validates it (None: no guess)."""
    if not isinstance(schema, dict) or depth > 6:
        return None
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        found = schema.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        return {name: minimal_instance(props.get(name, {}), depth + 1) for name in required}
    if kind == "string":
        return "a" * int(schema.get("minLength") or 0)
    if kind in ("integer", "number"):
        low = schema.get("minimum")
        value = low if isinstance(low, int | float) and low > 0 else 0
        return int(value) if kind == "integer" or float(value).is_integer() else float(value)
    if kind == "boolean":
        return False
    if kind == "array":
        return [minimal_instance(schema.get("items"), depth + 1) for _ in range(int(schema.get("minItems") or 0))]
    if kind == "null":
        return None
    return None


@dataclass(slots=True)
class Edge:
    """One edge example: its steps and, for a change of the simplest valid call, what changed
    (``path`` None: the simplest valid call itself)."""

    steps: list[Step]
    path: tuple[str, ...] | None = None
    value: Any = None
    passing: Any = None


def edge_cases(schema: Any, build: Build) -> list[Edge]:
    """The edge examples of a tool whose ``inputSchema`` is ``schema`` (see the module docstring),
    the simplest valid call first."""
    if not isinstance(schema, dict):
        return []
    validator = validator_for(schema)
    base = minimal_instance(schema)
    if not isinstance(base, dict) or not is_valid(validator, base):
        base = simplest_valid(schema)
    if not isinstance(base, dict):
        return []
    if declared_seconds(schema, base) > 0:
        # a tool asked to take time (server-everything's slow tool sleeps 10 s by default) is left
        # to the rounds, which share the time: an edge example must be quick
        return []
    props = schema.get("properties")
    # the simplest valid call first: it is the passing call the others change (and the empty
    # string it holds is itself an edge value)
    out = [Edge(build(base, True))]
    for name, sub in list(props.items() if isinstance(props, dict) else ())[:MAX_PROPERTIES]:
        kind = _kind(sub)
        if kind is None or declared_seconds(schema, {**base, name: 1}) > 0:
            continue  # no edge value for a duration: it would be waited for
        for value in _EDGES[kind]:
            args = {**base, name: value}
            if args == base:
                continue
            out.append(
                Edge(
                    build(args, is_valid(validator, args)),
                    ("params", "arguments", name),
                    value,
                    base.get(name, _ABSENT),
                )
            )
    return out


_ABSENT: Final = Delta.MISSING


def edge_pass(run: FuzzRun, units: list[Unit], edges: dict[str, list[Edge]]) -> None:
    """Runs the units' edge examples once (``edges``: by unit tag), before the rounds: the i-th
    edge of every unit before the (i+1)-th of any, so that one tool's slow failure (a hang waits
    its deadline) does not hold back the others'. A failing change of a simplest valid call that
    passed is its own trigger: the finding is named by that change without further trials."""
    profile, sessions = run.profile, run.sessions
    left = run.clock.left()
    stop_at = None if left is None else time.monotonic() + left * EDGE_SHARE
    passed: set[str] = set()
    for edge, unit in _interleaved(units, edges):
        if run.clock.over() or (stop_at is not None and time.monotonic() > stop_at):
            return
        steps = edge.steps
        key = hashlib.blake2b(b"\n".join(s.line for s in steps), digest_size=16).digest()
        if key in unit.seen:
            continue
        unit.seen.add(key)
        unit.stats.examples += 1
        run.report.examples += 1
        if (known := run.clusters.predicts(features(steps), unit.tag)) is not None:
            known.predicted[unit.tag] += 1
            unit.stats.known += 1
            continue
        body = [*steps, profile.probe(PROBE_ID)]
        obs, entries, fresh = sessions.run(body)
        violations = [] if obs.cut else check(obs, profile)
        if violations and not fresh:
            sessions.close()  # seen on a used session: it counts only if a fresh one shows it too
            obs, entries = sessions.fresh(body)
            violations = [] if obs.cut else check(obs, profile)
        if obs.cut:
            continue
        if not violations:
            if edge.path is None:
                passed.add(unit.tag)
            continue
        first = violations[0]
        sessions.close()
        known = run.clusters.match(first.oracle, features(obs.steps, first.step), unit_of_cause(unit, first, obs))
        if known is not None:
            known.members[unit.tag] += 1
            unit.stats.known += 1
            continue
        if unit.stats.first_failure is None:
            unit.stats.first_failure = unit.stats.examples
        log.debug("%s: an edge example fails (%s)", unit.tag, first.oracle)
        delta = None
        if edge.path is not None and unit.tag in passed:
            delta = Delta(edge.path, edge.value, edge.passing)
        record(run, unit, first, obs, entries, False, delta=delta)


def _interleaved(units: list[Unit], edges: dict[str, list[Edge]]) -> list[tuple[Edge, Unit]]:
    lists = [(unit, edges.get(unit.tag, [])) for unit in units]
    depth = max((len(found) for _, found in lists), default=0)
    return [(found[i], unit) for i in range(depth) for unit, found in lists if i < len(found)]
