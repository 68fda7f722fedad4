"""The trigger named by delta: the smallest change from a passing request that fails.

Theory of operation: a shrunk failing request can still carry more than its cause, and the
vocabulary of trigger shapes (:mod:`fuzz.clusters`) names only what it knows: a tool call whose
``count`` of -1 hangs the server has no named shape at all, and an argument nested 200 deep whose
fault is being an array where a string is expected is named "JSON nested 200 levels deep". So for a
failure whose shape names nothing that can be taken out, :func:`name_by_delta` starts from a
*passing* request of the same method (the same request with minimal parameters: for a tool call,
the simplest valid arguments of its ``inputSchema``; for anything else, ``params: {}`` and id 1)
and puts back the failing request's differences one at a time, each on a fresh session. The first
single difference that fails on its own is the trigger; its value is then simplified as far as it
still fails (an array to ``[]``, a string to ``""``, a number to ``-1``/``0``), so a deeply nested
array that fails when empty is named as a wrong type, not as depth. Each trial is one short example:
at most :data:`MAX_TRIALS` of them per finding, and none once the run's time is up.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, Final

from .exchange import Step, dumps

__all__ = ["MAX_REFINE_TRIALS", "MAX_TRIALS", "Delta", "apply", "differences", "name_by_delta", "refine", "simpler"]

log = logging.getLogger("mcpwire.fuzz.delta")

#: fresh-session examples one finding's delta may run
MAX_TRIALS: Final = 8
#: differences looked at (the first ones in document order)
MAX_DIFFERENCES: Final = 6
_MISSING: Final = object()

#: runs steps on a fresh session; True when the finding's oracle fires
Trial = Callable[[list[Step]], bool | None]
#: fresh-session examples that may go into finding the smallest failing value of a delta
MAX_REFINE_TRIALS: Final = 24


class Delta:
    """The trigger found: the path changed, the failing value (simplified), the passing one
    (:attr:`MISSING` when the passing request has no such member)."""

    MISSING: Final = _MISSING

    def __init__(self, path: tuple[str, ...], value: Any, passing: Any) -> None:
        self.path, self.value, self.passing = path, value, passing

    @property
    def words(self) -> str:
        where = ".".join(self.path)
        value = _short(self.value)
        if self.passing is _MISSING:
            return f"a request with {where} = {value} (the same request without it is answered)"
        return f"a request whose {where} is {value} (with {_short(self.passing)} it is answered)"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    if len(text) <= 60:
        return text
    if isinstance(value, str):
        return f"{text[:40]}… (a string of {len(value)} characters)"
    kind = "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else "a value"
    return f"{text[:40]}… ({kind} of {len(text)} characters of JSON)"


def differences(failing: Any, passing: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each place where ``failing`` differs from ``passing``, with the failing value (objects are
    compared member by member; anything else as a whole)."""
    if isinstance(failing, dict) and isinstance(passing, dict):
        for key in failing:
            if key not in passing or failing[key] != passing[key]:
                yield from differences(failing[key], passing.get(key, _MISSING), (*path, str(key)))
        for key in passing:
            if key not in failing:
                yield (*path, str(key)), _MISSING
        return
    if failing != passing:
        yield path, failing


def _get(message: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(message, dict) or key not in message:
            return _MISSING
        message = message[key]
    return message


def _with(message: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``message`` with ``value`` at ``path`` (:data:`_MISSING`: the member removed)."""
    out = json.loads(json.dumps(message))
    node = out
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if value is _MISSING:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return dict(out)


def simpler(value: Any) -> list[Any]:
    """Simpler values of the same kind, simplest first."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, list):
        return [[]] if value else []
    if isinstance(value, dict):
        return [{}] if value else []
    if isinstance(value, str):
        out: list[Any] = [""] if value else []
        if len(value) > 1:
            out += [value[:1]]
        return out
    if isinstance(value, int):
        return [v for v in (0, -1, 1) if v != value and (v < 0) == (value < 0)][:1] or ([0] if value else [])
    if isinstance(value, float):
        return [0.0] if value else []
    return []


def _step_like(template: Step, message: dict[str, Any]) -> Step:
    step = Step(dumps(message), template.kind, message.get("id"), template.method, template.tool)
    step.deadline, step.progress = template.deadline, template.progress
    return step


def name_by_delta(body: list[Step], passing: dict[str, Any] | None, fails: Trial) -> Delta | None:
    """The smallest change from ``passing`` (a request that should pass) to the one failing request
    of ``body`` that fails alone, or None (several requests, no passing request, the passing one
    fails too, or no single change fails). ``fails`` runs steps on a fresh session."""
    requests = [s for s in body if not s.setup]
    if len(requests) != 1 or passing is None:
        return None
    template = requests[0]
    try:
        failing = json.loads(template.line)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(failing, dict):
        return None
    trials = 0

    def trial(message: dict[str, Any]) -> bool | None:
        nonlocal trials
        trials += 1
        return fails([_step_like(template, message)])

    if trial(passing) is not False:
        return None  # the passing request fails too (or could not be run): nothing to tell apart
    found: Delta | None = None
    for path, value in list(differences(failing, passing))[:MAX_DIFFERENCES]:
        if trials >= MAX_TRIALS:
            return None
        if trial(_with(passing, path, value)) is not True:
            continue
        found = Delta(path, value, _get(passing, path))
        break
    if found is None:
        return None
    for candidate in simpler(found.value):
        if trials >= MAX_TRIALS:
            break
        if trial(_with(passing, found.path, candidate)) is True:
            found.value = candidate
            break
    return found


def apply(body: list[Step], delta: Delta) -> list[Step] | None:
    """The one request of ``body`` with ``delta``'s value put at its path (None: not one request)."""
    requests = [s for s in body if not s.setup]
    if len(requests) != 1:
        return None
    try:
        message = json.loads(requests[0].line)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or _get(message, delta.path) == delta.value:
        return None
    return [_step_like(requests[0], _with(message, delta.path, delta.value))]


def refine(body: list[Step], delta: Delta, fails: Trial) -> Delta:
    """``delta`` with its value made as small as still fails: the shortest prefix of a long string,
    the number nearest the passing one (found by doubling the distance, then halving it). A server
    that breaks past 300 characters or above 1000 is named by 301 characters or 1001, as shrinking
    would name it; at most :data:`MAX_REFINE_TRIALS` trials."""
    requests = [s for s in body if not s.setup]
    if len(requests) != 1:
        return delta
    template = requests[0]
    try:
        failing = json.loads(template.line)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return delta
    if not isinstance(failing, dict):
        return delta
    trials = 0

    def fails_with(value: Any) -> bool | None:
        nonlocal trials
        if trials >= MAX_REFINE_TRIALS:
            return None
        trials += 1
        return fails([_step_like(template, _with(failing, delta.path, value))])

    value, passing = delta.value, delta.passing
    if isinstance(value, str) and len(value) > 1:
        low = len(passing) if isinstance(passing, str) and value.startswith(passing) else 0
        found = _bisect(low, len(value), lambda n: fails_with(value[:n]))
        return Delta(delta.path, value[:found], passing)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    start = passing if isinstance(passing, int) and not isinstance(passing, bool) else 0
    if number and abs(value - start) > 1:
        sign = 1 if value > start else -1
        below, step, above = start, 1, None
        while trials < MAX_REFINE_TRIALS:
            candidate = start + sign * step
            if abs(candidate - start) >= abs(value - start):
                break
            verdict = fails_with(candidate)
            if verdict is None:
                return delta
            if verdict:
                above = candidate
                break
            below, step = candidate, step * 2
        if above is None:
            return delta
        found = _bisect(abs(below - start), abs(above - start), lambda d: fails_with(start + sign * d))
        return Delta(delta.path, start + sign * found, passing)
    return delta


def _bisect(passes: int, fails: int, probe: Callable[[int], bool | None]) -> int:
    """The least ``n`` in (``passes``, ``fails``] for which ``probe`` still fails (``probe(passes)``
    is taken to pass and ``probe(fails)`` to fail); stops early, at what is known, when a probe
    cannot run."""
    while fails - passes > 1:
        middle = (passes + fails) // 2
        verdict = probe(middle)
        if verdict is None:
            break
        if verdict:
            fails = middle
        else:
            passes = middle
    return fails
