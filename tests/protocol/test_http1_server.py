"""The server's HTTP/1.1 codec against h11's server side: what one reads, the other reads the same
way; what one refuses, the other refuses with the same status; responses are the same bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h11
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcpwire.errors import LocalProtocolError
from mcpwire.protocol.http1_server import (
    CLOSED,
    END,
    NEED_DATA,
    BadRequest,
    Request,
    ServerConnection,
    _all_valid,
    _check_value,
)

MAX_HEAD = 4096

# -- reading requests -------------------------------------------------------------------------

TOKENS = st.sampled_from([b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"X-Y"])
BAD_BYTES = st.sampled_from(
    [b"\x00", b"\x01", b"\r", b"\n", b" ", b"\t", b"\x0b", b"\x0c", b"\x1f", b"\x7f", b"\x80", b"\xff", b":", b"@"]
)


def _mutate(value: bytes, bad: bytes | None, where: int) -> bytes:
    if bad is None:
        return value
    where %= len(value) + 1
    return value[:where] + bad + value[where:]


@st.composite
def request_bytes(draw: st.DrawFn) -> bytes:
    method = draw(TOKENS)
    target = draw(st.sampled_from([b"/", b"/mcp", b"/a?b=c", b"*", b"http://x/y", b"/%20"]))
    version = draw(st.sampled_from([b"1.1", b"1.1", b"1.0", b"2.0", b"0.9"]))
    line = method + b" " + target + b" HTTP/" + version
    if draw(st.integers(0, 9)) == 0:
        line = _mutate(line, draw(BAD_BYTES), draw(st.integers(0, 40)))
    names = st.sampled_from(
        [b"Host", b"host", b"Accept", b"X-Trace-ID", b"Connection", b"Expect", b"Content-Type", b"User-Agent"]
    )
    values = st.sampled_from(
        [
            b"a",
            b"example.com",
            b"close",
            b"keep-alive",
            b"Keep-Alive, Close",
            b"100-continue",
            b"x y",
            b"x \t y",
            b"\xc3\xa9",
            b"",
        ]
    )
    headers: list[bytes] = []
    hosts = draw(st.sampled_from([1, 1, 1, 0, 2]))
    headers += [b"Host: h" for _ in range(hosts)]
    for _ in range(draw(st.integers(0, 4))):
        name, value = draw(names), draw(values)
        blank = draw(st.sampled_from([b"", b" ", b"\t", b"  "]))
        field = name + b":" + blank + value + draw(st.sampled_from([b"", b" ", b"\t"]))
        if draw(st.integers(0, 12)) == 0:
            field = _mutate(field, draw(BAD_BYTES), draw(st.integers(0, 30)))
        headers.append(field)
        if draw(st.integers(0, 15)) == 0:
            headers.append(draw(st.sampled_from([b" folded", b"\tmore"])))
    body_kind = draw(st.sampled_from(["none", "length", "length", "chunked", "both", "bad-length", "bad-coding"]))
    body = draw(st.binary(max_size=40))
    tail = b""
    if body_kind in ("length", "both"):
        count = len(body) if draw(st.integers(0, 5)) else len(body) + draw(st.integers(-2, 3))
        headers.append(
            b"Content-Length: "
            + draw(st.sampled_from([b"%d", b"%d, %d", b" %d"])).replace(b"%d", b"%d" % max(count, 0))
        )
        if draw(st.integers(0, 6)) == 0:
            headers.append(b"Content-Length: %d" % draw(st.sampled_from([max(count, 0), max(count, 0) + 1])))
    if body_kind == "bad-length":
        headers.append(b"Content-Length: " + draw(st.sampled_from([b"-1", b"1x", b"", b"1,2", b"9" * 21])))
    if body_kind in ("chunked", "both"):
        headers.append(b"Transfer-Encoding: " + draw(st.sampled_from([b"chunked", b"Chunked", b" chunked "])))
        if draw(st.integers(0, 8)) == 0:
            headers.append(b"Transfer-Encoding: chunked")
    if body_kind == "bad-coding":
        headers.append(b"Transfer-Encoding: " + draw(st.sampled_from([b"gzip", b"gzip, chunked", b"identity"])))
    if body_kind in ("chunked", "both"):
        pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
        out = b""
        for piece in pieces:
            ext = draw(st.sampled_from([b"", b";a=b", b" ", b";x\r"]))
            size = b"%x" % len(piece)
            if draw(st.integers(0, 10)) == 0:
                size = draw(st.sampled_from([b"g", b"", b"-1", b"1" * 21]))
            out += size + ext + b"\r\n" + piece + draw(st.sampled_from([b"\r\n", b"\r\n", b"\n", b"xx"]))
        out += b"0\r\n"
        out += draw(st.sampled_from([b"", b"Trailer: x\r\n", b"Content-Length: 5\r\n", b"bad trailer\r\n"]))
        out += b"\r\n"
        body = out
    elif body_kind not in ("length", "both"):
        body = b""
    eol = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))
    head = line + eol + b"".join(h + eol for h in headers) + eol
    if draw(st.integers(0, 20)) == 0:
        head = eol + head
    if draw(st.booleans()):
        tail = b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n"
    return head + body + tail


def _drive(step: Callable[[], Any], feed: Callable[[bytes], None], chunks: list[bytes], eof: bool) -> list[Any]:
    """What a reader makes of ``chunks`` (then the end of the stream, with ``eof``): ``step``
    gives the next event as a plain value (None when it needs data; a value ending in the request
    or the connection ends the list)."""
    out: list[Any] = []
    pending = [*chunks, b""] if eof else list(chunks)
    while True:
        event = step()
        if event is None:
            if not pending:
                return [*out, "need-data"]
            feed(pending.pop(0))
            continue
        out.append(event)
        if event in ("end", "closed") or event[0] == "error":
            return out


def _h11_events(chunks: list[bytes], eof: bool) -> list[Any]:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)

    def step() -> Any:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            return ("error", exc.error_status_hint)
        if event is h11.NEED_DATA:
            return None
        if type(event) is h11.Request:
            headers = [(name.lower(), value) for name, value in event.headers.raw_items()]
            return ("request", event.method, event.target, event.http_version, headers)
        if type(event) is h11.Data:
            return ("data", bytes(event.data))
        # EndOfMessage, or PAUSED after it: one request, whose cycle needs a response first
        return "closed" if type(event) is h11.ConnectionClosed else "end"

    return _drive(step, conn.receive_data, chunks, eof)


def _our_events(chunks: list[bytes], eof: bool) -> list[Any]:
    conn = ServerConnection(max_head_bytes=MAX_HEAD)

    def step() -> Any:
        try:
            event = conn.next_event()
        except BadRequest as exc:
            return ("error", exc.status)
        if event is NEED_DATA:
            return None
        if isinstance(event, Request):
            return ("request", event.method, event.target, event.http_version, event.headers)
        if isinstance(event, bytes):
            return ("data", event)
        assert event in (END, CLOSED)
        return "end" if event is END else "closed"

    return _drive(step, conn.receive_data, chunks, eof)


def _merged(events: list[Any]) -> list[Any]:
    """Body pieces joined: how a body is cut into events is not part of what is read."""
    out: list[Any] = []
    for event in events:
        if isinstance(event, tuple) and event[0] == "data":
            if out and isinstance(out[-1], tuple) and out[-1][0] == "data":
                out[-1] = ("data", out[-1][1] + event[1])
                continue
            if not event[1]:
                continue
        out.append(event)
    return out


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return [p for p in pieces if p]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_bytes(), st.lists(st.integers(0, 400), max_size=4), st.booleans())
@example(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", [], False)
@example(b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", [], False)
@example(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nab", [], True)
@example(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n0\r\n\r\n", [9, 30], False)
@example(b"\x16\x03\x01\x02\x00", [], False)
def test_requests_read_as_h11_reads_them(data: bytes, cuts: list[int], eof: bool) -> None:
    chunks = _cut(data, cuts)
    theirs = _merged(_h11_events(chunks, eof))
    ours = _merged(_our_events(chunks, eof))
    assert ours == theirs


@given(st.binary(max_size=200), st.lists(st.integers(0, 300), max_size=3), st.booleans())
@settings(max_examples=500, deadline=None)
def test_any_bytes_read_as_h11_reads_them(data: bytes, cuts: list[int], eof: bool) -> None:
    chunks = _cut(b"GET / HTTP/1.1\r\n" + data, cuts)
    assert _merged(_our_events(chunks, eof)) == _merged(_h11_events(chunks, eof))


def test_a_head_over_the_limit_is_431_as_in_h11() -> None:
    data = b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * (MAX_HEAD + 10)
    assert _our_events([data], False) == _h11_events([data], False) == [("error", 431)]


def test_the_next_request_is_read_after_the_cycle() -> None:
    conn = ServerConnection()
    conn.receive_data(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n")
    first = conn.next_event()
    assert isinstance(first, Request) and first.target == b"/a"
    assert conn.next_event() is END and conn.request_complete
    assert conn.buffered > 0
    with pytest.raises(LocalProtocolError):
        conn.start_next_cycle()  # the response is not written yet
    conn.response(200, [(b"content-length", b"0")])
    conn.end()
    conn.start_next_cycle()
    second = conn.next_event()
    assert isinstance(second, Request) and second.target == b"/b"


def test_closed_between_requests_and_inside_one() -> None:
    conn = ServerConnection()
    conn.receive_data(b"")
    assert conn.next_event() is CLOSED
    conn = ServerConnection()
    conn.receive_data(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab")
    assert isinstance(conn.next_event(), Request)
    assert conn.next_event() == b"ab"
    conn.receive_data(b"")
    with pytest.raises(BadRequest) as caught:
        conn.next_event()
    assert caught.value.status == 400 and conn.failed


def test_expect_100_continue_waits_until_the_body_or_an_answer() -> None:
    conn = ServerConnection()
    conn.receive_data(b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n")
    assert isinstance(conn.next_event(), Request)
    assert conn.waiting_for_100_continue
    assert conn.informational(100, [], b"Continue") == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert not conn.waiting_for_100_continue
    old = ServerConnection()
    old.receive_data(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
    assert isinstance(old.next_event(), Request) and not old.waiting_for_100_continue


# -- writing responses ------------------------------------------------------------------------

FIELD_NAMES = st.sampled_from(
    [
        b"content-type",
        b"Content-Length",
        b"content-length",
        b"transfer-encoding",
        b"Connection",
        b"x-a",
        b"Host",
        b"bad name",
        b"",
    ]
)
FIELD_VALUES = st.sampled_from(
    [b"text/plain", b"close", b"keep-alive", b"Keep-Alive, close", b"chunked", b"gzip", b"3", b"3, 3", b"2, 3", b"x",
     b" lead", b"trail ", b"a\x00b", b"a\rb", b"in side", b"\xc3\xa9", b"", b"a\tb", b"\x01"]
)  # fmt: skip


def _h11_response(
    method: bytes, version: bytes, status: int, fields: list[tuple[bytes, bytes]], pieces: list[bytes]
) -> tuple[bytes | str, bool]:
    conn = h11.Connection(h11.SERVER)
    head = b"%s / HTTP/%s\r\n" % (method, version) + (b"Host: h\r\n" if version == b"1.1" else b"") + b"\r\n"
    conn.receive_data(head)
    assert type(conn.next_event()) is h11.Request
    out = b""
    try:
        out += conn.send(h11.Response(status_code=status, headers=fields, reason=b"R"))
        for piece in pieces:
            out += conn.send(h11.Data(data=piece))
        out += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError:
        return "refused", False
    return out, conn.our_state is h11.DONE


def _our_response(
    method: bytes, version: bytes, status: int, fields: list[tuple[bytes, bytes]], pieces: list[bytes]
) -> tuple[bytes | str, bool]:
    conn = ServerConnection()
    head = b"%s / HTTP/%s\r\n" % (method, version) + (b"Host: h\r\n" if version == b"1.1" else b"") + b"\r\n"
    conn.receive_data(head)
    assert isinstance(conn.next_event(), Request)
    out = b""
    try:
        out += conn.response(status, fields, b"R")
        for piece in pieces:
            out += conn.body(piece)
        out += conn.end()
    except LocalProtocolError:
        return "refused", False
    return out, conn.keep_alive and conn.response_complete


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from([b"GET", b"HEAD", b"POST", b"CONNECT"]),
    st.sampled_from([b"1.1", b"1.0"]),
    st.sampled_from([200, 201, 204, 304, 404, 500, 999, 1000, 199, 100]),
    st.lists(st.tuples(FIELD_NAMES, FIELD_VALUES), max_size=5),
    st.lists(st.binary(max_size=4), max_size=3),
)
@example(b"GET", b"1.1", 200, [(b"content-length", b"3")], [b"abc"])
@example(b"GET", b"1.1", 200, [(b"content-type", b"text/event-stream")], [b"data: x\n\n", b""])
@example(b"HEAD", b"1.1", 200, [(b"content-length", b"3")], [])
@example(b"GET", b"1.0", 200, [], [b"ab"])
def test_responses_are_written_as_h11_writes_them(
    method: bytes, version: bytes, status: int, fields: list[tuple[bytes, bytes]], pieces: list[bytes]
) -> None:
    assert _our_response(method, version, status, fields, pieces) == _h11_response(
        method, version, status, fields, pieces
    )


def _taken_one_by_one(fields: list[tuple[bytes, bytes]]) -> bool:
    try:
        for name, value in fields:
            _check_value(name, value)
    except LocalProtocolError:
        return False
    return True


FIELD_PIECES = st.lists(
    st.sampled_from([b"a", b"Z", b"-", b":", b": ", b" ", b"\t", b"\r", b"\n", b"\r\n", b"\x00", b"\x01", b"\x0b",
                     b"\x0c", b"\x7f", b"\xe9", b"X-Injected: 1"]),
    max_size=6,
).map(b"".join)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.tuples(FIELD_PIECES, FIELD_PIECES), max_size=4))
@example([(b"x-a", b"1\r\nX-Injected: 1")])  # a line break in a value makes a line of its own
@example([(b"x-a\r\nX-Injected", b"1")])
@example([(b"X-Injected: 1", b"a")])  # a name that would read as a name and the start of a value
@example([(b"x-a", b"")])
@example([(b"x-a", b"a \t b")])
def test_the_one_pass_check_of_response_fields_takes_what_the_field_by_field_check_takes(
    fields: list[tuple[bytes, bytes]],
) -> None:
    assert _all_valid(fields) == _taken_one_by_one(fields)


def test_nothing_is_written_out_of_turn() -> None:
    conn = ServerConnection()
    with pytest.raises(LocalProtocolError):
        conn.response(200, [])
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    conn.next_event()
    with pytest.raises(LocalProtocolError):
        conn.body(b"x")
    with pytest.raises(LocalProtocolError):
        conn.informational(101, [])
    conn.response(200, [(b"content-length", b"1")])
    with pytest.raises(LocalProtocolError):
        conn.response(200, [])
    with pytest.raises(LocalProtocolError, match="Too little"):
        conn.end()
