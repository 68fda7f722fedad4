"""The server's shortcut for a simple request: whatever it reads, h11 reads the same way.

A differential property test builds requests from pieces that include every trap of RFC 9112
(bare CR or LF, folded lines, blanks before a colon, repeated or listed lengths, transfer codings,
missing or repeated Host, NUL and control bytes, truncated bodies, other versions) and checks
that each request the shortcut accepts is one h11 accepts, with the same method, target,
headers, body and the same bytes consumed, in the same state (no 100-continue, no protocol
switch). The shortcut declining is always safe (h11 then reads the bytes); the examples show it
declines what it must and accepts what clients send.
"""

from __future__ import annotations

import h11
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpwire.protocol.http1 import SimpleRequest, read_simple_request

BODY = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}'
MCP_CALL = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8750\r\nAccept: application/json, text/event-stream\r\n"
    b"Content-Type: application/json\r\nMcp-Session-Id: 5f2a1c0e\r\nMcp-Protocol-Version: 2025-11-25\r\n"
    b"Content-Length: %d\r\n\r\n" % len(BODY)
) + BODY


def h11_reading(data: bytes, limit: int) -> tuple[h11.Request, bytes, bytes, h11.Connection] | None:
    """What h11 reads from ``data`` as a server: the request, its body, the bytes left, the
    connection; None when it refuses the bytes or needs more to finish the request."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=limit)
    conn.receive_data(data)
    try:
        request = conn.next_event()
        if type(request) is not h11.Request:
            return None
        body = b""
        while True:
            event = conn.next_event()
            if type(event) is h11.Data:
                body += event.data
            elif type(event) is h11.EndOfMessage:
                return request, body, conn.trailing_data[0], conn
            else:
                return None
    except h11.RemoteProtocolError:
        return None


def assert_read_alike(data: bytes, limit: int = 65536) -> SimpleRequest | None:
    simple = read_simple_request(data, limit)
    if simple is None:
        return None
    read = h11_reading(data, limit)
    assert read is not None, f"the shortcut accepted what h11 refuses: {data!r}"
    request, body, rest, conn = read
    assert (simple.method, simple.target, simple.http_version) == (
        request.method,
        request.target,
        request.http_version,
    )
    assert simple.headers == [(name.lower(), value) for name, value in request.headers.raw_items()]
    assert simple.body == body
    assert data[simple.size :] == rest
    assert simple.head_size <= limit
    closes = any(
        name == b"connection" and b"close" in [token.strip() for token in value.lower().split(b",")]
        for name, value in simple.headers
    )
    assert conn.their_state is (h11.MUST_CLOSE if closes else h11.DONE)
    assert conn.our_state is h11.SEND_RESPONSE
    assert not conn.they_are_waiting_for_100_continue
    return simple


# -- the differential property ---------------------------------------------------------------

GOOD_METHODS = [b"GET", b"POST", b"DELETE", b"OPTIONS", b"post"]
BAD_METHODS = [b"CONNECT", b"G ET", b"", b"P\x00ST", b"GET\t"]
GOOD_TARGETS = [b"/mcp", b"/a?b=c&d", b"*", b"http://x/y", b"/%00", b"/\"'<>"]
BAD_TARGETS = [b"/ sp", b"/\x7f", b"/\xff", b""]
GOOD_VERSIONS = [b"HTTP/1.1"]
BAD_VERSIONS = [b"HTTP/1.0", b"HTTP/2.0", b"http/1.1", b"HTTP/1.1 ", b"HTTP/1.10"]
GOOD_NAMES = [b"Host", b"host", b"HOST", b"Content-Length", b"content-length", b"Connection", b"X-A", b"x-b!#$%"]
BAD_NAMES = [
    b"Transfer-Encoding",
    b"Expect",
    b"Upgrade",
    b"Bad Name",
    b"",
    b"X\x00",
    b"X:Y",
    b" Host",
    b"Host ",
    b"\tX",
    b"X\x80",
]
GOOD_VALUES = [b"", b"1", b"0", b"close", b"keep-alive", b"a  b", b"a\x01b\x7f\xff", b"\tvalue\t", b"127.0.0.1:8750"]
BAD_VALUES = [
    b"05",
    b"5, 5",
    b"5,6",
    b"-1",
    b"+5",
    b" 5 ",
    b"99999999999999999999",
    b"chunked",
    b"gzip, chunked",
    b"100-continue",
    b"websocket",
    b"a\x00b",
    b"a\rb",
    b"a\nb",
]
GOOD_ENDS = [b"\r\n"]
BAD_ENDS = [b"\n", b"\r", b"\r\r\n", b" \r\n"]
GOOD_SEPARATORS = [b": ", b":", b":\t", b":  "]
BAD_SEPARATORS = [b" : ", b"::", b" :"]


def pick(draw: st.DrawFn, good: list[bytes], bad: list[bytes]) -> bytes:
    """Mostly a good piece, sometimes a bad one: enough requests are accepted to compare."""
    return draw(st.sampled_from(good if draw(st.integers(0, 11)) else bad))


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    body = draw(st.binary(max_size=12))
    line = pick(draw, GOOD_METHODS, BAD_METHODS) + b" " + pick(draw, GOOD_TARGETS, BAD_TARGETS) + b" "
    line += pick(draw, GOOD_VERSIONS, BAD_VERSIONS) + pick(draw, GOOD_ENDS, BAD_ENDS)
    prefix = pick(draw, [b""], [b"\r\n", b"\n", b" "])
    fields: list[bytes] = []
    if draw(st.integers(0, 9)):
        fields.append(b"Host: h" + pick(draw, GOOD_ENDS, BAD_ENDS))
    if body and draw(st.integers(0, 4)):
        length = b"%d" % (len(body) - draw(st.sampled_from([0, 0, 0, 1, -1])))
        fields.append(b"Content-Length: " + length + pick(draw, GOOD_ENDS, BAD_ENDS))
    for _ in range(draw(st.integers(0, 5))):
        if not draw(st.integers(0, 14)):  # an obsolete line folding, or a blank line
            fields.append(draw(st.sampled_from([b" folded", b"\tfolded", b""])) + pick(draw, GOOD_ENDS, BAD_ENDS))
            continue
        name = pick(draw, GOOD_NAMES, BAD_NAMES)
        value = draw(st.one_of(st.sampled_from(GOOD_VALUES), st.sampled_from(BAD_VALUES), st.binary(max_size=6)))
        fields.append(name + pick(draw, GOOD_SEPARATORS, BAD_SEPARATORS) + value + pick(draw, GOOD_ENDS, BAD_ENDS))
    fields = draw(st.permutations(fields))
    blank = pick(draw, [b"\r\n"], [b"\n", b"", b" \r\n"])
    return prefix + line + b"".join(fields) + blank + body + draw(st.sampled_from([b"", b"GET / HTTP/1.1\r\n"]))


@settings(max_examples=3000, deadline=None)
@given(requests(), st.sampled_from([65536, 64, 40]))
@example(MCP_CALL, 65536)
@example(b"GET /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nConnection: close\r\n\r\n\x00", 65536)
def test_what_the_shortcut_reads_h11_reads_the_same_way(data: bytes, limit: int) -> None:
    assert_read_alike(data, limit)


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_a_changed_byte_anywhere_is_read_alike_or_declined(data: st.DataObject) -> None:
    raw = bytearray(MCP_CALL)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 9, 10, 13, 32, 44, 58, 127, 255, ord("a"), ord("5")]))
    assert_read_alike(bytes(raw))


# -- what it accepts, what it declines -------------------------------------------------------


def test_an_mcp_call_is_read_whole_with_what_follows_it_left() -> None:
    simple = assert_read_alike(MCP_CALL + b"GET / HTTP/1.1\r\n")
    assert simple is not None
    assert (simple.method, simple.target, simple.body) == (b"POST", b"/mcp", BODY)
    assert simple.headers[0] == (b"host", b"127.0.0.1:8750")
    assert simple.size == len(MCP_CALL) and simple.head_size == len(MCP_CALL) - len(BODY)


def test_a_request_without_a_body_and_one_with_blanks_around_values() -> None:
    simple = assert_read_alike(b"GET /mcp?x=1 HTTP/1.1\r\nHost: h\r\nX-A:\t a  b \t\r\nX-Empty:\r\n\r\n")
    assert simple is not None
    assert simple.headers == [(b"host", b"h"), (b"x-a", b"a  b"), (b"x-empty", b"")]
    assert simple.body == b""


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(MCP_CALL[:-1], id="body not complete"),
        pytest.param(MCP_CALL[:40], id="head not complete"),
        pytest.param(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", id="chunked"),
        pytest.param(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", id="two lengths"
        ),
        pytest.param(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 1\r\n\r\nx", id="a list of lengths"),
        pytest.param(b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", id="expect"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", id="upgrade"),
        pytest.param(b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", id="connect"),
        pytest.param(b"GET / HTTP/1.1\r\nX: a\r\n\r\n", id="no host"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", id="two hosts"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n", id="folded line"),
        pytest.param(b"GET / HTTP/1.1\nHost: h\n\n", id="bare line feeds"),
        pytest.param(b"GET / HTTP/1.1\r\nHost : h\r\n\r\n", id="blank before the colon"),
        pytest.param(b"GET / HTTP/1.0\r\nHost: h\r\n\r\n", id="HTTP/1.0"),
        pytest.param(b"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", id="empty line first"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n", id="NUL in a value"),
    ],
)
def test_what_h11_must_read_is_declined(data: bytes) -> None:
    assert read_simple_request(data, 65536) is None


def test_a_head_over_the_limit_is_declined() -> None:
    assert read_simple_request(MCP_CALL, len(MCP_CALL) - len(BODY)) is not None
    assert read_simple_request(MCP_CALL, len(MCP_CALL) - len(BODY) - 1) is None
