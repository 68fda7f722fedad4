"""The oracles: what a server must do with whatever the fuzzer sends, each with an id and a spec reference.

Theory of operation: an oracle is a pure function of an :class:`~fuzz.exchange.Observation`
(and the server :class:`~fuzz.exchange.Profile`) returning :class:`Violation` values. They run
in a fixed order, most severe first, so the first violation of an example names its real cause
(a crash also leaves requests unanswered; it is reported as the crash). Each oracle id has its
own exception class (:func:`failure_class`), so Hypothesis keeps distinct bugs apart and shrinks
each to its own minimal example.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from mcpwire.redaction import clean_terminal, shorten

from . import mcp_schema
from .citations import CITATIONS, citation, severity
from .exchange import Observation, Profile, Step
from .leaks import find_leak
from .schemas import is_valid, schema_problem, validator_for

__all__ = [
    "LISTS",
    "ORACLES",
    "Oracle",
    "OracleFailure",
    "Violation",
    "check",
    "failure_class",
    "late_answers",
    "legal_error_code",
    "list_stability",
    "malformed_answer",
    "slow_answer",
]

log = logging.getLogger("mcpwire.fuzz.oracles")

NEWEST = "2026-07-28"


@dataclass(frozen=True, slots=True)
class Oracle:
    """An oracle's id, what it checks, and its severity (in the newest revision: see
    :func:`~fuzz.citations.severity` for older ones). What it cites depends on the session's
    revision and transport (:func:`~fuzz.citations.citation`); ``spec`` is the newest revision's."""

    id: str
    title: str
    severity: str = "error"

    @property
    def spec(self) -> str:
        return citation(self.id, NEWEST)


ORACLES: dict[str, Oracle] = {
    o.id: o
    for o in (
        Oracle("server-alive", "the server process stays alive while the client talks to it"),
        Oracle("answer-deadline", "every request is answered within the deadline"),
        Oracle(
            "answer-slow",
            "a request missed the deadline but was answered within the longer one of the confirming replay",
            severity="warning",
        ),
        Oracle(
            "one-answer",
            "every request gets exactly one answer, with its id (same value and type); no answer to unknown ids",
        ),
        Oracle(
            "notification-silence",
            "a notification is never answered (over HTTP, a 4xx refusal with an id-less error body is not an answer)",
        ),
        Oracle("malformed-input", "a malformed line is answered with an error or ignored, never with a result"),
        Oracle(
            "malformed-code",
            "a malformed line that is answered gets -32700 (not JSON) or -32600 (not a Request object); "
            "also -32602 for a request whose params are not structured, any error for a request read "
            "leniently (invalid UTF-8 as U+FFFD)",
            severity="warning",
        ),
        Oracle(
            "answer-shape",
            "answers, notifications and requests from the server are well-formed JSON-RPC and validate "
            "against the revision's schema (the result type of the method asked)",
        ),
        Oracle(
            "error-code",
            "error codes are legal: JSON-RPC's, MCP's, implementation-defined server errors, or outside the "
            "reserved range",
        ),
        Oracle("output-schema", "structuredContent of a tool with an outputSchema validates against it"),
        Oracle("stdout-clean", "every stdout line (HTTP: every response body and event) is a JSON-RPC message"),
        Oracle("list-stable", "lists are the same across calls and do not change as a side effect of other requests"),
        Oracle(
            "http-status", "an HTTP server never answers with a 5xx status: bad input gets a 4xx or a JSON-RPC error"
        ),
        Oracle(
            "subscription-ack",
            "a subscriptions/listen stream is acknowledged first with notifications/subscriptions/acknowledged",
        ),
        Oracle(
            "tool-schema",
            "every tool's inputSchema (and outputSchema) is a valid JSON Schema of its draft, 2020-12 by default",
        ),
        Oracle(
            "invalid-args-refused",
            "arguments that break the inputSchema get an error result (isError) or a JSON-RPC error",
            severity="warning",
        ),
        Oracle(
            "leak",
            "answers carry no stack trace, source path with a line number, or secret (the fuzzer plants one in "
            "the server's environment) that the request did not hold",
            severity="warning",
        ),
        Oracle(
            "sse-endpoint",
            "the HTTP+SSE endpoint event names a URI on the SSE stream's own origin, without userinfo or fragment",
        ),
    )
}
assert set(ORACLES) == set(CITATIONS), "every oracle cites its rule"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: the oracle, what happened (no raw control characters: server text in it is
    escaped), the step it concerns, and the revision and transport of the session it was seen in
    (which decide what it cites and, for a few oracles, its severity)."""

    oracle: str
    message: str
    step: int | None = None
    revision: str = NEWEST
    transport: str = "stdio"

    @property
    def info(self) -> Oracle:
        return ORACLES[self.oracle]

    @property
    def severity(self) -> str:
        return severity(self.oracle, self.revision, self.info.severity)

    @property
    def spec(self) -> str:
        return citation(self.oracle, self.revision, self.transport)

    def at(self, profile: Profile) -> Violation:
        """The same violation, seen in ``profile``'s session (revision and transport)."""
        return dataclasses.replace(self, revision=profile.revision, transport=profile.transport)

    def to_json(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle,
            "severity": self.severity,
            "title": self.info.title,
            "spec": self.spec,
            "revision": self.revision,
            "message": self.message,
            "step": self.step,
        }


class OracleFailure(AssertionError):
    """Raised inside a Hypothesis example; carries the violation and the observation."""

    violation: Violation
    observation: Observation | None

    def __init__(self, violation: Violation, observation: Observation | None = None) -> None:
        super().__init__(f"[{violation.oracle}] {violation.message}")
        self.violation = violation
        self.observation = observation


@cache
def failure_class(oracle: str) -> type[OracleFailure]:
    """One exception class per oracle id, so Hypothesis treats each oracle as a distinct bug."""
    name = "".join(part.title() for part in oracle.split("-")) + "Failure"
    return type(name, (OracleFailure,), {"__module__": __name__})


# -- error codes --------------------------------------------------------------------------------

_STANDARD = {-32700, -32600, -32601, -32602, -32603}
_MCP_LEGACY = {-32002, -32042}
_MCP_MODERN = {-32002, -32020, -32021, -32022}


def legal_error_code(code: object, revision: str) -> bool:
    """JR-30/JR-32: outside -32768..-32000 anything goes; inside, only defined codes. Before
    2026-07-28 the rule is JSON-RPC 2.0's: -32000..-32099 are "reserved for implementation-defined
    server-errors"; 2026-07-28 keeps -32000..-32019 for them and reserves the rest for MCP."""
    if type(code) is not int:
        return False
    if not -32768 <= code <= -32000:
        return True
    if code in _STANDARD or -32019 <= code <= -32000:
        return True
    if revision < "2026-07-28":
        return -32099 <= code <= -32000 or code in _MCP_LEGACY
    return code in _MCP_MODERN


# -- the official schema (used when found) ------------------------------------------------------------

#: 2026-07-28 basic/patterns/mrtr: these methods may answer with an InputRequiredResult instead
_MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


def _first_error(validator: Any, value: Any) -> str | None:
    try:
        error = next(iter(validator.iter_errors(value)), None)
    except RecursionError:
        return "too deeply nested to validate"
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path)
    return f"at /{path}: {error.message[:200]}"


def _schema_errors(revision: str, method: str | None, result: Any) -> str | None:
    definition = mcp_schema.result_definition(revision, method or "")
    if definition is None:
        return None
    if (
        revision >= "2026-07-28"
        and method in _MRTR_METHODS
        and isinstance(result, dict)
        and result.get("resultType") == "input_required"
    ):
        definition = "InputRequiredResult"
    validator = mcp_schema.validator(revision, definition)
    if validator is None:
        return None
    problem = _first_error(validator, result)
    return None if problem is None else f"{definition} {problem}"


def _notification_errors(revision: str, message: dict[str, Any]) -> str | None:
    """A server notification of a method the revision defines must validate against its type."""
    method = message.get("method")
    defs = (mcp_schema.document(revision) or {}).get("$defs") or (mcp_schema.document(revision) or {}).get(
        "definitions"
    )
    if not isinstance(defs, dict) or not isinstance(method, str):
        return None
    union = defs.get("ServerNotification") or {}
    names = [r["$ref"].rsplit("/", 1)[-1] for r in union.get("anyOf", []) if isinstance(r, dict) and "$ref" in r]
    for name in names:
        if ((defs.get(name) or {}).get("properties") or {}).get("method", {}).get("const") == method:
            validator = mcp_schema.validator(revision, name)
            problem = None if validator is None else _first_error(validator, message)
            return None if problem is None else f"{name} {problem}"
    return None


# -- the checks ---------------------------------------------------------------------------------


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _shape(message: Any) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return f'jsonrpc is {_short(message.get("jsonrpc"))}, not "2.0"'
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        return "a response must have exactly one of result and error"
    if has_error:
        error = message["error"]
        if not isinstance(error, dict):
            return "error is not an object"
        if type(error.get("code")) is not int:
            return f"error.code is {_short(error.get('code'))}, not an integer"
        if not isinstance(error.get("message"), str):
            return "error.message is not a string"
    elif not isinstance(message["result"], dict):
        return f"result is {_short(message['result'])}, not an object"
    return None


def malformed_answer(step: Step, message: dict[str, Any], revision: str) -> Violation | None:
    """What an answer to a malformed line breaks, if anything.

    A malformed line may be ignored or answered with an error (ST-08 leaves the reaction to the
    server; JSON-RPC 2.0 §5 asks for an error response), never with a result (``malformed-input``,
    an error). JSON-RPC 2.0 §5.1 defines the codes for this: -32700 when the line is not JSON,
    -32600 when it is JSON but not a valid Request object. The spec says no MUST about which code,
    so another code is still an answer the client can act on: it is accepted, but reported as the
    warning ``malformed-code`` naming the code. Two readings are not reported, as a careful server
    makes them on purpose:

    - a line that is a request (``jsonrpc`` "2.0", a string or integer id, a string method) whose
      ``params`` is neither an object nor an array may get -32602 (Invalid params), which names
      the fault more precisely than -32600;
    - a line that is a request once its invalid UTF-8 is read as U+FFFD (as Node.js and many
      decoders read it) may get any error a request may get (e.g. -32601 for the mangled method).

    A code the reserved range does not define is ``error-code``, as on any answer.
    """
    if "result" in message:
        return Violation("malformed-input", f"a malformed line got a result: {_short(message)}")
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if code in (-32700, -32600):
        return None
    if not legal_error_code(code, revision):
        return Violation("error-code", f"a malformed line was answered with reserved code {_short(code)}")
    readable = _readable_request(step.line)
    if code == -32602 and readable is not None and not isinstance(readable.get("params", {}), dict | list):
        return None
    if readable is None and _readable_request(step.line, "replace") is not None:
        return None
    return Violation(
        "malformed-code",
        f"a malformed line was answered with code {_short(code)}, not -32700 or -32600: {_short(message)}",
    )


def _readable_request(line: bytes, errors: str = "strict") -> dict[str, Any] | None:
    """The line as a request object with a usable envelope, or ``None``."""
    try:
        message = json.loads(line.decode("utf-8", errors))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and type(message.get("id")) in (int, str)
        and isinstance(message.get("method"), str)
    ):
        return message
    return None


def slow_answer(violation: Violation, replayed: Sequence[Violation], deadline: float) -> Violation | None:
    """``answer-slow``: a missed deadline (``answer-deadline``) whose confirming replay, run with the
    longer ``deadline``, missed none; ``None`` when the violation stands or is of another oracle."""
    if violation.oracle != "answer-deadline" or any(v.oracle == "answer-deadline" for v in replayed):
        return None
    return Violation(
        "answer-slow",
        f"{violation.message}, but answered within {deadline:g}s on a replay: slow, not hung",
        violation.step,
    )


def late_answers(obs: Observation, deadline: float) -> list[Violation]:
    """``answer-slow`` for every request of ``obs`` answered, but later than ``deadline`` (the replay
    of an ``answer-slow`` finding waits longer, and judges the answer's time by the first deadline)."""
    return [
        Violation(
            "answer-slow",
            f"{_describe(obs.steps[index])} was answered after {latency:.1f}s, past the deadline of {deadline:g}s",
            index,
        )
        for index, latency in sorted(obs.latency.items())
        if latency > deadline and not obs.steps[index].setup
    ]


#: The lists that must not change (SV-34): the method, the result's key, and what names an item.
LISTS: dict[str, tuple[str, str]] = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
}


def _identities(items: Any, key: str) -> list[str]:
    return sorted(str(i.get(key)) for i in items if isinstance(i, dict)) if isinstance(items, list) else []


def list_stability(obs: Observation, profile: Profile, notified: set[str] | None = None) -> list[Violation]:
    """``list-stable`` (SV-34): every whole ``tools/list``, ``prompts/list`` and ``resources/list``
    answer in ``obs`` names the same items (tools and prompts by name, resources by URI) as the
    list the profile learnt at the start. A page (``nextCursor``) is not judged: the profile holds
    the whole list. Before 2026-07-28 a list may change once the server said so: a kind whose
    ``notifications/<kind>/list_changed`` came (in ``obs``, or in ``notified``) is not judged."""
    out: list[Violation] = []
    learnt = {"tools/list": profile.tools, "prompts/list": profile.prompts, "resources/list": profile.resources}
    announced = set(notified or ())
    if profile.era == "legacy":
        announced |= {str(n.get("method")) for n in obs.notifications if isinstance(n, dict)}
    seen: Counter[str] = Counter()
    for index, answer in sorted(obs.answers.items()):
        method = obs.steps[index].method
        message = answer.message
        result = message.get("result") if isinstance(message, dict) else None
        if method not in LISTS or not isinstance(result, dict) or "nextCursor" in result:
            continue
        seen[method] += 1
        key, field = LISTS[method]
        if profile.era == "legacy" and f"notifications/{key}/list_changed" in announced:
            continue
        now, first = _identities(result.get(key), field), _identities(learnt[method], field)
        if now != first:
            added = sorted((Counter(now) - Counter(first)).elements())
            removed = sorted((Counter(first) - Counter(now)).elements())
            message_text = (
                f"{method} answer #{seen[method]} differs from the first list: added {_short(added)}, "
                f"removed {_short(removed)}"
            )
            out.append(Violation("list-stable", message_text, index).at(profile))
    return out


def _describe(step: Step) -> str:
    if step.tool is not None:
        return f"tools/call {step.tool!r}"
    return step.method or step.kind


def _echoes(sent: object, got: object) -> bool:
    """Whether ``got`` is ``sent`` mangled: the same number after a trip through a double
    (9223372036854775807 answered as 9223372036854776000), or the same text in another JSON type
    ("1" for 1). JR-05 still calls it a different id; this only names the fault precisely."""
    if sent is None or got is None or isinstance(sent, bool) or isinstance(got, bool):
        return False
    if isinstance(sent, int | float) and isinstance(got, int | float):
        try:
            return float(sent) == float(got)
        except OverflowError:
            return False
    return str(sent) == str(got)


def _stderr_note(tail: str) -> str:
    """The last lines of the server's stderr for a message: control characters shown escaped."""
    lines = [clean_terminal(line, newlines=False) for line in tail.strip().splitlines()[-3:]]
    return f"; stderr: {shorten(' | '.join(lines), 400)}" if lines else ""


def _liveness(obs: Observation, mangled: set[int]) -> list[Violation]:
    """server-alive, answer-deadline (but not for a request answered under a mangled id), answer-shape
    for an oversized line, http-status, subscription-ack."""
    out: list[Violation] = []
    steps = obs.steps
    if obs.died_after is not None:
        step = steps[obs.died_after] if 0 <= obs.died_after < len(steps) else None
        what = f"after {_describe(step)}" if step else "before the first message"
        message = f"the server exited (status {obs.exit_status}) {what}" + _stderr_note(obs.stderr_tail)
        out.append(Violation("server-alive", message, obs.died_after))
    if obs.barrier_timed_out is not None and obs.died_after is None:
        step = steps[obs.barrier_timed_out]
        out.append(
            Violation(
                "answer-deadline",
                f"after {_describe(step)}, the server answered no request within the deadline",
                obs.barrier_timed_out,
            )
        )
    for index in obs.timed_out:
        if index not in mangled:
            out.append(
                Violation("answer-deadline", f"no answer to {_describe(steps[index])} within the deadline", index)
            )
    if obs.oversized:
        out.append(Violation("answer-shape", "a stdout line exceeded the fuzzer's line limit", None))
    for status, body in obs.http_failures:
        out.append(Violation("http-status", f"the server answered HTTP {status}: {_short(body)}", None))
    for index in obs.missing_expected:
        refused = obs.answers.get(index)
        if refused is not None and isinstance(refused.message, dict) and "error" in refused.message:
            continue  # the stream was refused (an error answer), so there is nothing to acknowledge
        out.append(
            Violation(
                "subscription-ack", f"{_describe(steps[index])}: no {steps[index].expect} within the deadline", index
            )
        )
    return out


def _strays(obs: Observation, profile: Profile) -> tuple[list[Violation], set[int]]:
    """Answers nobody waited for: to a notification, to a malformed line, or under a wrong id (named
    precisely when the id is a timed-out request's id, mangled). Also returns those requests."""
    out: list[Violation] = []
    mangled: set[int] = set()
    steps = obs.steps
    for stray in obs.strays:
        step = steps[stray.step] if 0 <= stray.step < len(steps) else None
        msg = stray.message
        if step is not None and step.kind == "notification":
            out.append(
                Violation(
                    "notification-silence", f"the notification {step.method!r} was answered: {_short(msg)}", stray.step
                )
            )
        elif step is not None and step.kind == "malformed":
            if (judged := malformed_answer(step, msg, profile.revision)) is not None:
                out.append(Violation(judged.oracle, judged.message, stray.step))
        elif msg.get("id") is not None or "result" in msg:
            got = msg.get("id")
            sent = next((i for i in obs.timed_out if _echoes(steps[i].request_id, got)), None)
            if sent is None:
                out.append(
                    Violation("one-answer", f"an answer matched no outstanding request: {_short(msg)}", stray.step)
                )
                continue
            mangled.add(sent)
            out.append(
                Violation(
                    "one-answer",
                    f"request id {_short(steps[sent].request_id)} was answered with a different id, {_short(got)} "
                    f"({type(got).__name__}): the answer to {_describe(steps[sent])} can never be matched",
                    sent,
                )
            )
    return out, mangled


def _result(step: Step, index: int, result: dict[str, Any], profile: Profile) -> list[Violation]:
    """What a result breaks: the revision's schema, tool schemas in a tools/list, a tool's
    outputSchema, and invalid arguments accepted."""
    out: list[Violation] = []
    invalid = _schema_errors(profile.revision, step.method, result)
    if invalid is not None:
        out.append(Violation("answer-shape", f"answer to {_describe(step)}: {invalid}", index))
    if step.method == "tools/list" and isinstance(result.get("tools"), list):
        for tool in result["tools"]:
            if not isinstance(tool, dict):
                continue
            for key in ("inputSchema", "outputSchema"):
                if key in tool and (problem := schema_problem(tool[key])) is not None:
                    out.append(Violation("tool-schema", f"tool {tool.get('name')!r}: {key} {problem}", index))
    if step.method == "tools/call" and result.get("isError") is not True:
        schema = profile.output_schema(step.tool)
        if isinstance(schema, dict):
            structured = result.get("structuredContent")
            if structured is None:
                out.append(Violation("output-schema", f"{_describe(step)} returned no structuredContent", index))
            elif not is_valid(validator_for(schema), structured):
                message = f"{_describe(step)}: structuredContent {_short(structured)} breaks the outputSchema"
                out.append(Violation("output-schema", message, index))
        if step.valid is False:
            message = f"{_describe(step)} accepted arguments its inputSchema rejects"
            out.append(Violation("invalid-args-refused", message, index))
    return out


def _answers(obs: Observation, profile: Profile) -> list[Violation]:
    out: list[Violation] = []
    for index, answer in sorted(obs.answers.items()):
        step, msg = obs.steps[index], answer.message
        problem = _shape(msg)
        if problem is not None:
            out.append(Violation("answer-shape", f"answer to {_describe(step)}: {problem}", index))
            continue
        leaked = find_leak(msg, step.line)
        if leaked is not None:
            out.append(Violation("leak", f"the answer to {_describe(step)} holds {leaked}", index))
        if "error" in msg:
            code = msg["error"]["code"]
            if not legal_error_code(code, profile.revision):
                out.append(Violation("error-code", f"{_describe(step)} answered with reserved code {code}", index))
            continue  # an error is always an acceptable answer (invalid arguments, malformed input included)
        if step.kind == "malformed":
            out.append(Violation("malformed-input", f"a malformed request got a result: {_short(msg)}", index))
            continue
        out += _result(step, index, msg["result"], profile)
    return out


def check(obs: Observation, profile: Profile) -> list[Violation]:
    """Every violation in the observation, most severe first, stamped with the session's revision
    and transport."""
    strays, mangled = _strays(obs, profile)
    out = [*_liveness(obs, mangled), *strays, *_answers(obs, profile)]
    for note in obs.notifications:
        problem = _notification_errors(profile.revision, note) if isinstance(note, dict) else None
        if problem is not None:
            out.append(Violation("answer-shape", f"notification {note.get('method')!r}: {problem}", None))
    if obs.noise:
        out.append(Violation("stdout-clean", f"{len(obs.noise)} non-JSON-RPC stdout line(s): {_short(obs.noise[0])}"))
    stamped = [v.at(profile) for v in out]
    stamped.sort(key=lambda v: v.severity != "error")  # stable: errors first, each kind in its order
    return stamped
