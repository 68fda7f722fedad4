"""Hypothesis strategies for protocol messages: valid ones for each revision, and near-valid mutations.

Theory of operation: a strategy here draws a :class:`~fuzz.exchange.Step` (or a short list of
them) for a given :class:`~fuzz.exchange.Profile`, so requests carry the era's ``_meta`` and the
revision's method names. There are five kinds, one protocol phase each:

- ``requests``: requests valid against the revision's ``schema.json`` (every ``ClientRequest``
  of the revision but ``initialize`` and the long-lived ``subscriptions/listen``; params built
  from their schema by :mod:`fuzz.schemas` and filtered through the schema's validator), plus
  unknown methods. Ids are extreme but legal (JR-02: string or integer, never null). Each must
  get exactly one answer. Without the schema, the built-in method lists below are used.
- ``notifications``: the revision's ``ClientNotification`` messages (valid, random values) and
  unknown ones: never answered (JR-07).
- ``mutations``: a valid request with one thing wrong: a required param missing, a param of the
  wrong type, params that are not an object, the method's case changed, an unknown member, a
  huge string, deep nesting (still a request: it must be answered, with an error), or a broken
  envelope (no or wrong ``jsonrpc``, truncated, trailing garbage: a malformed line), or a lenient
  case (a fractional id, invalid UTF-8 inside a string: answered or not, never a crash).
- ``malformed``: lines that are not a message at all (invalid JSON, invalid UTF-8, wrong member
  types, null or structured ids, scalars, deep nesting, huge lines).
- ``framing``: a valid request written in pieces with pauses between them (must be answered),
  CRLF or a BOM (may be answered), two messages on one line, a message spread over several
  lines, blank and NUL lines (malformed).

Malformed lines may be answered with an error or ignored, and never crash the server. The first
branch of every ``one_of`` is the simplest, so shrinking ends at a readable example.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from hypothesis import strategies as st

from . import mcp_schema
from .exchange import Deep, Profile, Step, dumps, notification, request
from .schemas import SchemaError, Walker, is_valid

__all__ = [
    "PROTOCOL_KINDS",
    "framing_steps",
    "malformed_lines",
    "mutated_requests",
    "notifications",
    "protocol_steps",
    "request_ids",
    "requests",
    "schema_request",
    "schema_requests",
]

PROTOCOL_KINDS = ("requests", "notifications", "mutations", "malformed", "framing")
#: requests the protocol phase does not send on its own: the handshake, and the long-lived
#: subscription stream (the stateful machine opens and cancels that one)
NOT_SENT = frozenset({"initialize", "subscriptions/listen"})

LEGACY_METHODS = (
    "ping",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "logging/setLevel",
    "completion/complete",
    "resources/read",
    "prompts/get",
    "tools/call",
)
MODERN_METHODS = (
    "server/discover",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "completion/complete",
    "resources/read",
    "prompts/get",
    "tools/call",
)
NOTIFICATIONS = (
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "notifications/initialized",
    "notifications/x-unknown",
)

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
json_values: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
params_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=3)

#: JR-02: strings or integers; the extremes servers mishandle (64-bit overflow, -0, unicode).
request_ids = (
    st.integers(min_value=1, max_value=1000)
    | st.sampled_from([-1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 + 7, 10**30])
    | st.text(min_size=0, max_size=10)
    | st.sampled_from(["1", "", "\x00", "\u202e", "id with spaces", "😀"])
)


def _generic_requests(profile: Profile) -> st.SearchStrategy[Step]:
    methods = MODERN_METHODS if profile.era == "modern" else LEGACY_METHODS
    return st.builds(
        lambda rid, m, p: request(rid, m, profile.params(p)),
        request_ids,
        st.sampled_from(methods),
        st.none() | params_objects,
    )


def _known_names(profile: Profile, method: str) -> list[str]:
    if method == "tools/call":
        return [str(t["name"]) for t in profile.tools if isinstance(t.get("name"), str)]
    if method == "prompts/get":
        return [str(p["name"]) for p in profile.prompts if isinstance(p.get("name"), str)]
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        return [str(r["uri"]) for r in profile.resources if isinstance(r.get("uri"), str)]
    return []


def _message_strategy(profile: Profile, kind: mcp_schema.MessageType) -> st.SearchStrategy[dict[str, Any]] | None:
    """Valid params of one message type, with names of real tools, prompts and resources mixed in."""
    doc = mcp_schema.document(profile.revision)
    if doc is None:
        return None
    walker = Walker(doc)
    schema = kind.params
    try:
        if isinstance(schema, dict) and "$ref" in schema:
            schema = walker.resolve(schema["$ref"])
        if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
            # _meta is the era's business (Profile.params): drawing it would only be overwritten
            props = {k: v for k, v in schema["properties"].items() if k != "_meta"}
            required = [r for r in schema.get("required", []) if r != "_meta"]
            schema = {**schema, "properties": props, "required": required}
        params = walker.build(schema, 1)
    except SchemaError:
        return None
    key = "uri" if kind.method.startswith("resources/") else "name"
    names = _known_names(profile, kind.method)

    def fill(value: Any, name: str | None) -> dict[str, Any]:
        filled: dict[str, Any] = dict(value) if isinstance(value, dict) else {}
        if name is not None:
            filled[key] = name
        return filled

    known: st.SearchStrategy[str | None] = st.none() | st.sampled_from(names) if names else st.none()
    return st.builds(fill, params, known)


def schema_request(profile: Profile, kind: mcp_schema.MessageType) -> st.SearchStrategy[Step] | None:
    """Requests of one message type, valid against its definition (``None`` without the schema)."""
    strategy = _message_strategy(profile, kind)
    if strategy is None:
        return None
    check = mcp_schema.validator(profile.revision, kind.definition)

    def build(rid: int | str, params: dict[str, Any]) -> Step:
        return request(rid, kind.method, profile.params(params) if params or kind.params_required else None)

    def valid(step: Step) -> bool:
        return check is None or is_valid(check, json.loads(step.line))

    return st.builds(build, request_ids, strategy).filter(valid)


def schema_requests(profile: Profile) -> st.SearchStrategy[Step]:
    """A request valid against the revision's schema (``ClientRequest``); exactly one answer (SV-02)."""
    kinds = [k for k in mcp_schema.client_requests(profile.revision) if k.method not in NOT_SENT]
    if profile.era == "modern":
        kinds = [k for k in kinds if k.method != "ping"]  # LC-30
    options = [s for k in kinds if (s := schema_request(profile, k)) is not None]
    return st.one_of(options) if options else _generic_requests(profile)


def requests(profile: Profile) -> st.SearchStrategy[Step]:
    """A request of a method of the revision, valid against its schema when the schema is there
    (with random params otherwise), or an unknown method: exactly one answer."""
    unknown = st.builds(
        lambda rid, m, p: request(rid, "x-fuzz/" + m, profile.params(p)),
        request_ids,
        st.text(min_size=1, max_size=12),
        st.none() | params_objects,
    )
    known = schema_requests(profile) if mcp_schema.client_requests(profile.revision) else _generic_requests(profile)
    return known | unknown


def notifications(profile: Profile) -> st.SearchStrategy[Step]:
    """A notification of the revision (valid, random values) or an unknown one: never answered (JR-07)."""
    unknown = st.builds(
        lambda m, p: notification(m, p),
        st.sampled_from(NOTIFICATIONS) | st.text(min_size=1, max_size=12),
        st.none() | params_objects,
    )
    known: list[st.SearchStrategy[Any]] = []
    for kind in mcp_schema.client_notifications(profile.revision):
        strategy = _message_strategy(profile, kind)
        if strategy is not None:
            method: str = kind.method
            known.append(strategy.map(functools.partial(_notification_of, method)))
    return st.one_of(*known, unknown) if known else unknown


def _deep(depth: int) -> Step:
    """A valid request whose params nest ``depth`` arrays: answered, or refused with a null-id error."""
    line = '{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"x":' + "[" * depth + "]" * depth + "}}"
    return Step(line.encode(), "request", "deep", "ping")


def _malformed(line: bytes) -> Step:
    return Step(line, "malformed")


#: Lines that are not a valid request, notification or response.
malformed_lines: st.SearchStrategy[Step] = st.one_of(
    # not JSON
    st.text(min_size=1, max_size=20).map(lambda t: t.encode()).filter(lambda b: b.strip() != b""),
    st.sampled_from([b"{", b"}", b"[", b'{"jsonrpc":"2.0",', b"null", b"[]", b"{}", b"\x00", b"\xef\xbb\xbf{}"]),
    # invalid UTF-8 inside an otherwise fine request
    st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]).map(
        lambda bad: b'{"jsonrpc":"2.0","id":1,"method":"p' + bad + b'ing"}'
    ),
    # JSON, but not a request: wrong member types, null/structured ids, scalars, empty batch
    st.builds(
        lambda rid, method: dumps({"jsonrpc": "2.0", "id": rid, "method": method}),
        st.none()
        | st.booleans()
        | st.lists(st.integers(), max_size=2)
        | st.dictionaries(st.text(max_size=2), st.integers()),
        st.just("ping"),
    ),
    st.builds(
        lambda method: dumps({"jsonrpc": "2.0", "id": 1, "method": method}),
        st.integers() | st.none() | st.lists(st.integers(), max_size=2) | st.booleans(),
    ),
    st.builds(
        lambda params: dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": params}),
        st.integers() | st.text(max_size=4) | st.booleans(),
    ),
    json_values.filter(lambda v: not isinstance(v, dict)).map(dumps),
).map(_malformed) | st.one_of(
    # valid, but deeply nested or huge: a request (answered) and a notification (not answered)
    st.integers(min_value=100, max_value=100_000).map(_deep),
    st.integers(min_value=1000, max_value=1_000_000).map(lambda n: notification("x-fuzz/" + "a" * n)),
)


def protocol_steps(profile: Profile, kind: str = "any") -> st.SearchStrategy[list[Step]]:
    """One to three protocol messages of ``kind`` (one of :data:`PROTOCOL_KINDS`, or any);
    request ids are kept unique within the example."""
    valid = requests(profile)
    by_kind: dict[str, st.SearchStrategy[Step]] = {
        "requests": valid,
        "notifications": notifications(profile),
        "mutations": mutated_requests(profile, valid),
        "malformed": malformed_lines,
        "framing": framing_steps(profile, valid),
    }
    one = by_kind[kind] if kind in by_kind else st.one_of(*by_kind.values())

    def unique(steps: list[Step]) -> bool:
        ids = [s.request_id for s in steps if s.kind == "request"]
        keys = [(type(i).__name__, i) for i in ids]
        return len(set(keys)) == len(keys) and all(not (type(i) is int and i == 0) for i in ids)

    return st.lists(one, min_size=1, max_size=3).filter(unique)


# -- mutations of valid requests ----------------------------------------------------------------------


def _notification_of(method: str, params: Any) -> Step:
    return notification(method, params or None)


def _wrong_type(value: Any) -> st.SearchStrategy[Any]:
    candidates: tuple[Any, ...] = (None, True, -1, "x", [], {})
    return st.sampled_from([v for v in candidates if type(v) is not type(value)])


def mutated_requests(profile: Profile, valid: st.SearchStrategy[Step] | None = None) -> st.SearchStrategy[Step]:
    """A valid request (from ``valid``, default :func:`requests`) with one thing wrong (see the
    module docstring for the kinds)."""
    return _mutated(valid if valid is not None else requests(profile))


@st.composite
def _mutated(draw: st.DrawFn, valid: st.SearchStrategy[Step]) -> Step:
    base = draw(valid)
    message: dict[str, Any] = json.loads(base.line)
    rid, method = message["id"], message["method"]
    params = message.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    own = [k for k in params if k != "_meta"]
    mutation = draw(
        st.sampled_from(
            [
                "drop-param",
                "wrong-type-param",
                "params-not-object",
                "method-case",
                "extra-member",
                "huge-string",
                "deep-params",
                "no-jsonrpc",
                "wrong-jsonrpc",
                "truncated",
                "trailing-garbage",
                "fractional-id",
                "utf8-in-param",
            ]
        ),
        label="mutation",
    )
    if mutation == "drop-param" and own:
        params.pop(draw(st.sampled_from(own)))
        return request(rid, method, params)
    if mutation == "wrong-type-param" and own:
        name = draw(st.sampled_from(own))
        params[name] = draw(_wrong_type(params[name]))
        return request(rid, method, params)
    if mutation == "params-not-object":
        return request(rid, method, draw(st.sampled_from([[], [1], "x", 0, True])))  # type: ignore[arg-type]
    if mutation == "method-case":
        return request(rid, method.swapcase(), params or None)
    if mutation == "extra-member":
        return Step(dumps({**message, "x-unknown": {"a": 1}}), "request", rid, method)
    if mutation == "huge-string":
        size = draw(st.integers(min_value=100_000, max_value=1_000_000))
        return request(rid, method, {**params, "x-huge": "a" * size})
    if mutation == "deep-params":
        depth = draw(st.integers(min_value=100, max_value=50_000))
        return request(rid, method, {**params, "x-deep": Deep(depth)})
    if mutation == "no-jsonrpc":
        return Step(dumps({k: v for k, v in message.items() if k != "jsonrpc"}), "malformed")
    if mutation == "wrong-jsonrpc":
        version = draw(st.sampled_from(["1.0", "2", 2.0, None, ""]))
        return Step(dumps({**message, "jsonrpc": version}), "malformed")
    line = base.line
    if mutation == "truncated":
        cut = draw(st.integers(min_value=1, max_value=max(1, len(line) - 1)))
        return Step(line[:cut], "malformed")
    if mutation == "trailing-garbage":
        return Step(line + draw(st.sampled_from([b" x", b"}", b",", b"]", b" {}", b"\x00"])), "malformed")
    if mutation == "fractional-id":
        # JSON-RPC 2.0: ids "SHOULD NOT contain fractional parts": may be answered (same id) or refused
        return Step(dumps({**message, "id": 1.5}), "request", 1.5, method, answer="optional")  # type: ignore[arg-type]
    if mutation == "utf8-in-param":
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]))
        raw = dumps({**message, "params": {**params, "x-text": "@@bad@@"}}).replace(b"@@bad@@", b"ok" + bad)
        return Step(raw, "request", rid, method, answer="optional")
    return base


# -- broken framing ----------------------------------------------------------------------------------


def framing_steps(profile: Profile, valid: st.SearchStrategy[Step] | None = None) -> st.SearchStrategy[Step]:
    """A valid request written oddly (see the module docstring); on HTTP only the bytes matter."""
    return _framed(valid if valid is not None else requests(profile))


@st.composite
def _framed(draw: st.DrawFn, valid: st.SearchStrategy[Step]) -> Step:
    base = draw(valid)
    line = base.line
    case = draw(
        st.sampled_from(
            ["pieces", "crlf", "bom", "two-on-one-line", "spread-over-lines", "blank", "whitespace", "nul", "cr"]
        ),
        label="framing",
    )
    if case == "pieces":
        offsets = st.integers(min_value=1, max_value=max(1, len(line)))
        cuts = draw(st.lists(offsets, min_size=1, max_size=3, unique=True))
        return Step(line, "request", base.request_id, base.method, split=tuple(sorted(cuts)))
    if case == "crlf":
        return Step(line + b"\r\n", "request", base.request_id, base.method, answer="optional", raw=True)
    if case == "bom":
        bom = b"\xef\xbb\xbf" + line + b"\n"
        return Step(bom, "request", base.request_id, base.method, answer="optional", raw=True)
    if case == "two-on-one-line":
        second = json.loads(line)
        second["id"] = "mcpwire-fuzz-second"
        return Step(line + dumps(second) + b"\n", "malformed", raw=True)
    if case == "spread-over-lines":
        return Step(json.dumps(json.loads(line), indent=1).encode() + b"\n", "malformed", raw=True)
    if case == "blank":
        return Step(b"\n", "malformed", raw=True)
    if case == "whitespace":
        return Step(b" \t \n", "malformed", raw=True)
    if case == "nul":
        return Step(b"\x00\n", "malformed", raw=True)
    return Step(b"\r\n", "malformed", raw=True)
