"""HTTP/1.1 sans I/O: a client's request and the response framed from the bytes read.

Theory of operation: the default HTTP client sends small requests whose headers it builds itself
and reads answers from servers it does not trust. This is the least of RFC 9112 that such a client
needs, checked as strictly as h11 checks it, at a fraction of the cost per message:

- :func:`encode_request` writes the request line, the headers and the body in one piece; a method,
  target, header name or value that could end a line or smuggle a header is refused
  (:class:`LocalProtocolError`), wherever it came from.
- :class:`ResponseReader` takes the bytes read (:meth:`~ResponseReader.feed`, and
  :meth:`~ResponseReader.feed_eof` at the end of the stream) and gives, in order, the response's
  :class:`Head` (after any 1xx heads), pieces of its body, and :data:`END`; :data:`NEED_DATA`
  when it needs more bytes. The head is bounded (``max_head_bytes``); the body is framed by
  ``Transfer-Encoding: chunked``, by ``Content-Length``, or by the end of the stream (RFC 9112
  section 6.3), and is never buffered beyond what was read. A response that breaks the framing
  raises :class:`RemoteProtocolError`.
- After :data:`END`, :attr:`~ResponseReader.reusable` says whether the connection may carry
  another request (HTTP/1.1, no ``Connection: close``, framed by length or chunks, no stray bytes
  after the response); :meth:`~ResponseReader.next_response` readies the reader for it.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import re
import time
from dataclasses import dataclass
from typing import Final

__all__ = [
    "END",
    "NEED_DATA",
    "Head",
    "LocalProtocolError",
    "TOKEN",
    "RemoteProtocolError",
    "ResponseReader",
    "encode_request",
    "retry_after_seconds",
]

#: a header name or method (RFC 9110 token)
TOKEN: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_BAD_VALUE: Final = re.compile(rb"[\x00\r\n]")
_BAD_TARGET: Final = re.compile(rb"[\x00-\x20\x7f]")
_STATUS_LINE: Final = re.compile(rb"HTTP/(1\.[01]) ([0-9]{3})(?: ([\t\x20-\x7e\x80-\xff]*))?")
_CHUNK_SIZE: Final = re.compile(rb"([0-9a-fA-F]{1,16})[\t ]*(?:;[\t\x20-\x7e\x80-\xff]*)?")
#: the longest chunk-size line or trailer section accepted
MAX_CHUNK_LINE: Final = 4096
# RFC 9110 section 10.2.3: delay-seconds = 1*DIGIT (a decimal fraction is read too)
_DELAY_SECONDS: Final = re.compile(r"[0-9]{1,10}(?:\.[0-9]{1,6})?")


class LocalProtocolError(ValueError):
    """A request this client was asked to send is not valid HTTP/1.1."""


class RemoteProtocolError(ValueError):
    """The server's response is not valid HTTP/1.1 (or ended early)."""


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = _Marker("NEED_DATA")
END: Final = _Marker("END")


@dataclass(frozen=True, slots=True)
class Head:
    """A response's status line and headers (names as sent; values without surrounding blanks)."""

    status: int
    reason: bytes
    http_version: bytes
    headers: list[tuple[bytes, bytes]]


def encode_request(method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes | None) -> bytes:
    """The request's bytes: request line, ``headers`` as given (``Host`` and any
    ``Content-Length`` among them), an empty line, ``body``.

    Raises:
        LocalProtocolError: the method, target, a header name or a value is not valid.
    """
    verb = method.encode("ascii", "replace")
    if not TOKEN.fullmatch(verb):
        raise LocalProtocolError(f"illegal method {method!r}")
    if not target or _BAD_TARGET.search(target):
        raise LocalProtocolError(f"illegal request target {target!r}")
    parts = [verb, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not TOKEN.fullmatch(name):
            raise LocalProtocolError(f"illegal header name {name!r}")
        if _BAD_VALUE.search(value):
            raise LocalProtocolError(f"illegal header value {value!r}")
        parts += (name, b": ", value.strip(b" \t"), b"\r\n")
    parts.append(b"\r\n")
    if body:
        parts.append(body)
    return b"".join(parts)


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
    if _DELAY_SECONDS.fullmatch(text):
        return float(text)
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


_HEAD, _LENGTH, _CHUNK_SIZE_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_EOF, _DONE = range(8)


class ResponseReader:
    """Frames the responses read from one connection, one at a time (see the module's theory of
    operation).

    Args:
        max_head_bytes: the most bytes a response's head may take.
    """

    def __init__(self, max_head_bytes: int = 64 * 1024) -> None:
        self._max_head = max_head_bytes
        self._buffer = bytearray()
        self._eof = False
        self._state = _HEAD
        self._remaining = 0
        self._head_request = False
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

    def next_response(self) -> None:
        """Readies the reader for the next response on a reusable connection.

        Raises:
            RemoteProtocolError: the previous response is not complete, or the connection is not
                reusable.
        """
        if self._state != _DONE or not self.reusable:
            raise RemoteProtocolError("the connection cannot carry another request")
        self._state = _HEAD
        self.reusable = False

    def next_event(self) -> Head | bytes | _Marker:
        """The next part of the response: a :class:`Head` (1xx ones first), body bytes, or
        :data:`END` (again on every later call); :data:`NEED_DATA` until more bytes (or the end
        of the stream) arrive.

        Raises:
            RemoteProtocolError: the response is not valid, or the stream ended inside it.
        """
        state = self._state
        if state == _HEAD:
            return self._head()
        if state == _LENGTH:
            return self._fixed()
        if state == _UNTIL_EOF:
            if self._buffer:
                data = bytes(self._buffer)
                self._buffer.clear()
                return data
            if self._eof:
                self._state = _DONE
                return END
            return NEED_DATA
        if state == _DONE:
            return END
        return self._chunked()

    # -- the head --------------------------------------------------------------------------------

    def _head(self) -> Head | _Marker:
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > self._max_head:
                raise RemoteProtocolError(f"the response head is over {self._max_head} bytes")
            if self._eof:
                if not buffer:
                    raise RemoteProtocolError("Server disconnected without sending a response.")
                raise RemoteProtocolError("the server closed the connection in the middle of the response head")
            return NEED_DATA
        if end > self._max_head:
            raise RemoteProtocolError(f"the response head is over {self._max_head} bytes")
        lines = bytes(buffer[:end]).split(b"\r\n")
        del buffer[: end + 4]
        match = _STATUS_LINE.fullmatch(lines[0])
        if match is None:
            raise RemoteProtocolError(f"illegal status line: {lines[0][:100]!r}")
        version, status = match.group(1), int(match.group(2))
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not TOKEN.fullmatch(name):
                raise RemoteProtocolError(f"illegal header line: {line[:100]!r}")
            value = value.strip(b" \t")
            if b"\r" in value or b"\x00" in value:
                raise RemoteProtocolError(f"illegal header value in: {line[:100]!r}")
            headers.append((name, value))
        head = Head(status, match.group(3) or b"", version, headers)
        if status < 200:
            if status == 101:
                raise RemoteProtocolError("the server switched protocols, which was not asked for")
            return head  # informational: the real head follows
        self._frame(head)
        return head

    def _frame(self, head: Head) -> None:
        """Decides how the body is delimited (RFC 9112 section 6.3) and whether the connection
        stays reusable."""
        lengths: list[bytes] = []
        codings: list[bytes] = []
        close = head.http_version != b"1.1"
        for name, value in head.headers:
            lowered = name.lower()
            if lowered == b"content-length":
                lengths += [v.strip(b" \t") for v in value.split(b",")]
            elif lowered == b"transfer-encoding":
                codings += [v.strip(b" \t").lower() for v in value.split(b",")]
            elif lowered == b"connection" and b"close" in [v.strip(b" \t").lower() for v in value.split(b",")]:
                close = True
        self.reusable = not close
        if self._head_request or head.status in (204, 304):
            self._state = _DONE
            self._check_end()
        elif codings:
            if codings != [b"chunked"]:
                raise RemoteProtocolError(f"unsupported transfer encoding {b', '.join(codings)!r}")
            if lengths:  # both: chunked frames the body, and the connection is not trusted after it
                self.reusable = False
            self._state = _CHUNK_SIZE_LINE
        elif lengths:
            if len(set(lengths)) != 1 or not lengths[0].isdigit() or len(lengths[0]) > 18:
                raise RemoteProtocolError(f"illegal Content-Length {b', '.join(lengths)[:100]!r}")
            self._remaining = int(lengths[0])
            self._state = _LENGTH if self._remaining else _DONE
            if not self._remaining:
                self._check_end()
        else:
            self._state = _UNTIL_EOF
            self.reusable = False

    def _check_end(self) -> None:
        """At the end of a response: bytes after it that no request asked for make the
        connection unusable for another."""
        if self._buffer:
            self.reusable = False

    # -- the body ------------------------------------------------------------------------------

    def _fixed(self) -> bytes | _Marker:
        buffer = self._buffer
        if not buffer:
            if self._eof:
                raise RemoteProtocolError("peer closed connection without sending complete message body")
            return NEED_DATA
        if len(buffer) <= self._remaining:
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[: self._remaining])
            del buffer[: self._remaining]
        self._remaining -= len(data)
        if not self._remaining:
            self._state = _DONE
            self._check_end()
        return data

    def _chunked(self) -> bytes | _Marker:
        buffer = self._buffer
        while True:
            state = self._state
            if state == _CHUNK_DATA:
                if not buffer:
                    break
                size = min(len(buffer), self._remaining)
                data = bytes(buffer[:size])
                del buffer[:size]
                self._remaining -= size
                if not self._remaining:
                    self._state = _CHUNK_END
                return data
            if state == _CHUNK_SIZE_LINE:
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > MAX_CHUNK_LINE:
                        raise RemoteProtocolError("a chunk-size line is too long")
                    break
                match = _CHUNK_SIZE.fullmatch(bytes(buffer[:end]))
                if match is None:
                    raise RemoteProtocolError(f"illegal chunk-size line {bytes(buffer[:end])[:100]!r}")
                del buffer[: end + 2]
                self._remaining = int(match.group(1), 16)
                self._state = _CHUNK_DATA if self._remaining else _TRAILERS
            elif state == _CHUNK_END:
                if len(buffer) < 2:
                    break
                if buffer[:2] != b"\r\n":
                    raise RemoteProtocolError("a chunk does not end with CRLF")
                del buffer[:2]
                self._state = _CHUNK_SIZE_LINE
            else:  # _TRAILERS: header lines after the last chunk, up to an empty line; ignored
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > MAX_CHUNK_LINE:
                        raise RemoteProtocolError("the trailer section is too long")
                    break
                del buffer[: end + 2]
                if end == 0:
                    self._state = _DONE
                    self._check_end()
                    return END
        if self._eof:
            raise RemoteProtocolError("peer closed connection without sending complete message body")
        return NEED_DATA
