"""One root cause, one finding: the shape of a failing input, and findings grouped by it.

Theory of operation: a server with one bug (say, any line holding a lone surrogate ends it) fails
in every unit that can send such a line: each tool with a string argument, every protocol kind.
Shrinking already reduces each failure to its minimal input; :func:`features` then names that
input's *shape* from a fixed vocabulary (:data:`FEATURES`: a lone surrogate, nesting depth, an id
beyond 2^53 or 2^63-1, params that are not an object, invalid UTF-8, a NUL, a method in the wrong
case, an unknown member, a huge line). A :class:`Cluster` is one oracle plus one shape; a minimal
input without any of these features is its own shape, kept per unit (the cause is the unit's
input, e.g. an empty name).

:class:`Clusters` is the run's registry. Once a cluster is known, a later failing example of the
same oracle whose input has every feature of the cluster's shape is counted as a *member* of it
and not reported again, so the search goes on for other causes; the report lists each cluster
once, with its members per unit. :func:`trigger` states the minimal trigger in words ("a request
whose id is above 2^53 (9007199254740993)"), so the finding names the cause, not a bystander such
as the method that happened to carry the id.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .exchange import Step, dumps
from .messages import LEGACY_METHODS, MODERN_METHODS

__all__ = [
    "BEHAVIOUR_ORACLES",
    "FEATURES",
    "INVALID_REQUEST",
    "NOT_A_MESSAGE",
    "NOT_JSON",
    "ONE_ANSWER_ORACLES",
    "TOOL_CALL_ORACLES",
    "Cluster",
    "Clusters",
    "ablate",
    "cause_unit",
    "features",
    "trigger",
]

#: the shapes a trigger can have, in the order a trigger names them
FEATURES: Final = (
    "lone-surrogate",
    "nul",
    "invalid-utf8",
    "deep-nesting",
    "huge-line",
    "id-above-2^63",
    "id-above-2^53",
    "id-negative",
    "id-fractional",
    "params-not-object",
    "method-case",
    "unknown-member",
)
#: nesting past this depth is a shape of its own (JSON parsers commonly stop at 64..512)
DEEP: Final = 64
HUGE_LINE: Final = 100_000
_ENVELOPE: Final = frozenset({"jsonrpc", "id", "method", "params"})
_KNOWN_METHODS: Final = frozenset(
    m.lower() for m in (*LEGACY_METHODS, *MODERN_METHODS, "initialize", "subscriptions/listen", "ping")
)
_ESCAPE: Final = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?|\\u([dD][c-fC-F][0-9a-fA-F]{2})"
)


def depth_of(line: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON line (strings skipped; no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _lone_surrogate(text: str) -> bool:
    # a high surrogate escape not followed by a low one, or a low one alone
    return any(m.group(3) is not None or m.group(2) is None for m in _ESCAPE.finditer(text))


def _line_features(step: Step) -> dict[str, Any]:
    line = step.line
    found: dict[str, Any] = {}
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        found["invalid-utf8"] = True
        text = line.decode("utf-8", "replace")
    if _lone_surrogate(text):
        found["lone-surrogate"] = True
    if "\\u0000" in text or "\x00" in text:
        found["nul"] = True
    depth = depth_of(line)
    if depth > DEEP:
        found["deep-nesting"] = depth
    if len(line) > HUGE_LINE:
        found["huge-line"] = len(line)
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return found
    if not isinstance(message, dict):
        return found
    rid = message.get("id")
    if isinstance(rid, int) and not isinstance(rid, bool):
        if rid > 2**63 - 1 or rid < -(2**63):
            found["id-above-2^63"] = rid
        if abs(rid) > 2**53:  # also beyond 64 bits: the same family, matched by the smaller shape
            found["id-above-2^53"] = rid
        elif rid < 0:
            found["id-negative"] = rid
    elif isinstance(rid, float):
        found["id-fractional"] = rid
    if "params" in message and not isinstance(message["params"], dict):
        found["params-not-object"] = message["params"]
    method = message.get("method")
    if isinstance(method, str) and method != method.lower() and method.lower() in _KNOWN_METHODS:
        found["method-case"] = method
    if message.keys() - _ENVELOPE:
        found["unknown-member"] = sorted(message.keys() - _ENVELOPE)[0]
    return found


def features(steps: Sequence[Step], blamed: int | None = None) -> dict[str, Any]:
    """The shape of an example: each feature of :data:`FEATURES` its lines have, with an example
    value. With ``blamed`` (the index of the step a violation names), that step's features only:
    what other lines of an unshrunk example hold is no part of this failure's cause."""
    if blamed is not None and 0 <= blamed < len(steps) and not steps[blamed].setup:
        steps = [steps[blamed]]
    found: dict[str, Any] = {}
    for step in steps:
        if step.setup:
            continue
        for key, value in _line_features(step).items():
            found.setdefault(key, value)
    return found


#: features :func:`ablate` can take out of a line (nesting and size are kept: they are the line)
ABLATABLE: Final = frozenset(FEATURES) - {"deep-nesting", "huge-line"}


def _ablate_text(text: str, drop: frozenset[str]) -> str:
    if "lone-surrogate" in drop:
        text = _ESCAPE.sub(lambda m: m.group() if m.group(2) and not m.group(3) else "a", text)
    if "nul" in drop:
        text = text.replace("\\u0000", "a").replace("\x00", "a")
    return text


_MESSAGE_FEATURES: Final = frozenset(
    {"id-above-2^63", "id-above-2^53", "id-negative", "id-fractional", "params-not-object", "method-case",
     "unknown-member"}
)  # fmt: skip


def _ablate_message(message: dict[str, Any], drop: frozenset[str], position: int) -> dict[str, Any]:
    out = dict(message)
    if "id" in out and drop == {"id-above-2^63"}:
        out["id"] = 2**53 + 1 + position  # within 64 bits, still above 2^53: is 64 bits the limit?
    elif drop & {"id-above-2^63", "id-above-2^53", "id-negative", "id-fractional"} and "id" in out:
        out["id"] = 1 + position  # small, and still unique within the example
    if "params-not-object" in drop and "params" in out:
        out["params"] = {}
    if "method-case" in drop and isinstance(out.get("method"), str):
        out["method"] = out["method"].lower()
    if "unknown-member" in drop:
        out = {k: v for k, v in out.items() if k in _ENVELOPE}
    return out


def ablate(steps: Sequence[Step], drop: frozenset[str]) -> list[Step]:
    """``steps`` with the features ``drop`` taken out of every line: lone surrogates and NULs become
    ``a``, invalid UTF-8 is decoded leniently, a request's id becomes 1, params become ``{}``, the
    method lower case, unknown members go. What cannot be taken out (nesting, size) stays."""
    out: list[Step] = []
    for step in steps:
        if step.setup:
            out.append(step)
            continue
        line = step.line
        if "invalid-utf8" in drop:
            line = line.decode("utf-8", "replace").replace("\ufffd", "a").encode()
        text = _ablate_text(line.decode("utf-8", "replace"), drop)
        request_id = step.request_id
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):
            message = None
        data = text.encode("utf-8", "replace")
        if isinstance(message, dict) and drop & _MESSAGE_FEATURES:
            message = _ablate_message(message, drop, len(out))
            if "id" in message and step.kind == "request":
                request_id = message["id"]
            data = dumps(message)  # lone surrogates left in it are written as escapes again
        new = Step(data, step.kind)
        for name in (
            "method",
            "tool",
            "valid",
            "setup",
            "answer",
            "raw",
            "cancels",
            "expect",
            "deadline",
            "progress",
            "fed",
        ):
            setattr(new, name, getattr(step, name))
        new.request_id = request_id
        new.split = tuple(i for i in step.split if i < len(new.line))
        out.append(new)
    return out


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)[:60]


_WORDS: Final[dict[str, str]] = {
    "lone-surrogate": "a string holding a lone surrogate (such as \\ud800)",
    "nul": "a string holding NUL (\\u0000)",
    "invalid-utf8": "a line that is not valid UTF-8",
    "deep-nesting": "JSON nested {} levels deep",
    "huge-line": "a line of {} bytes",
    "id-above-2^63": "a request whose id is beyond 64 bits ({})",
    "id-above-2^53": "a request whose id is above 2^53 ({}: more than a double holds exactly)",
    "id-negative": "a request with a negative id ({})",
    "id-fractional": "a request with a fractional id ({})",
    "params-not-object": "a request whose params are not an object ({})",
    "method-case": "a request whose method is in the wrong case ({})",
    "unknown-member": "a request with an unknown top-level member ({})",
}
_EFFECTS: Final[dict[str, str]] = {
    "server-alive": "ends the server",
    "answer-deadline": "is never answered",
    "one-answer": "is answered with a different id",
    "answer-slow": "is answered only after the deadline",
}


#: the words of an id beyond a bound on the negative side
_NEGATIVE_WORDS: Final[dict[str, str]] = {
    "id-above-2^63": "a request whose id is below -2^63, beyond 64 bits ({})",
    "id-above-2^53": "a request whose id is below -2^53 ({}: more than a double holds exactly)",
}


def trigger(shape: dict[str, Any]) -> str | None:
    """The minimal trigger in words, or ``None`` for a shape without features."""
    parts = []
    for key in FEATURES:
        if key in shape:
            negative = isinstance(shape[key], int) and shape[key] < 0
            words = _NEGATIVE_WORDS[key] if negative and key in _NEGATIVE_WORDS else _WORDS[key]
            parts.append(words.format(_value(shape[key]) if key not in ("deep-nesting", "huge-line") else shape[key]))
    return " and ".join(parts) if parts else None


#: oracles that say what the server *did* (ended, went silent): a server that does it on any line
#: it cannot decode has one cause however the line was malformed (see :class:`Clusters`)
BEHAVIOUR_ORACLES: Final = frozenset({"server-alive", "answer-deadline"})
#: units whose inputs are malformed lines whatever their shape
MALFORMED_UNITS: Final = frozenset({"protocol-malformed", "protocol-mutations", "protocol-framing"})
#: the lines that show the behaviour: one that is not JSON at all, and JSON that is no message
NOT_JSON: Final = b'{"jsonrpc": "2.0", "id": 1, "method": '
NOT_A_MESSAGE: Final = b'{"mcpwire-fuzz": true}'
#: a request any server can read but none may accept as it is: a ping whose params are an array
INVALID_REQUEST: Final = b'{"jsonrpc":"2.0","id":"mcpwire-fuzz-invalid","method":"ping","params":[]}'
_BEHAVIOUR_WORDS: Final = {
    "not-json": "any line the server cannot parse (JSON cut short{})",
    "not-message": "any line the server cannot decode (JSON cut short, JSON that is no message{})",
    "invalid-request": "any request the server cannot decode or validate (a ping whose params are []{})",
}


@dataclass(slots=True)
class Cluster:
    """One root cause: an oracle and a trigger shape (or, without features, one unit's own)."""

    oracle: str
    shape: frozenset[str]
    #: the unit whose input has no named shape (``None`` for a shape with features)
    unit: str | None
    #: the words of the minimal trigger (``None`` without features)
    words: str | None
    #: failing examples that were this cause, per unit (the first, reported one included)
    members: Counter[str] = field(default_factory=Counter)
    #: examples not run, per unit, because they had the whole trigger shape after the unit showed it
    predicted: Counter[str] = field(default_factory=Counter)
    #: a cause of what the server does to any undecodable line: a failure matches it when its input
    #: has any feature of :data:`FEATURES`, or comes from a unit of malformed lines
    any_malformed: bool = False

    @property
    def key(self) -> str:
        return f"{self.oracle}:{'+'.join(sorted(self.shape)) or self.unit}"

    def matches(self, oracle: str, shape: dict[str, Any], unit: str) -> bool:
        if oracle != self.oracle:
            return False
        if self.any_malformed:
            return bool(shape.keys() & _SHARP) or unit in MALFORMED_UNITS
        if self.shape:
            return self.shape <= shape.keys()
        return unit == self.unit and not (shape.keys() & _SHARP)

    def headline(self, message: str, oracle: str | None = None) -> str:
        """The finding's message: the trigger and its effect (as ``oracle`` judged it, by default the
        cluster's), then what was seen."""
        if self.words is None:
            return message
        effect = _EFFECTS.get(oracle or self.oracle)
        if effect is None:
            return f"{message} (trigger: {self.words})"
        return f"{self.words[0].upper()}{self.words[1:]} {effect}: {message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "oracle": self.oracle,
            "trigger": self.words,
            "any_malformed": self.any_malformed,
            "members": [
                {"unit": unit, "examples": count, "not_run": self.predicted[unit]}
                for unit, count in sorted(self.members.items())
            ],
        }


#: oracles judging one answer by itself: a tool's answer that breaks one is that tool's cause, in
#: whichever unit (its own, the protocol phase's, the stateful machine's) the call was made
ONE_ANSWER_ORACLES: Final = frozenset({"leak", "output-schema"})


#: oracles about what a tool call did to the server (hang, end it, answer late): the call's tool is
#: the cause, in whichever unit it was called (a hang of one tool found by the tools phase and by
#: the stateful machine is one finding)
TOOL_CALL_ORACLES: Final = frozenset({"answer-deadline", "answer-slow", "server-alive"})


def cause_unit(oracle: str, unit: str, tool: str | None, method: str | None = None) -> str:
    """The unit a cause without a named trigger shape belongs to: the unit the failure was seen in,
    or, for an oracle of :data:`ONE_ANSWER_ORACLES` or :data:`TOOL_CALL_ORACLES`, the unit of the
    tool (``tool``) whose call broke it; an answered notification is its method's (``method``),
    whichever unit sent it."""
    if tool is not None and (oracle in ONE_ANSWER_ORACLES or oracle in TOOL_CALL_ORACLES):
        return f"tools:{tool}"
    if oracle == "notification-silence" and method is not None:
        return f"notification:{method}"
    return unit


#: features whose presence makes a failure someone else's (a featureless cluster is not matched by them)
_SHARP: Final = frozenset(FEATURES)


class Clusters:
    """The run's root causes, in the order found.

    Before a cause is told by what was sent, it is told by what the server did: the first time a
    failure of a :data:`BEHAVIOUR_ORACLES` oracle has a malformed input (a named feature, or a unit
    of malformed lines), the run asks (:meth:`behaviour`) whether the server does the same to a
    line that is plainly not JSON (:data:`NOT_JSON`) and to JSON that is no message
    (:data:`NOT_A_MESSAGE`), or, for a request never answered, to a request it can read but not
    accept (:data:`INVALID_REQUEST`). If it does, that is the cause ("exits on any line it cannot
    decode", "never answers a request it cannot validate"),
    and every such failure of that oracle, whatever its shape (a lone surrogate, invalid UTF-8,
    deep nesting, params that are not an object), is one more member of it.
    """

    def __init__(self) -> None:
        self.known: list[Cluster] = []
        #: per oracle: the behaviour found (a cluster), or None when the server did not show it
        self.probed: dict[str, Cluster | None] = {}

    def wants_probe(self, oracle: str, shape: dict[str, Any], unit: str) -> bool:
        """Whether a failure of ``oracle`` should first ask the server's behaviour (see the class)."""
        malformed = bool(shape.keys() & _SHARP) or unit in MALFORMED_UNITS
        return oracle in BEHAVIOUR_ORACLES and oracle not in self.probed and malformed

    def behaviour(self, oracle: str, shown: str | None, example: dict[str, Any]) -> Cluster | None:
        """Record what the probes showed for ``oracle``: ``shown`` names the smallest line that did
        it (``not-json``, ``not-message``: :data:`NOT_A_MESSAGE` too, ``invalid-request``:
        :data:`INVALID_REQUEST` is never answered), None when none did. The new cluster, if any
        (``example``: the shape of the failure that asked, named in the words)."""
        if shown is None:
            self.probed[oracle] = None
            return None
        this = trigger(example)
        words = _BEHAVIOUR_WORDS[shown].format(f", {this}" if this else "")
        cluster = Cluster(oracle, frozenset({"any-malformed"}), None, words, any_malformed=True)
        self.probed[oracle] = cluster
        return cluster

    def adopt(self, cluster: Cluster, seen_in: str) -> None:
        """Make ``cluster`` (from :meth:`behaviour`) a known cause, ahead of those by shape, with the
        failure that found it as its first member."""
        cluster.members[seen_in] += 1
        self.known.insert(0, cluster)

    def match(self, oracle: str, shape: dict[str, Any], unit: str) -> Cluster | None:
        """The known cause a failure of ``oracle`` whose input has ``shape`` (see :func:`features`) belongs to."""
        return next((c for c in self.known if c.matches(oracle, shape, unit)), None)

    def predicts(self, shape: dict[str, Any], unit: str) -> Cluster | None:
        """A cause with a named trigger shape, already seen in ``unit``, that an input of ``shape``
        has all of: running it would only show that cause again (a server that dies on any lone
        surrogate dies on this one too). Another unit runs its own first such input: a shape that
        breaks one tool may be harmless to the next."""
        return next((c for c in self.known if c.shape and c.members[unit] and c.shape <= shape.keys()), None)

    def featureless(self, oracle: str, unit: str) -> Cluster | None:
        """The cause without a named shape already found for ``oracle`` in ``unit``, if any."""
        return next((c for c in self.known if c.oracle == oracle and c.unit == unit), None)

    def add(self, oracle: str, shape: dict[str, Any], unit: str, seen_in: str | None = None) -> tuple[Cluster, bool]:
        """The cluster of a shrunk failure whose essential trigger shape is ``shape``, and whether it
        is new; ``unit`` is the cause's (see :func:`cause_unit`), ``seen_in`` the unit that ran the
        example (by default the same), under which it is counted as a member."""
        known = self.match(oracle, shape, unit)
        if known is not None:
            known.members[seen_in or unit] += 1
            return known, False
        cluster = Cluster(oracle, frozenset(shape), None if shape else unit, trigger(shape))
        cluster.members[seen_in or unit] += 1
        self.known.append(cluster)
        return cluster, True
