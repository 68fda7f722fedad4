"""HTTP/1.1 for the default client, sans I/O: requests refused when they could smuggle anything,
responses framed exactly (length, chunks, end of stream) however the bytes are split, and every
broken or hostile response refused with a reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpwire.errors import ConnectionBroken, IncompleteBody, InvalidHTTPResponse, LocalProtocolError
from mcpwire.protocol.http1 import (
    END,
    NEED_DATA,
    Head,
    ResponseReader,
    _plain_fields,
    _section_lines,
    _unfolded_fields,
    encode_request,
    parse_url,
    retry_after_seconds,
)


def read_all(chunks: list[bytes], *, eof: bool = True, head_request: bool = False) -> tuple[list[Head], bytes, bool]:
    """Feeds ``chunks`` one by one (then the end of the stream); the heads, the body, reusable."""
    reader = ResponseReader(max_head_bytes=1024)
    reader.expect(head_request=head_request)
    heads: list[Head] = []
    body = b""
    pending = list(chunks)
    while True:
        event = reader.next_event()
        if event is END:
            return heads, body, reader.reusable
        if event is NEED_DATA:
            if pending:
                reader.feed(pending.pop(0))
            elif eof:
                reader.feed_eof()
            else:
                raise AssertionError("the reader wants more than was sent")
        elif isinstance(event, Head):
            heads.append(event)
        else:
            assert isinstance(event, bytes)
            body += event


# -- requests ---------------------------------------------------------------------------------------


def test_a_request_is_one_piece() -> None:
    data = encode_request("POST", b"/mcp?x=1", [(b"Host", b"a:1"), (b"Content-Length", b"2")], b"{}")
    assert data == b"POST /mcp?x=1 HTTP/1.1\r\nHost: a:1\r\nContent-Length: 2\r\n\r\n{}"
    assert encode_request("GET", b"/", [(b"host", b"a")], None) == b"GET / HTTP/1.1\r\nhost: a\r\n\r\n"


@pytest.mark.parametrize(
    ("method", "target", "headers", "reason"),
    [
        ("GE T", b"/", [], "illegal HTTP method"),
        ("GET", b"/a b", [], "illegal request target"),
        ("GET", b"/a\r\nX: 1", [], "illegal request target"),
        ("GET", b"", [], "illegal request target"),
        ("GET", b"/", [(b"X-A: 1\r\nX-B", b"2")], "illegal header name"),
        ("GET", b"/", [(b"Bad Name", b"1")], "illegal header name"),
        ("GET", b"/", [(b"", b"1")], "illegal header name"),
        ("GET", b"/", [(b"Mcp-Param-X", b"1\r\nInjected: yes")], "illegal value of header 'Mcp-Param-X'"),
        ("GET", b"/", [(b"X", b"a\nb")], "illegal value of header 'X'"),
        ("GET", b"/", [(b"X", b"a\x00b")], "illegal value of header 'X'"),
    ],
)
def test_a_request_that_could_smuggle_anything_is_refused(
    method: str, target: bytes, headers: list[tuple[bytes, bytes]], reason: str
) -> None:
    with pytest.raises(LocalProtocolError, match=reason) as caught:
        encode_request(method, target, headers, None)
    assert "Injected" not in str(caught.value)  # a value is never shown: it may be a credential


# -- responses ----------------------------------------------------------------------------------------


def test_a_response_framed_by_its_length_keeps_the_connection() -> None:
    heads, body, reusable = read_all([b"HTTP/1.1 200 OK\r\nContent-Type: a\r\nContent-Length: 5\r\n\r\nhello"])
    assert heads == [Head(200, b"OK", b"1.1", [(b"Content-Type", b"a"), (b"Content-Length", b"5")])]
    assert (body, reusable) == (b"hello", True)


def test_a_chunked_response_with_extensions_and_trailers() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    raw = head + b"5;x=1\r\nhello\r\nA \r\n, world!!!\r\n0\r\nT: 1\r\n\r\n"
    assert read_all([raw])[1:] == (b"hello, world!!!", True)


@given(st.data())
def test_any_split_of_the_bytes_gives_the_same_response(data: st.DataObject) -> None:
    raw = data.draw(
        st.sampled_from(
            [
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello world",
            ]
        )
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    heads, body, _ = read_all(pieces)
    assert body == b"hello world"
    assert heads[-1].status == 200


def test_an_informational_head_comes_before_the_response() -> None:
    heads, body, _ = read_all([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"])
    assert [h.status for h in heads] == [100, 204]
    assert body == b""


@pytest.mark.parametrize(
    ("raw", "reusable"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", False),  # framed by the end of the stream
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n", False),  # bytes nobody asked for
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", True),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", True),  # 304: no body, whatever it says
    ],
)
def test_when_the_connection_may_carry_another_request(raw: bytes, reusable: bool) -> None:
    assert read_all([raw])[2] is reusable


def test_an_answer_to_head_has_no_body() -> None:
    heads, body, reusable = read_all([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"], head_request=True)
    assert (heads[0].status, body, reusable) == (200, b"", True)


def test_the_next_response_on_a_kept_connection() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
    assert [reader.next_event(), reader.next_event(), reader.next_event()][1:] == [b"a", END]
    assert reader.complete and reader.reusable
    reader.next_response()
    assert reader.next_event() is NEED_DATA
    reader.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert isinstance(reader.next_event(), Head) and reader.next_event() is END
    with pytest.raises(LocalProtocolError, match="cannot carry another request"):
        reader.next_response()


@pytest.mark.parametrize(
    ("chunks", "error", "reason"),
    [
        ([], ConnectionBroken, "^the server closed the connection without answering$"),
        ([b"HTTP/1.1 200 OK\r\nContent-"], ConnectionBroken, "in the middle of the answer's head"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"], IncompleteBody, "after 4 of the 10 bytes"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"], IncompleteBody, "inside a chunked"),
        ([b"NOT HTTP AT ALL\r\n\r\n"], InvalidHTTPResponse, "illegal status line"),
        ([b"\x16\x03\x01"], InvalidHTTPResponse, "illegal status line"),  # a TLS answer, refused at once
        ([b"HTTP/2 200 OK\r\n\r\n"], InvalidHTTPResponse, "illegal status line"),
        ([b"HTTP/1.1 2000 OK\r\n\r\n"], InvalidHTTPResponse, "illegal status line"),
        ([b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n"], InvalidHTTPResponse, "illegal header line"),
        ([b"HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n"], InvalidHTTPResponse, "illegal header line"),
        ([b"HTTP/1.1 200 OK\r\n folded\r\n\r\n"], InvalidHTTPResponse, "starts with a continuation line"),
        ([b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n"], InvalidHTTPResponse, "illegal header line"),
        ([b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n"], InvalidHTTPResponse, "illegal header line"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n"], InvalidHTTPResponse, "illegal Content-Length"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"], InvalidHTTPResponse, "illegal Content-Length"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n"], InvalidHTTPResponse, "illegal Content-Length"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"], InvalidHTTPResponse, "unsupported"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], InvalidHTTPResponse, "chunk-size"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n"], InvalidHTTPResponse, "CRLF"),
        ([b"HTTP/1.1 101 Switching Protocols\r\n\r\n"], InvalidHTTPResponse, "switched protocols"),
        ([b"HTTP/1.1 200 OK\r\nX: " + b"a" * 2000], InvalidHTTPResponse, "head is over 1024 bytes"),
        (
            [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 5000],
            InvalidHTTPResponse,
            "chunk-size line is over 1024 bytes",
        ),
        (
            [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T" * 5000],
            InvalidHTTPResponse,
            "trailer section is over 1024 bytes",
        ),
    ],
)
def test_a_broken_response_is_refused_with_its_reason(chunks: list[bytes], error: type[Exception], reason: str) -> None:
    with pytest.raises(error, match=reason):
        read_all(chunks)


def test_a_body_is_never_held_beyond_what_was_read() -> None:
    """A huge declared length costs nothing up front: the body comes out as it is read."""
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\nabc")
    assert isinstance(reader.next_event(), Head)
    assert reader.next_event() == b"abc"
    assert reader.next_event() is NEED_DATA


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2", 2.0),
        (" 120 ", 120.0),
        ("1.5", 1.5),
        ("Thu, 01 Jan 1970 00:00:10 GMT", 0.0),  # in the past
        ("Thu, 01 Jan 1970 00:01:40 GMT", 60.0),  # 100 s after the epoch, measured from 40 s
        (None, None),
        ("", None),
        ("-1", None),
        ("1e3", None),
        ("inf", None),
        ("nan", None),
        ("soon", None),
        ("Fri, 31 Dec 99999 23:59:59 GMT", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates_and_nothing_else(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, now=40.0) == seconds


# -- URLs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/mcp",
        "https://Example.COM/mcp?x=1&y=%20",
        "http://example.com:80/",
        "https://example.com:443",
        "http://[::1]:3000/mcp",
        "http://[2001:DB8::1]/a",
        "http://ex\u00e4mple.com/b",
        "http://user:p%40ss@h:1/p",
        "http://h/a b/\u00e9?q=\u00e9 x",
        "http://h/x?",
    ],
)
def test_a_url_gives_what_httpx_would_send(url: str) -> None:
    """Where to connect, the ``Host`` header and the request target, as ``httpx`` makes them."""
    import httpx

    target = parse_url(url)
    reference = httpx.URL(url)
    request = httpx.Request("GET", reference)
    default = {"http": 80, "https": 443}[target.scheme]
    assert (target.host, target.port) == (reference.raw_host.decode(), reference.port or default)
    assert target.authority == request.headers["host"].encode()
    assert target.path == reference.raw_path
    if reference.userinfo:
        assert target.credentials is not None
        assert target.credentials.decode() == httpx.BasicAuth(reference.username, reference.password)._auth_header


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://h/", r"^unsupported URL scheme 'ftp' \(http:// or https:// only\)$"),
        ("http://h:abc/", r"^invalid port: 'abc'$"),
        ("http://h:70000/", r"^invalid port: '70000'$"),
        ("http://1.2.3.400/", r"^invalid IPv4 address: '1\.2\.3\.400'$"),
        ("http://[::g]/", r"^invalid URL: '::g' does not appear to be an IPv4 or IPv6 address$"),
        ("http://\u0133/", r"^invalid IDNA hostname: '\u0133'$"),
        ("http://h/\x01", r"^invalid non-printable ASCII character in URL, '\\x01' at position 9$"),
        ("http:///mcp", r"^the URL has no host$"),
    ],
)
def test_a_url_no_request_can_use_is_refused_with_its_reason(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_url(url)


#: field lines built from the bytes where a reading could go wrong: blanks, line ends, the colon,
#: control bytes h11 refuses in a value (NUL, VT, FF) and ones it takes (SOH, US, DEL), non-ASCII
_LINE_BYTES = st.lists(
    st.sampled_from(
        [
            b"a",
            b"B",
            b"-",
            b":",
            b" ",
            b"\t",
            b"\r",
            b"\x00",
            b"\x01",
            b"\x0b",
            b"\x0c",
            b"\x1f",
            b"\x7f",
            b"\xc3\xa9",
            b"x y",
            b"Content-Length",
        ]
    ),
    max_size=12,
).map(b"".join)


@given(
    st.lists(st.tuples(_LINE_BYTES, st.sampled_from([b"\r\n", b"\n"])), max_size=6), st.sampled_from([b"\r\n", b"\n"])
)
@settings(max_examples=3000)
def test_the_quick_reading_of_plain_field_lines_is_the_careful_one(
    lines: list[tuple[bytes, bytes]], end: bytes
) -> None:
    """A section read in one pass of the regular expression engine gives what the line-by-line
    reading gives; a section it does not take is refused, or has a folded line."""
    section = b"".join(line + eol for line, eol in lines if b"\n" not in line) + end
    quick = _plain_fields(section)

    def fail(message: str, status: int) -> Exception:
        return ValueError(message)

    try:
        careful = _unfolded_fields(_section_lines(section), "head", fail)
    except ValueError:
        assert quick is None
        return
    if quick is not None:
        assert quick == careful
    else:  # what the careful reading takes and the quick one does not: a folded line
        assert any(line[:1] in (b" ", b"\t") for line in _section_lines(section))


def test_a_long_line_of_blanks_is_read_in_one_pass() -> None:
    """A value of thousands of blanks and bytes, plain or not, is taken or refused as the careful
    reading does (the quick one never tries a line twice, so it takes no quadratic time)."""
    for value in (b" " * 16000 + b"x", b"x " * 8000, b"x \t" * 5000 + b"\x00", b" \t" * 8000):
        section = b"A:" + value + b"\r\n\r\n"
        plain = b"\x00" not in value
        assert (_plain_fields(section) is not None) == plain
        if plain:
            assert _plain_fields(section) == [(b"A", value.strip(b" \t"))]
