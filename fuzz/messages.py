"""Hypothesis strategies for protocol messages: valid ones for each revision, and near-valid mutations.

Theory of operation: a strategy here draws a :class:`~fuzz.exchange.Step` (or a short list of
them) for a given :class:`~fuzz.exchange.Profile`, so requests carry the era's ``_meta`` and the
revision's method names. Valid requests use extreme but legal ids (JR-02: string or integer,
never null) and must each get exactly one answer; notifications must get none; malformed lines
(invalid JSON, invalid UTF-8, broken framing, wrong member types, null or structured ids, deep
nesting, huge strings) may be answered with an error or ignored, and never crash the server.
The first branch of every ``one_of`` is the simplest, so shrinking ends at a readable example.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .exchange import Profile, Step, dumps, notification, request

__all__ = ["malformed_lines", "notifications", "protocol_steps", "requests", "request_ids"]

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


def requests(profile: Profile) -> st.SearchStrategy[Step]:
    """A request of a method of the era (with random params) or an unknown one: exactly one answer."""
    methods = MODERN_METHODS if profile.era == "modern" else LEGACY_METHODS
    method = st.sampled_from(methods) | st.text(min_size=1, max_size=12).map(lambda m: "x-fuzz/" + m)
    return st.builds(
        lambda rid, m, p: request(rid, m, profile.params(p)),
        request_ids,
        method,
        st.none() | params_objects,
    )


def notifications(profile: Profile) -> st.SearchStrategy[Step]:
    """A notification, known or not, with random params: never answered (JR-07)."""
    return st.builds(
        lambda m, p: notification(m, p),
        st.sampled_from(NOTIFICATIONS) | st.text(min_size=1, max_size=12),
        st.none() | params_objects,
    )


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
    """One to three protocol messages of ``kind`` (requests, notifications, malformed or any);
    request ids are kept unique within the example."""
    by_kind = {
        "requests": requests(profile),
        "notifications": notifications(profile),
        "malformed": malformed_lines,
    }
    one = by_kind[kind] if kind in by_kind else st.one_of(*by_kind.values())

    def unique(steps: list[Step]) -> bool:
        ids = [s.request_id for s in steps if s.kind == "request"]
        keys = [(type(i).__name__, i) for i in ids]
        return len(set(keys)) == len(keys) and all(not (type(i) is int and i == 0) for i in ids)

    return st.lists(one, min_size=1, max_size=3).filter(unique)
