"""The oracles: what a server must do with whatever the fuzzer sends, each with an id and a spec reference.

Theory of operation: an oracle is a pure function of an :class:`~fuzz.exchange.Observation`
(and the server :class:`~fuzz.exchange.Profile`) returning :class:`Violation` values. They run
in a fixed order, most severe first, so the first violation of an example names its real cause
(a crash also leaves requests unanswered; it is reported as the crash). Each oracle id has its
own exception class (:func:`failure_class`), so Hypothesis keeps distinct bugs apart and shrinks
each to its own minimal example.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import mcp_schema
from .exchange import Observation, Profile, Step
from .schemas import is_valid, schema_problem, validator_for

__all__ = [
    "LISTS",
    "ORACLES",
    "Oracle",
    "OracleFailure",
    "Violation",
    "check",
    "failure_class",
    "legal_error_code",
    "list_stability",
    "malformed_answer",
    "slow_answer",
]

log = logging.getLogger("mcpwire.fuzz.oracles")


@dataclass(frozen=True, slots=True)
class Oracle:
    id: str
    title: str
    spec: str
    severity: str = "error"


ORACLES: dict[str, Oracle] = {
    o.id: o
    for o in (
        Oracle(
            "server-alive",
            "the server process stays alive while the client talks to it",
            "2025-11-25 basic/lifecycle §Shutdown (only the client ends a stdio session); ST-01, SV-08",
        ),
        Oracle(
            "answer-deadline",
            "every request is answered within the deadline",
            "2025-11-25 basic/index §Responses (every request gets a response); SV-02",
        ),
        Oracle(
            "answer-slow",
            "a request missed the deadline but was answered within the longer one of the confirming replay",
            "2025-11-25 basic/lifecycle §Timeouts (implementations SHOULD establish timeouts); SV-02",
            severity="warning",
        ),
        Oracle(
            "one-answer",
            "every request gets exactly one answer, with its id (same value and type); no answer to unknown ids",
            'JSON-RPC 2.0 §5 and 2026-07-28 basic/index §Result Responses: "MUST include the same ID"; SV-02',
        ),
        Oracle(
            "notification-silence",
            "a notification is never answered (over HTTP, a 4xx refusal with an id-less error body is not an answer)",
            '2026-07-28 basic/index §Notifications: "The receiver MUST NOT send a response."; SV-04, JR-07; HT-04',
        ),
        Oracle(
            "malformed-input",
            "a malformed line is answered with an error or ignored, never with a result",
            "JSON-RPC 2.0 §5.1 (Parse error / Invalid Request); ST-08",
        ),
        Oracle(
            "malformed-code",
            "a malformed line that is answered gets -32700 (not JSON) or -32600 (not a Request object); "
            "also -32602 for a request whose params are not structured, any error for a request read "
            "leniently (invalid UTF-8 as U+FFFD)",
            'JSON-RPC 2.0 §5.1: -32700 "Invalid JSON was received by the server", -32600 "The JSON sent is not a'
            ' valid Request object"; ST-08',
            severity="warning",
        ),
        Oracle(
            "answer-shape",
            "answers, notifications and requests from the server are well-formed JSON-RPC and validate "
            "against the revision's schema (the result type of the method asked)",
            "2024-11-05 basic/messages (exactly one of result/error; integer code); schema.json; SV-03, SV-06",
        ),
        Oracle(
            "error-code",
            "error codes are legal: JSON-RPC's, MCP's, implementation-defined -32000..-32019, or outside the range",
            '2026-07-28 basic/index §Error Codes: "MUST NOT emit any code from this sub-range that is not defined"'
            "; JR-30, JR-32",
        ),
        Oracle(
            "output-schema",
            "structuredContent of a tool with an outputSchema validates against it",
            '2026-07-28 server/tools §Output Schema: "Servers MUST provide structured results that conform"; SV-30',
        ),
        Oracle(
            "stdout-clean",
            "every stdout line (HTTP: every response body and event) is a JSON-RPC message",
            '2026-07-28 basic/transports/stdio: "The server MUST NOT write anything to its stdout that is not a'
            ' valid MCP message."; SV-01',
        ),
        Oracle(
            "list-stable",
            "lists are the same across calls and do not change as a side effect of other requests",
            '2026-07-28 server/tools §Capabilities: "MUST NOT vary per-connection or as a side effect"; SV-34',
        ),
        Oracle(
            "http-status",
            "an HTTP server never answers with a 5xx status: bad input gets a 4xx or a JSON-RPC error",
            "2026-07-28 basic/transports/streamable-http §Sending Messages (a request gets JSON or an SSE stream,"
            " a rejected message an HTTP error status such as 400 Bad Request); HT-04, SV-20, SV-21",
        ),
        Oracle(
            "subscription-ack",
            "a subscriptions/listen stream is acknowledged first with notifications/subscriptions/acknowledged",
            '2026-07-28 basic/patterns/subscriptions §Acknowledgment: "The server MUST send'
            ' notifications/subscriptions/acknowledged as the first message"; SV-37, UT-S02',
        ),
        Oracle(
            "tool-schema",
            "every tool's inputSchema (and outputSchema) is a valid JSON Schema of its draft, 2020-12 by default",
            '2025-11-25 server/tools §Tool: inputSchema "MUST be a valid JSON Schema object (not null)"; SV-29',
        ),
        Oracle(
            "invalid-args-refused",
            "arguments that break the inputSchema get an error result (isError) or a JSON-RPC error",
            "2026-07-28 server/tools §Error Handling; SV-31",
            severity="warning",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Violation:
    oracle: str
    message: str
    step: int | None = None

    @property
    def info(self) -> Oracle:
        return ORACLES[self.oracle]

    def to_json(self) -> dict[str, Any]:
        o = self.info
        return {
            "oracle": o.id,
            "severity": o.severity,
            "title": o.title,
            "spec": o.spec,
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
    """JR-30/JR-32: outside -32768..-32000 anything goes; inside, only defined codes."""
    if type(code) is not int:
        return False
    if not -32768 <= code <= -32000:
        return True
    if code in _STANDARD or -32019 <= code <= -32000:
        return True
    return code in (_MCP_MODERN if revision >= "2026-07-28" else _MCP_LEGACY)


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


#: The lists that must not change (SV-34): the method, the result's key, and what names an item.
LISTS: dict[str, tuple[str, str]] = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
}


def _identities(items: Any, key: str) -> list[str]:
    return sorted(str(i.get(key)) for i in items if isinstance(i, dict)) if isinstance(items, list) else []


def list_stability(obs: Observation, profile: Profile) -> list[Violation]:
    """``list-stable`` (SV-34): every whole ``tools/list``, ``prompts/list`` and ``resources/list``
    answer in ``obs`` names the same items (tools and prompts by name, resources by URI) as the
    list the profile learnt at the start. A page (``nextCursor``) is not judged: the profile holds
    the whole list."""
    out: list[Violation] = []
    learnt = {"tools/list": profile.tools, "prompts/list": profile.prompts, "resources/list": profile.resources}
    seen: Counter[str] = Counter()
    for index, answer in sorted(obs.answers.items()):
        method = obs.steps[index].method
        message = answer.message
        result = message.get("result") if isinstance(message, dict) else None
        if method not in LISTS or not isinstance(result, dict) or "nextCursor" in result:
            continue
        seen[method] += 1
        key, field = LISTS[method]
        now, first = _identities(result.get(key), field), _identities(learnt[method], field)
        if now != first:
            added = sorted((Counter(now) - Counter(first)).elements())
            removed = sorted((Counter(first) - Counter(now)).elements())
            out.append(
                Violation(
                    "list-stable",
                    f"{method} answer #{seen[method]} differs from the first list: added {added}, removed {removed}",
                    index,
                )
            )
    return out


def _describe(step: Step) -> str:
    if step.tool is not None:
        return f"tools/call {step.tool!r}"
    return step.method or step.kind


def check(obs: Observation, profile: Profile) -> list[Violation]:
    """Every violation in the observation, most severe first."""
    out: list[Violation] = []
    steps = obs.steps
    if obs.died_after is not None:
        step = steps[obs.died_after] if 0 <= obs.died_after < len(steps) else None
        what = f"after {_describe(step)}" if step else "before the first message"
        tail = obs.stderr_tail.strip().splitlines()[-3:]
        out.append(
            Violation(
                "server-alive",
                f"the server exited (status {obs.exit_status}) {what}"
                + (f"; stderr: {' | '.join(tail)}" if tail else ""),
                obs.died_after,
            )
        )
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
        out.append(Violation("answer-deadline", f"no answer to {_describe(steps[index])} within the deadline", index))
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
                "subscription-ack",
                f"{_describe(steps[index])}: no {steps[index].expect} within the deadline",
                index,
            )
        )
    for stray in obs.strays:
        step = steps[stray.step] if 0 <= stray.step < len(steps) else None
        msg = stray.message
        if step is not None and step.kind == "notification":
            out.append(
                Violation(
                    "notification-silence",
                    f"the notification {step.method!r} was answered: {_short(msg)}",
                    stray.step,
                )
            )
        elif step is not None and step.kind == "malformed":
            if (judged := malformed_answer(step, msg, profile.revision)) is not None:
                out.append(Violation(judged.oracle, judged.message, stray.step))
        elif msg.get("id") is not None or "result" in msg:
            out.append(Violation("one-answer", f"an answer matched no outstanding request: {_short(msg)}", stray.step))
    for index, answer in sorted(obs.answers.items()):
        step, msg = steps[index], answer.message
        problem = _shape(msg)
        if problem is not None:
            out.append(Violation("answer-shape", f"answer to {_describe(step)}: {problem}", index))
            continue
        if "error" in msg:
            code = msg["error"]["code"]
            if not legal_error_code(code, profile.revision):
                out.append(Violation("error-code", f"{_describe(step)} answered with reserved code {code}", index))
            continue  # an error is always an acceptable answer (invalid arguments, malformed input included)
        result = msg["result"]
        if step.kind == "malformed":
            out.append(Violation("malformed-input", f"a malformed request got a result: {_short(msg)}", index))
            continue
        invalid = _schema_errors(profile.revision, step.method, result)
        if invalid is not None:
            out.append(Violation("answer-shape", f"answer to {_describe(step)}: {invalid}", index))
        if step.method == "tools/list" and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                if not isinstance(tool, dict):
                    continue
                for key in ("inputSchema", "outputSchema"):
                    if key in tool and (problem := schema_problem(tool[key])) is not None:
                        name = tool.get("name")
                        out.append(Violation("tool-schema", f"tool {name!r}: {key} {problem}", index))
        if step.method == "tools/call" and result.get("isError") is not True:
            schema = profile.output_schema(step.tool)
            if isinstance(schema, dict):
                structured = result.get("structuredContent")
                if structured is None:
                    out.append(Violation("output-schema", f"{_describe(step)} returned no structuredContent", index))
                elif not is_valid(validator_for(schema), structured):
                    out.append(
                        Violation(
                            "output-schema",
                            f"{_describe(step)}: structuredContent {_short(structured)} breaks the outputSchema",
                            index,
                        )
                    )
            if step.valid is False:
                out.append(
                    Violation(
                        "invalid-args-refused",
                        f"{_describe(step)} accepted arguments its inputSchema rejects",
                        index,
                    )
                )
    for note in obs.notifications:
        problem = _notification_errors(profile.revision, note) if isinstance(note, dict) else None
        if problem is not None:
            out.append(Violation("answer-shape", f"notification {note.get('method')!r}: {problem}", None))
    if obs.noise:
        out.append(Violation("stdout-clean", f"{len(obs.noise)} non-JSON-RPC stdout line(s): {_short(obs.noise[0])}"))
    out.sort(key=lambda v: v.info.severity != "error")  # stable: errors first, each kind in its order
    return out
