"""The client's response reader reads what h11's client side reads, the same way.

A differential property test builds responses from pieces that include the traps of RFC 9112
(bare LF and stray CR, folded lines, blanks before a colon, odd versions, codes and reason bytes,
repeated, listed or conflicting lengths, transfer codings other than chunked, both framings at
once, malformed chunk sizes, extensions and trailers, informational heads, bodies cut short, bytes
after the response, answers to HEAD) and splits them at random points. For each one, the reader
and an h11 client connection are fed the same pieces and then the end of the stream; either both
refuse it, or both give the same heads (status, reason, version, headers), the same body, the same
bytes consumed, and the same verdict on the connection: the reader keeps it exactly when h11
does, except where it is stricter on purpose (a body framed by the end of the stream, both
``Content-Length`` and ``Transfer-Encoding``, bytes after the response).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import h11
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from mcpwire.errors import ConnectionBroken, IncompleteBody, InvalidHTTPResponse
from mcpwire.protocol.http1 import END, NEED_DATA, Head, ResponseReader

#: examples per property; the suite's default, raised for a long run with MCPWIRE_HTTP1_EXAMPLES
EXAMPLES = int(os.environ.get("MCPWIRE_HTTP1_EXAMPLES", "3000"))
BIG = 1 << 30  # no size bound on either side: the bounds are tested apart


@dataclass
class Read:
    """What one side read: its heads, the body, the bytes it consumed of those it was fed, and
    whether it keeps the connection."""

    heads: list[tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]]
    body: bytes
    consumed: int
    fed: int
    keeps: bool


def pieces_of(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def h11_read(pieces: list[bytes], method: bytes) -> Read | None:
    """h11 as a client that sent ``method``; None when it refuses the answer."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=BIG)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "h")]))
    conn.send(h11.EndOfMessage())
    heads: list[tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]] = []
    body = b""
    fed = 0
    try:
        for piece in [*pieces, b""]:
            conn.receive_data(piece)
            fed += len(piece)
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    break
                if isinstance(event, h11.InformationalResponse | h11.Response):
                    heads.append((event.status_code, event.reason, event.http_version, event.headers.raw_items()))
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    consumed = fed - len(conn.trailing_data[0])
                    return Read(heads, body, consumed, fed, conn.their_state is h11.DONE)
                else:  # PAUSED or ConnectionClosed cannot come before the end of the message
                    raise AssertionError(f"unexpected h11 event {event!r}")
    except h11.RemoteProtocolError:
        return None
    raise AssertionError("h11 neither ended the message nor refused it")


def our_read(pieces: list[bytes], method: bytes) -> tuple[Read, ResponseReader] | None:
    """The reader fed the same way; None when it refuses the answer."""
    reader = ResponseReader(max_head_bytes=BIG)
    reader.expect(head_request=method == b"HEAD")
    heads: list[tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]] = []
    body = b""
    fed = 0
    try:
        for piece in [*pieces, None]:
            if piece is None:
                reader.feed_eof()
            else:
                reader.feed(piece)
                fed += len(piece)
            while True:
                event = reader.next_event()
                if event is NEED_DATA:
                    break
                if isinstance(event, Head):
                    heads.append((event.status, event.reason, event.http_version, event.headers))
                elif event is END:
                    return Read(heads, body, fed - len(reader.trailing), fed, reader.reusable), reader
                else:
                    assert isinstance(event, bytes) and event, "a body piece is never empty"
                    body += event
    except (InvalidHTTPResponse, IncompleteBody, ConnectionBroken):
        return None
    raise AssertionError("the reader neither ended the message nor refused it")


def assert_read_alike(data: bytes, cuts: list[int] = [], method: bytes = b"POST") -> Read | None:  # noqa: B006
    pieces = pieces_of(data, cuts)
    theirs = h11_read(pieces, method)
    ours = our_read(pieces, method)
    if theirs is None:
        assert ours is None, f"the reader accepted what h11 refuses: {data!r}"
        return None
    assert ours is not None, f"the reader refused what h11 accepts: {data!r}"
    read, reader = ours
    assert read.heads == theirs.heads
    assert read.body == theirs.body
    assert read.consumed == theirs.consumed
    # Where the reader is stricter than h11 on purpose: no reuse after a body framed by the end of
    # the stream, after one with both framings, or with bytes after the response.
    names = {name.lower() for name, _ in read.heads[-1][3]}
    framings = len(names & {b"transfer-encoding", b"content-length"})
    bodiless = method == b"HEAD" or read.heads[-1][0] in (204, 304)
    stricter = (not bodiless and framings != 1) or read.consumed < read.fed
    assert read.keeps == (theirs.keeps and not stricter), (read.keeps, theirs.keeps, data)
    assert reader.complete
    return read


# -- pieces, good and bad ----------------------------------------------------------------------

ENDS = [b"\r\n", b"\r\n", b"\r\n", b"\n"]
BAD_ENDS = [b"\r", b"\r\r\n", b" \r\n", b"\n\r"]
VERSIONS = [b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]
ODD_VERSIONS = [b"HTTP/2.0", b"HTTP/0.9", b"HTTP/1.2", b"HTTP/1", b"HTTP/1.10", b"http/1.1", b"HTTP/1.1 ", b"HTTPS/1.1"]
CODES = [b"200", b"200", b"202", b"204", b"304", b"404", b"413", b"503"]
ODD_CODES = [b"100", b"101", b"103", b"199", b"099", b"000", b"999", b"20", b"2000", b"2x0", b" 200"]
REASONS = [b" OK", b" Accepted", b"", b" "]
ODD_REASONS = [b" O\x01K", b" \xff\xfe", b" a\tb", b" \x7f", b"  two  ", b" a\x00b", b" a\rb", b" a\x0bb", b" a\x0cb"]
NAMES = [b"Content-Type", b"X-A", b"mcp-session-id", b"x-b!#$%&'*+.^_`|~"]
ODD_NAMES = [b"Bad Name", b"", b"X\x00", b"X:Y", b" X", b"X ", b"\tX", b"X\x80", b"X\x7f"]
VALUES = [b"", b"a", b"application/json", b"a  b", b"a\x01b\x7f\xff", b"\tpadded\t", b"close", b"keep-alive"]
ODD_VALUES = [b"a\x00b", b"a\rb", b"a\x0bb", b"a\x0cb", b"\x85"]
SEPARATORS = [b": ", b":", b":\t", b":  "]
ODD_SEPARATORS = [b" : ", b"::", b" :"]
LENGTHS = [b"%d", b"%d", b"%d, %d", b"%d,%d", b"0%d", b" %d "]
ODD_LENGTHS = [b"", b"-1", b"+%d", b"%d, 1%d", b"1e2", b"%d,", b"0x10", b"9" * 21, b"%d;x"]
CODINGS = [b"chunked", b"Chunked", b"CHUNKED"]
ODD_CODINGS = [b"gzip", b"gzip, chunked", b"chunked, gzip", b"chunked, chunked", b"", b"identity", b"chunked;q=1"]
CONNECTIONS = [b"close", b"keep-alive", b"Keep-Alive, Close", b"upgrade,close", b"closed", b" , close"]


def pick(draw: st.DrawFn, good: list[bytes], bad: list[bytes]) -> bytes:
    """Mostly a good piece, sometimes a bad one: about half the answers are accepted, to compare."""
    return draw(st.sampled_from(good if draw(st.integers(0, 29)) else bad))


@st.composite
def field_lines(draw: st.DrawFn) -> list[bytes]:
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 3))):
        if not draw(st.integers(0, 9)):  # an obsolete line folding
            lines.append(draw(st.sampled_from([b" folded", b"\tfolded\t", b"  ", b"\t"])) + pick(draw, ENDS, BAD_ENDS))
            continue
        name = pick(draw, NAMES, ODD_NAMES)
        value = pick(draw, VALUES, ODD_VALUES) if draw(st.integers(0, 9)) else draw(st.binary(max_size=5))
        lines.append(name + pick(draw, SEPARATORS, ODD_SEPARATORS) + value + pick(draw, ENDS, BAD_ENDS))
    return lines


@st.composite
def heads(draw: st.DrawFn, *, informational: bool, length: int, chunked: bool) -> bytes:
    code = draw(st.sampled_from([b"100", b"102", b"103"])) if informational else pick(draw, CODES, ODD_CODES)
    line = pick(draw, VERSIONS, ODD_VERSIONS) + b" " + code + pick(draw, REASONS, ODD_REASONS)
    lines = [line + pick(draw, ENDS, BAD_ENDS), *draw(field_lines())]
    if chunked and draw(st.integers(0, 9)):
        lines.append(b"Transfer-Encoding: " + pick(draw, CODINGS, ODD_CODINGS) + pick(draw, ENDS, BAD_ENDS))
    if (not chunked and draw(st.integers(0, 4))) or not draw(st.integers(0, 6)):
        shown = pick(draw, LENGTHS, ODD_LENGTHS)
        shown = shown.replace(b"%d", b"%d" % (length + draw(st.sampled_from([0] * 8 + [1, -1]))))
        lines.append(b"Content-Length" + pick(draw, SEPARATORS, ODD_SEPARATORS) + shown + pick(draw, ENDS, BAD_ENDS))
        if not draw(st.integers(0, 5)):  # the length again, or another one
            lines.append(b"content-length: " + draw(st.sampled_from([shown, b"%d" % length, b"7"])) + b"\r\n")
    if not draw(st.integers(0, 3)):
        lines.append(b"Connection: " + draw(st.sampled_from(CONNECTIONS)) + pick(draw, ENDS, BAD_ENDS))
    head_lines = [lines[0], *draw(st.permutations(lines[1:]))]
    return b"".join(head_lines) + pick(draw, ENDS, [b"", b" \r\n", b"\r"])


@st.composite
def chunked_bodies(draw: st.DrawFn, data: bytes) -> bytes:
    out = b""
    rest = data
    while rest:
        size = draw(st.integers(1, len(rest)))
        piece, rest = rest[:size], rest[size:]
        shown = draw(st.sampled_from([b"%x", b"%X", b"0%x", b"%x ", b"%x;ext", b"%x;a=b\r", b"%x\t;x"]))
        if not draw(st.integers(0, 14)):
            shown = draw(st.sampled_from([b"", b"-%x", b"%xg", b"0x%x", b" %x", b"%x\n", b"1" * 21]))
        out += (shown.replace(b"%x", b"%x" % size) if b"%x" in shown else shown.replace(b"%X", b"%X" % size)) + b"\r\n"
        out += piece + pick(draw, [b"\r\n"], [b"\n", b"\r", b"", b"\r\r\n", b"x\r\n"])
    out += draw(st.sampled_from([b"0\r\n", b"0\r\n", b"000;last\r\n", b"0\n"]))
    trailers = draw(st.sampled_from([[], [], [b"T: 1\r\n"], [b"T: 1\n", b" fold\r\n"], [b"Content-Length: x\r\n"]]))
    if not draw(st.integers(0, 9)):
        trailers = [*trailers, draw(st.sampled_from([b"Transfer-Encoding: gzip\r\n", b"bad line\r\n", b" x\r\n"]))]
    return out + b"".join(trailers) + pick(draw, [b"\r\n", b"\n"], [b"", b"\r"])


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, list[int], bytes]:
    payload = draw(st.binary(max_size=24))
    chunked = draw(st.booleans())
    data = b""
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        data += draw(heads(informational=True, length=0, chunked=False))
    data += draw(heads(informational=False, length=len(payload), chunked=chunked))
    data += draw(chunked_bodies(payload)) if chunked else payload
    if not draw(st.integers(0, 3)):  # bytes after the response: another answer, or garbage
        data += draw(st.sampled_from([b"HTTP/1.1 200 OK\r\n\r\n", b"x", b"\r\n"]))
    if not draw(st.integers(0, 9)):  # cut short
        data = data[: len(data) * draw(st.integers(1, 99)) // 100]
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=6))
    method = draw(st.sampled_from([b"POST", b"POST", b"GET", b"HEAD"]))
    return data, cuts, method


MCP_ANSWER = (
    b"HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2026 00:00:00 GMT\r\nserver: uvicorn\r\n"
    b"content-type: application/json\r\nmcp-session-id: 5f2a1c0e\r\ncontent-length: 36\r\n\r\n"
    b'{"jsonrpc":"2.0","id":1,"result":{}}'
)
SSE_ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
    b'2d\r\nevent: message\r\ndata: {"jsonrpc":"2.0","id":1}\r\n\r\n\r\n0\r\n\r\n'
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(responses())
@example((MCP_ANSWER, [], b"POST"))
@example((SSE_ANSWER, [3, 70, 120], b"POST"))
@example((b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", [], b"GET"))  # bare LF
@example((b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", [], b"GET"))  # obs-fold
@example((b"HTTP/1.1 200 \x01\xff\r\nContent-Length: 0\r\n\r\n", [], b"GET"))  # odd reason bytes
@example((b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", [], b"GET"))
def test_what_h11_reads_the_reader_reads_the_same_way(case: tuple[bytes, list[int], bytes]) -> None:
    data, cuts, method = case
    read = assert_read_alike(data, cuts, method)
    event("both refuse" if read is None else f"both accept; kept: {read.keeps}")


@settings(max_examples=EXAMPLES // 3, deadline=None)
@given(st.data())
def test_a_changed_byte_anywhere_is_read_alike_or_refused_by_both(data: st.DataObject) -> None:
    raw = bytearray(data.draw(st.sampled_from([MCP_ANSWER, SSE_ANSWER])))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 9, 10, 11, 13, 32, 44, 58, 59, 127, 255, ord("a"), ord("5")]))
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=4))
    event("both refuse" if assert_read_alike(bytes(raw), cuts) is None else "both accept")


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"

# -- what it reads that a stricter reader would not ---------------------------------------------


@pytest.mark.parametrize(
    ("data", "body"),
    [
        pytest.param(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", b"ok", id="bare LF"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok", b"ok", id="LF then CRLF"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX: a\r\n\tb\r\nContent-Length: 2\r\n\r\nok", b"ok", id="obs-fold"),
        pytest.param(b"HTTP/1.1 200 \x01\x7f\xff\r\nContent-Length: 2\r\n\r\nok", b"ok", id="odd reason bytes"),
        pytest.param(b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", b"ok", id="no reason"),
        pytest.param(b"HTTP/1.0 200 OK\r\n\r\nuntil the end", b"until the end", id="HTTP/1.0 to the end"),
        pytest.param(b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok", id="another version"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok", b"ok", id="lengths"),
        pytest.param(CHUNKED + b'2;x="y"\r\nok\r\n0\r\n\r\n', b"ok", id="chunk extension"),
        pytest.param(CHUNKED + b"2\r\nok\r\n0\r\nT: 1\n\n", b"ok", id="trailer"),
    ],
)
def test_what_h11_accepts_is_read(data: bytes, body: bytes) -> None:
    read = assert_read_alike(data)
    assert read is not None and read.body == body


def test_the_obs_fold_joins_the_lines_as_h11_does() -> None:
    read = assert_read_alike(b"HTTP/1.1 204 No Content\r\nX-A: one\r\n \t two \r\n\tthree\r\n\r\n")
    assert read is not None and read.heads[0][3] == [(b"X-A", b"one two  three")]  # as h11 joins them


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\r\nHTTP/1.1 200 OK\r\n\r\n", id="empty line first"),
        pytest.param(b"HTTP/1.1 200 OK\r\n folded\r\n\r\n", id="fold at the start"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", id="CR in a value"),
        pytest.param(b"HTTP/1.1 200 O\rK\r\n\r\n", id="CR in the reason"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n", id="blank before the colon"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", id="two lengths"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", id="gzip, chunked"),
        pytest.param(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", id="a switch not asked for"),
        pytest.param(b"HTTP/1.1 099 Low\r\n\r\n", id="code under 100"),
        pytest.param(b"HTTP/1.1 100 Continue\r\nContent-Length: x\r\n\r\n", id="bad length on a 1xx"),
        pytest.param(CHUNKED + b"0\r\nTransfer-Encoding: gzip\r\n\r\n", id="a coding in the trailers"),
        pytest.param(CHUNKED + b"2\nok\r\n0\r\n\r\n", id="chunk-size line ended by LF"),
    ],
)
def test_what_h11_refuses_is_refused(data: bytes) -> None:
    assert assert_read_alike(data) is None


# -- errors and bounds -----------------------------------------------------------------------------


def test_a_short_body_says_how_short() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
    reader.feed_eof()
    assert isinstance(reader.next_event(), Head) and reader.next_event() == b"half"
    with pytest.raises(IncompleteBody, match=r"^the server closed the connection after 4 of the 10 bytes") as caught:
        reader.next_event()
    assert (caught.value.received, caught.value.expected) == (4, 10)


def test_every_incomplete_piece_is_bounded() -> None:
    for data, what in [
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 200, "the response head is over 100 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 200, "a chunk-size line is over"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + b"a" * 200, "the trailer section is over"),
    ]:
        reader = ResponseReader(max_head_bytes=100)
        reader.feed(data)
        with pytest.raises(InvalidHTTPResponse, match=what):
            while reader.next_event() is not NEED_DATA:
                pass
