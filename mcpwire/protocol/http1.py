"""HTTP/1.1 sans I/O, the client's side: a request, and the response framed from the bytes read.

Theory of operation: the default HTTP client sends small requests whose headers it builds itself
and reads answers from servers it does not trust. This is the client's side of mcpwire's one
HTTP/1.1 codec (:mod:`.http1_server` is the server's, built on the same rules for lines, fields
and chunks), and what it reads is what h11's client side reads (a differential property test
holds the two together):

- :func:`parse_url` reads what a request needs from an ``http://`` or ``https://`` URL (where to
  connect, the ``Host``, the request target, Basic credentials from userinfo), with the checks
  ``httpx`` makes (a port, an IPv4 or IPv6 literal, an internationalized host name in IDNA 2008);
  whatever it refuses, it says why (``ValueError``).
- :func:`encode_request` writes the request line, the headers and the body in one piece
  (:func:`encode_head` the part before the empty line, for a head made once and sent again); a method,
  target, header name or value that could end a line or smuggle a header is refused
  (:class:`~mcpwire.errors.LocalProtocolError`, naming the header but never its value).
- :class:`ResponseReader` takes the bytes read (:meth:`~ResponseReader.feed`, and
  :meth:`~ResponseReader.feed_eof` at the end of the stream) and gives, in order, the response's
  :class:`Head` (after any 1xx heads), pieces of its body, and :data:`END`; :data:`NEED_DATA`
  when it needs more bytes. It reads as h11 does (RFC 9112 with h11's leniencies): a head ends
  at an empty line, lines end in CRLF or a bare LF, a folded (obs-fold) line joins the one before
  it, a reason phrase may hold any byte but NUL, CR, LF, VT and FF, a header value any but NUL
  and line breaks; ``Content-Length`` may repeat or list one same number, and
  ``Transfer-Encoding`` may only be ``chunked``. The body is framed by chunks, by
  ``Content-Length``, or by the end of the stream (RFC 9112 section 6.3), and never buffered
  beyond what was read. A response that breaks the framing raises
  :class:`~mcpwire.errors.InvalidHTTPResponse`; one cut short,
  :class:`~mcpwire.errors.IncompleteBody`; a stream that ends before any head,
  :class:`~mcpwire.errors.ConnectionBroken`. Every incomplete piece (a head, a chunk-size line,
  a trailer section) is bounded by ``max_head_bytes``, as h11 bounds its incomplete events.
- After :data:`END`, :attr:`~ResponseReader.reusable` says whether the connection may carry
  another request: as h11 decides (HTTP/1.1 or later, no ``Connection: close``), and also never
  after a body framed by the end of the stream, after one that carried both ``Content-Length``
  and ``Transfer-Encoding`` (RFC 9112 section 6.3: a sign of smuggling), or when bytes no request
  asked for follow the response; :meth:`~ResponseReader.next_response` readies the reader.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable
from typing import Final
from urllib.parse import unquote, urlsplit

import msgspec

from ..errors import ConnectionBroken, IncompleteBody, InvalidHTTPResponse, LocalProtocolError

__all__ = [
    "END",
    "NEED_DATA",
    "Head",
    "ResponseReader",
    "Target",
    "encode_head",
    "encode_request",
    "parse_url",
    "retry_after_seconds",
]

# The checks are str and bytes methods, not regular expressions: compiling a dozen patterns took
# most of the default client's import of this module, paid by every first connect of a process.
# The rare paths (a URL with a control character or an unsafe byte) use the re module's cache.
# One pattern is worth its compilation (at the first message, not at import): a section of plain
# field lines, the common case, read in two passes instead of a few calls per line.

#: the bytes of a token (RFC 9110 section 5.6.2): a method or a header name
_TOKEN_BYTES: Final = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#: what a request target may not hold: control bytes and blanks (h11/_abnf.py: it is visible bytes)
_NOT_IN_TARGET: Final = bytes(range(0x21)) + b"\x7f"
#: what a header value the client sends may not hold
_NOT_IN_SENT_VALUE: Final = b"\x00\r\n"


def _is_token(data: bytes) -> bool:
    """Whether ``data`` is an RFC 9110 token (one or more token bytes)."""
    return bool(data) and not data.translate(None, _TOKEN_BYTES)


def _holds_any(data: bytes, forbidden: bytes) -> bool:
    """Whether ``data`` holds any of the bytes of ``forbidden``."""
    return len(data.translate(None, forbidden)) != len(data)


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = _Marker("NEED_DATA")
END: Final = _Marker("END")


class Head(msgspec.Struct, frozen=True):
    """A response's status line and headers (names as sent; values without surrounding blanks)."""

    status: int
    reason: bytes
    http_version: bytes
    headers: list[tuple[bytes, bytes]]


DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_CONTROL: Final = r"[\x00-\x1f\x7f]"
_UNSAFE_IN_TARGET: Final = r"[^\x21-\x7e]+"


class Target(msgspec.Struct, frozen=True):
    """What a request needs from its URL.

    Attributes:
        scheme: ``http`` or ``https``.
        host: the host to connect to: a name lowercased and in ASCII (IDNA), an IPv6 literal
            without its brackets.
        port: the port to connect to (the scheme's default when the URL names none).
        authority: the ``Host`` header's value (the port only when not the default).
        path: the request target: the path and query, their unsafe bytes percent-encoded.
        credentials: ``Authorization`` from the URL's userinfo (Basic), or None.
    """

    scheme: str
    host: str
    port: int
    authority: bytes
    path: bytes
    credentials: bytes | None

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


def parse_url(url: str) -> Target:
    """The parts of ``url`` a request needs (see :class:`Target`).

    Raises:
        ValueError: not an ``http://`` or ``https://`` URL, or one with a control character, an
            invalid port, IP literal or host name, or no host; the message says which.
    """
    control = None if url.isprintable() else re.search(_CONTROL, url)  # a control character is not printable
    if control is not None:
        raise ValueError(
            f"invalid non-printable ASCII character in URL, {control.group()!r} at position {control.start()}"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bracketed host that is no IPv6 address, unbalanced brackets
        raise ValueError(f"invalid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"unsupported URL scheme {parts.scheme!r} (http:// or https:// only)")
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if hostport.startswith("["):
        end = hostport.find("]") + 1
        written, rest = hostport[:end], hostport[end:]
        port_text = rest[1:] if rest[:1] == ":" else rest
    else:
        written, _, port_text = hostport.partition(":")
    if port_text and not (port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535):
        raise ValueError(f"invalid port: {port_text!r}")
    host = _encode_host(written)
    if not host:
        raise ValueError("the URL has no host")
    port = int(port_text) if port_text else DEFAULT_PORTS[scheme]
    shown = f"[{host}]" if ":" in host else host
    authority = shown if port == DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    path = parts.path or "/"
    if parts.query or url.endswith("?"):
        path += "?" + parts.query
    path = _percent_encoded(path)
    credentials = None
    if at:
        user, _, password = userinfo.partition(":")
        import base64  # for credentials only

        credentials = b"Basic " + base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode())
    return Target(scheme, host, port, authority.encode("ascii"), path.encode("ascii"), credentials)


def _percent_encoded(text: str) -> str:
    """``text`` with each run of characters outside visible ASCII percent-encoded (in UTF-8)."""
    if text.isascii() and text.isprintable() and " " not in text:  # visible ASCII: nothing to do
        return text
    return re.sub(_UNSAFE_IN_TARGET, lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text)


def _encode_host(host: str) -> str:
    """A URL's host as a connection needs it, checked as ``httpx`` checks it."""
    if host and not host.strip("0123456789."):  # only ASCII digits and dots: an IPv4 address
        # four decimal numbers up to 255 without leading zeros, as ipaddress.IPv4Address reads them
        numbers = host.split(".")
        if len(numbers) != 4 or not all(n and n.isdigit() and str(int(n)) == n and int(n) < 256 for n in numbers):
            raise ValueError(f"invalid IPv4 address: {host!r}")
        return host
    if host.startswith("[") and host.endswith("]"):
        import ipaddress  # (urlsplit has checked it already; only such a host needs it)

        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"invalid IPv6 address: {host!r}") from None
        return host[1:-1]
    if host.isascii():
        return _percent_encoded(host.lower())
    import idna  # IDNA 2008, as httpx; trio depends on it, and only such a name needs it

    try:
        return str(idna.encode(host.lower()).decode("ascii"))
    except idna.IDNAError:
        raise ValueError(f"invalid IDNA hostname: {host!r}") from None


def encode_head(method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request line and ``headers`` (each line ending in CRLF), without the empty line that
    ends the head: what :func:`encode_request` writes before it, for a sender that adds a
    ``Content-Length`` and a body to a head it made once.

    Raises:
        LocalProtocolError: the method, target, a header name or a value is not valid.
    """
    verb = method.encode("ascii", "replace")
    if not _is_token(verb):
        raise LocalProtocolError(f"illegal HTTP method {method!r}")
    if not target or _holds_any(target, _NOT_IN_TARGET):
        raise LocalProtocolError(f"illegal request target {target[:100]!r}")
    parts = [verb, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not _is_token(name):
            raise LocalProtocolError(f"illegal header name {name[:100]!r}")
        if _holds_any(value, _NOT_IN_SENT_VALUE):
            # the value is not shown: it may be a credential
            raise LocalProtocolError(f"illegal value of header {name.decode('ascii')!r} (NUL, CR or LF)")
        parts += (name, b": ", value.strip(b" \t"), b"\r\n")
    return b"".join(parts)


def encode_request(method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes | None) -> bytes:
    """The request's bytes: request line, ``headers`` as given (``Host`` and any
    ``Content-Length`` among them), an empty line, ``body``.

    Raises:
        LocalProtocolError: the method, target, a header name or a value is not valid.
    """
    head = encode_head(method, target, headers)
    return head + b"\r\n" + body if body else head + b"\r\n"


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait: delay-seconds, or an HTTP-date (one in the
    past is 0); None when it is absent or cannot be read (a sign, an exponent, ``inf``, a date
    out of range).

    Args:
        now: the wall clock (epoch seconds) an HTTP-date is measured from (default: now).
    """
    if value is None:
        return None
    text = value.strip()
    # RFC 9110 section 10.2.3: delay-seconds = 1*DIGIT (up to 10 digits; a fraction of up to 6 is read too)
    whole, dot, fraction = text.partition(".")
    if (
        whole.isascii()
        and whole.isdigit()
        and len(whole) <= 10
        and (not dot or (fraction.isascii() and fraction.isdigit() and len(fraction) <= 6))
    ):
        return float(text)
    import datetime  # only for an HTTP-date: the default client's start-up does without them
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 9110 section 5.6.7: HTTP-dates are in GMT
        when = when.replace(tzinfo=datetime.UTC)
    try:
        stamp = when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
    delay = stamp - (time.time() if now is None else now)
    return max(0.0, delay) if math.isfinite(delay) else None


# -- responses (the client's one parser; h11's client side is the reference) -------------------

# h11's grammar (h11/_abnf.py): a reason phrase is any run of blanks, visible bytes and obs-text,
# a field value runs of any byte but NUL and whitespace (``\s``: blank, CR, LF, VT, FF) separated
# by blanks: both leave out only NUL, CR, LF, VT and FF
_NOT_IN_VALUE: Final = b"\x00\n\r\x0b\x0c"
_HEX_DIGITS: Final = b"0123456789ABCDEFabcdef"
#: the most digits a Content-Length may have (h11's bound), and a chunk size
MAX_LENGTH_DIGITS: Final = 20

_HEAD, _LENGTH, _CHUNK_HEADER_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_EOF, _DONE = range(8)


def _shown(data: bytes | bytearray) -> str:
    """A piece of a hostile answer for an error message: at most 100 bytes, escaped."""
    return repr(bytes(data[:100]))


def _status_line(line: bytes) -> tuple[bytes, int, bytes] | None:
    """The version, status code and reason phrase of ``HTTP/d.d SP 3DIGIT [SP reason]`` (h11's
    grammar); None when ``line`` is not one."""
    if (
        len(line) < 12
        or line[:5] != b"HTTP/"
        or not line[5:6].isdigit()  # bytes.isdigit: ASCII digits only
        or line[6:7] != b"."
        or not line[7:8].isdigit()
        or line[8:9] != b" "
        or not line[9:12].isdigit()
    ):
        return None
    reason = line[13:]
    if len(line) > 12 and (line[12:13] != b" " or _holds_any(reason, _NOT_IN_VALUE)):
        return None
    return line[5:8], int(line[9:12]), reason


def _header_line(line: bytes) -> tuple[bytes, bytes] | None:
    """The name and value of ``token ":" OWS field-value OWS`` (h11's grammar); None when
    ``line`` is not one."""
    colon = line.find(b":")
    name = line[:colon]
    if colon < 1 or not _is_token(name):
        return None
    value = line[colon + 1 :].strip(b" \t")
    if _holds_any(value, _NOT_IN_VALUE):
        return None
    return name, value


def _chunk_size(line: bytes) -> int | None:
    """The size of ``chunk-size [chunk-ext] OWS`` (the line without its CRLF; an extension is
    anything but a LF); None when ``line`` is not one."""
    rest = line.lstrip(_HEX_DIGITS)
    digits = len(line) - len(rest)
    if not 1 <= digits <= MAX_LENGTH_DIGITS:
        return None
    if rest[:1] == b";":  # an extension: anything but a LF
        if b"\n" in rest:
            return None
    elif rest.strip(b" \t"):  # else only blanks
        return None
    return int(line[:digits], 16)


def _section_end(buffer: bytearray, start: int) -> int:
    """Where the head or trailer section at the start of ``buffer`` ends (after its empty line,
    which follows a CRLF or a bare LF), looking from ``start``; -1 when it does not yet."""
    crlf = buffer.find(b"\n\r\n", start)
    bare = buffer.find(b"\n\n", start, len(buffer) if crlf < 0 else crlf + 1)  # only one that comes first
    if bare >= 0:
        return bare + 2
    return crlf + 3 if crlf >= 0 else -1


def _section_lines(raw: bytes) -> list[bytes]:
    """The lines of a head or trailer section that ends with its empty line (h11's split: on LF,
    one CR dropped from each line's end)."""
    lines = raw.split(b"\n")
    del lines[-2:]  # the empty line, and what follows its LF
    return [line[:-1] if line[-1:] == b"\r" else line for line in lines]


def _comma_values(fields: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """The lowercased, comma-separated values of every ``name`` field (``name`` lowercase; h11's
    reading of ``Connection`` and ``Expect``)."""
    out: list[bytes] = []
    size = len(name)
    for field, value in fields:
        if len(field) == size and field.lower() == name:
            out += [piece.strip().lower() for piece in value.split(b",") if piece.strip()]
    return out


def _content_length(value: bytes) -> bytes | None:
    """The one number a ``Content-Length`` value gives (it may list the same one again, as h11
    takes it); None when it is not one."""
    if value.isdigit():
        number = value
    else:
        values = {piece.strip() for piece in value.split(b",")}
        number = values.pop()
        if values:
            return None
    return number if number.isdigit() and len(number) <= MAX_LENGTH_DIGITS else None


def _response_error(message: str, status: int) -> Exception:
    return InvalidHTTPResponse(message)


#: one field line as nearly every message sends it: ``token ":" OWS value OWS`` and CRLF (or a
#: bare LF), the value holding none of :data:`_NOT_IN_VALUE`. Its value is runs of blanks each
#: followed by other bytes, so the blanks at its end are left out; every repetition is possessive
#: (nothing is tried twice), so reading a line takes time in proportion to its length.
_PLAIN_FIELD: Final = rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]++):[ \t]*+((?:[ \t]*+[^ \t\x00\n\r\x0b\x0c]++)*+)[ \t]*+\r?\n"


@functools.cache
def _plain_patterns() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """A section made only of plain field lines and its empty line; one plain field line.
    (Compiled at the first message read, not at import.)"""
    return re.compile(rb"(?:%s)*+\r?\n" % _PLAIN_FIELD), re.compile(_PLAIN_FIELD)


def _plain_fields(section: bytes) -> list[tuple[bytes, bytes]] | None:
    """The names and values of a section of plain field lines (see :data:`_PLAIN_FIELD`) read in
    two passes of the regular expression engine, as :func:`_header_line` reads each line; None
    when any line is not plain (a folded line, a blank before the colon, a stray CR), which
    then takes the careful way line by line."""
    whole, field = _plain_patterns()
    if whole.fullmatch(section) is None:
        return None
    return field.findall(section)


def _unfolded_fields(lines: list[bytes], what: str, fail: Callable[[str, int], Exception]) -> list[tuple[bytes, bytes]]:
    """The names and values of a section's lines (without their line ends), folded lines joined
    to the line before, as h11 reads them."""
    unfolded: list[bytes] = []
    for line in lines:
        if line[:1] == b" " or line[:1] == b"\t":  # obs-fold: continues the line before
            if not unfolded:
                raise fail(f"the {what} starts with a continuation line: {_shown(line)}", 400)
            unfolded[-1] += b" " + line.lstrip(b" \t")
        else:
            unfolded.append(line)
    pairs: list[tuple[bytes, bytes]] = []
    for line in unfolded:
        field = _header_line(line)
        if field is None:
            raise fail(f"illegal header line in the {what}: {_shown(line)}", 400)
        pairs.append(field)
    return pairs


def _fields(
    section: bytes, what: str, fail: Callable[[str, int], Exception] = _response_error
) -> tuple[list[tuple[bytes, bytes]], bytes | None, bool]:
    """The fields of a header or trailer section (its lines through the empty line that ends it),
    as h11 reads and normalizes them: folded lines joined, each line ``name: value``, repeated or
    listed ``Content-Length`` values reduced to their one number (a repeat is dropped),
    ``Transfer-Encoding`` only ``chunked`` (lowercased).

    Returns:
        The fields (names as sent), the ``Content-Length`` value (or None), whether
        ``Transfer-Encoding: chunked`` is there.

    Raises:
        what ``fail`` makes of the message and the status a server answers it with (400, or 501
        for a transfer coding it does not know): a line or a framing field that h11 refuses
        (:class:`~mcpwire.errors.InvalidHTTPResponse` by default).
    """
    pairs = _plain_fields(section)
    if pairs is None:
        pairs = _unfolded_fields(_section_lines(section), what, fail)
    fields: list[tuple[bytes, bytes]] = []
    length: bytes | None = None
    chunked = False
    for name, value in pairs:
        # (only a name of the length of one of the two framing fields is lowercased to compare)
        lowered = name.lower() if len(name) == 14 or len(name) == 17 else name
        if lowered == b"content-length":
            number = _content_length(value)
            if number is None:
                raise fail(f"illegal Content-Length in the {what}: {_shown(value)}", 400)
            if length is None:
                length = number
                fields.append((name, number))
            elif number != length:
                raise fail(f"conflicting Content-Length values in the {what}", 400)
            continue  # the same length again: dropped
        if lowered == b"transfer-encoding":
            if chunked:
                raise fail(f"Transfer-Encoding is repeated in the {what}", 501)
            value = value.lower()
            if value != b"chunked":
                raise fail(f"unsupported Transfer-Encoding {_shown(value)} (only chunked)", 501)
            chunked = True
        fields.append((name, value))
    return fields, length, chunked


def _first_line(raw: bytes) -> tuple[bytes, bytes]:
    """The first line of a head (without its CRLF or LF) and the section of field lines after it."""
    end = raw.find(b"\n")
    line = raw[:end]
    return (line[:-1] if line[-1:] == b"\r" else line), raw[end + 1 :]


class _MessageReader:
    """What the readers of both sides share: the bytes read, head and trailer sections, and a
    body framed by ``Content-Length`` or by chunks, read as h11 reads them. A subclass says what
    a malformed message raises (:meth:`_fail`), what a stream cut short inside a body raises
    (:meth:`_short`), and what the end of a message does (:meth:`_end`)."""

    def __init__(self, max_head_bytes: int) -> None:
        self._max_head = max_head_bytes
        self._buffer = bytearray()
        self._eof = False
        self._state = _HEAD
        self._searched = 0  # where the search for the end of a section goes on from
        self._remaining = 0
        self._discard = b""  # what must still follow a chunk's data (its CRLF)
        self._received = 0  # body bytes of the current message, for the error of a short one

    def _fail(self, message: str, status: int = 400) -> Exception:
        """The error of a message that cannot be read (``status``: what a server answers)."""
        raise NotImplementedError

    def _short(self) -> Exception:
        """The error of a stream that ended inside a body."""
        raise NotImplementedError

    def _end(self) -> None:
        """The message has been read to its end."""
        self._state = _DONE

    def _section(self, what: str) -> bytes | None:
        """The raw bytes of the head or trailer section at the start of the buffer, through its
        empty line, taken from the buffer; None when it is not complete yet."""
        buffer = self._buffer
        end = _section_end(buffer, self._searched)
        if end < 0:
            self._searched = max(0, len(buffer) - 2)
            if len(buffer) > self._max_head:
                raise self._fail(f"the {what} is over {self._max_head} bytes", 431)
            return None
        self._searched = 0
        raw = bytes(buffer[:end])
        del buffer[:end]
        return raw

    def _take(self, count: int) -> bytes:
        buffer = self._buffer
        if count >= len(buffer):
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:count])
            del buffer[:count]
        self._received += len(data)
        return data

    def _fixed(self) -> bytes | _Marker:
        if not self._buffer:
            if self._eof:
                raise self._short()
            return NEED_DATA
        data = self._take(self._remaining)
        self._remaining -= len(data)
        if not self._remaining:
            self._end()
        return data

    def _chunked(self) -> bytes | _Marker:
        buffer = self._buffer
        while True:
            state = self._state
            if state == _CHUNK_DATA:
                if not buffer:
                    break
                data = self._take(self._remaining)
                self._remaining -= len(data)
                if not self._remaining:
                    self._state = _CHUNK_END
                    self._discard = b"\r\n"
                return data
            if state == _CHUNK_HEADER_LINE:
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > self._max_head:
                        raise self._fail(f"a chunk-size line is over {self._max_head} bytes", 431)
                    break
                size = _chunk_size(bytes(buffer[:end]))
                if size is None:
                    raise self._fail(f"illegal chunk-size line: {_shown(buffer[: end + 2])}")
                self._remaining = size
                del buffer[: end + 2]
                self._state = _CHUNK_DATA if self._remaining else _TRAILERS
            elif state == _CHUNK_END:
                if not buffer:
                    break
                expected = self._discard
                got = bytes(buffer[: len(expected)])
                if not expected.startswith(got):
                    raise self._fail(f"a chunk's data does not end with CRLF but {_shown(got)}")
                del buffer[: len(got)]
                self._discard = expected[len(got) :]
                if self._discard:
                    break
                self._state = _CHUNK_HEADER_LINE
            else:  # _TRAILERS: fields after the last chunk, up to an empty line; checked, not kept
                if buffer[:1] == b"\n" or buffer[:2] == b"\r\n":
                    del buffer[: 1 if buffer[:1] == b"\n" else 2]
                else:
                    raw = self._section("trailer section")
                    if raw is None:
                        break
                    _fields(raw, "trailer section", self._fail)
                self._end()
                return END
        if self._eof:
            raise self._short()
        return NEED_DATA


class ResponseReader(_MessageReader):
    """Frames the responses read from one connection, one at a time (see the module's theory of
    operation).

    Args:
        max_head_bytes: the most bytes an incomplete head, chunk-size line or trailer section may
            take.
    """

    def __init__(self, max_head_bytes: int = 64 * 1024) -> None:
        super().__init__(max_head_bytes)
        self._length: int | None = None
        self._head_request = False
        self._keep_alive = False
        self.reusable = False

    def feed(self, data: bytes | bytearray) -> None:
        """Bytes read from the connection."""
        self._buffer += data

    def feed_eof(self) -> None:
        """The server closed its side."""
        self._eof = True

    def expect(self, *, head_request: bool) -> None:
        """Says whether the response now awaited answers a ``HEAD`` request (it has no body)."""
        self._head_request = head_request

    @property
    def awaiting_head(self) -> bool:
        """Whether nothing of the awaited response has been read yet."""
        return self._state == _HEAD and not self._buffer

    @property
    def complete(self) -> bool:
        """Whether the current response has been read to its end."""
        return self._state == _DONE

    @property
    def buffered_to_end(self) -> bool:
        """Whether the rest of a body framed by ``Content-Length`` has been read already: the
        next event is all of it, and the response is then complete."""
        return self._state == _LENGTH and len(self._buffer) >= self._remaining

    @property
    def trailing(self) -> bytes:
        """The bytes read beyond the end of the current response (after :data:`END`)."""
        return bytes(self._buffer)

    def next_response(self) -> None:
        """Readies the reader for the next response on a reusable connection.

        Raises:
            LocalProtocolError: the previous response is not complete, or the connection is not
                reusable.
        """
        if self._state != _DONE or not self.reusable:
            raise LocalProtocolError("the connection cannot carry another request")
        self._state = _HEAD
        self._searched = 0
        self._received = 0
        self.reusable = False

    def next_event(self) -> Head | bytes | _Marker:
        """The next part of the response: a :class:`Head` (1xx ones first), body bytes, or
        :data:`END` (again on every later call); :data:`NEED_DATA` until more bytes (or the end
        of the stream) arrive.

        Raises:
            InvalidHTTPResponse: the response is not valid HTTP/1.1.
            IncompleteBody: the stream ended inside the body.
            ConnectionBroken: the stream ended before the head was complete.
        """
        state = self._state
        if state == _HEAD:
            return self._head()
        if state == _LENGTH:
            return self._fixed()
        if state == _UNTIL_EOF:
            if self._buffer:
                return self._take(len(self._buffer))
            if self._eof:
                self._state = _DONE
                return END
            return NEED_DATA
        if state == _DONE:
            return END
        return self._chunked()

    # -- heads -----------------------------------------------------------------------------------

    def _head(self) -> Head | _Marker:
        buffer = self._buffer
        if buffer[:1] == b"\n" or buffer[:2] == b"\r\n":
            raise InvalidHTTPResponse("the answer starts with an empty line, not a status line")
        raw = self._section("response head")
        if raw is None:
            if self._eof:
                if not buffer:
                    raise ConnectionBroken("the server closed the connection without answering")
                raise ConnectionBroken("the server closed the connection in the middle of the answer's head")
            if buffer and buffer[0] < 0x21:  # no status line starts so (a TLS answer to plain HTTP)
                raise InvalidHTTPResponse(f"illegal status line: {_shown(buffer)}")
            return NEED_DATA
        first, section = _first_line(raw)
        status_line = _status_line(first)
        if status_line is None:
            raise InvalidHTTPResponse(f"illegal status line: {_shown(first)}")
        version, status, reason = status_line
        if status < 100:
            raise InvalidHTTPResponse(f"illegal status code {status:03d}")
        if status == 101:
            raise InvalidHTTPResponse("the server switched protocols, which was not asked for")
        fields, length, chunked = _fields(section, "response head")
        head = Head(status, reason, version, fields)
        if status >= 200:
            self._frame(head, length, chunked)
        return head  # an informational (1xx) head: the real one follows

    def _frame(self, head: Head, length: bytes | None, chunked: bool) -> None:
        """Decides how the body is delimited (RFC 9112 section 6.3, as h11 does) and whether the
        connection may be kept."""
        close = head.http_version < b"1.1" or b"close" in _comma_values(head.headers, b"connection")
        self._keep_alive = not close
        self._received = 0
        self._length = None
        if self._head_request or head.status in (204, 304):
            self._end()
        elif chunked:
            if length is not None:  # chunks frame it, and the connection is not trusted after
                self._keep_alive = False
            self._state = _CHUNK_HEADER_LINE
        elif length is not None:
            self._remaining = self._length = int(length)
            if self._remaining:
                self._state = _LENGTH
            else:
                self._end()
        else:
            self._state = _UNTIL_EOF
            self._keep_alive = False

    def _end(self) -> None:
        """The response is complete: bytes after it that no request asked for make the connection
        unusable for another."""
        self._state = _DONE
        self.reusable = self._keep_alive and not self._buffer

    # -- bodies ------------------------------------------------------------------------------------

    def _fail(self, message: str, status: int = 400) -> Exception:
        return InvalidHTTPResponse(message)

    def _short(self) -> IncompleteBody:
        if self._length is not None:
            return IncompleteBody(
                f"the server closed the connection after {self._received} of the {self._length} bytes "
                "its Content-Length announced",
                received=self._received,
                expected=self._length,
            )
        return IncompleteBody(
            f"the server closed the connection inside a chunked body (after {self._received} bytes)",
            received=self._received,
        )
