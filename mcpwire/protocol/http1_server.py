"""HTTP/1.1 sans I/O, the server's side: the requests a client sends, and the responses to them.

Theory of operation: this is the server's half of mcpwire's one HTTP/1.1 codec (:mod:`.http1` is
the client's; the two share its rules for lines, fields and chunks). It reads what h11's server
side reads, the same way, and writes responses byte for byte as h11 writes them; a differential
property test holds it to that. One :class:`ServerConnection` per client connection:

- :meth:`~ServerConnection.receive_data` takes the bytes read (``b""``: the client closed its
  side); :meth:`~ServerConnection.next_event` gives, in order, the :class:`Request` (its head),
  pieces of its body (``bytes``) and :data:`END`, or :data:`NEED_DATA` until more bytes arrive,
  or :data:`CLOSED` when the client closed the connection between requests. A request it cannot
  read raises :class:`BadRequest` with the status to answer it with (400; 431 for a head over
  ``max_head_bytes``; 501 for a transfer coding other than chunked), and the connection reads no
  more.

  A request is read as h11 reads it (RFC 9112 with h11's leniencies): a head ends at an empty
  line, lines end in CRLF or a bare LF, a folded (obs-fold) line joins the one before it, an
  HTTP/1.1 request carries one ``Host`` (no request two); ``Content-Length`` may repeat or list one same
  number, and ``Transfer-Encoding`` may only be ``chunked`` (it then frames the body); a request
  with neither has no body. Header names come lowercased, values without surrounding blanks.
  Every incomplete piece (a head, a chunk-size line, a trailer section) is bounded by
  ``max_head_bytes``. Bytes after a request (a pipelined one) wait for the next cycle.
- The response: :meth:`~ServerConnection.response` validates a head (names are tokens; a value
  holds no NUL, CR, LF, VT or FF and no blanks at either end; 1xx heads only as
  :meth:`~ServerConnection.informational`) and frames it as h11 does: by ``Content-Length``, by
  chunks, or, for an HTTP/1.0 client, by the end of the connection; no body for ``HEAD``, 204
  and 304; ``Connection: close`` added when the connection will not carry another request.
  :meth:`~ServerConnection.body` and :meth:`~ServerConnection.end` give the bytes of the body and
  of its end; a body longer or shorter than its ``Content-Length`` raises
  :class:`~mcpwire.errors.LocalProtocolError`, as does anything sent out of turn.
- The connection carries another request (:meth:`~ServerConnection.start_next_cycle`) when both
  the request and the response are complete and neither said ``Connection: close`` (nor is the
  client HTTP/1.0).
"""

from __future__ import annotations

import functools
import re
from typing import Final

import msgspec

from ..errors import LocalProtocolError
from .http1 import (
    _CHUNK_HEADER_LINE,
    _DONE,
    _HEAD,
    _LENGTH,
    _NOT_IN_VALUE,
    END,
    NEED_DATA,
    _comma_values,
    _content_length,
    _fields,
    _first_line,
    _holds_any,
    _is_token,
    _Marker,
    _MessageReader,
    _shown,
)

__all__ = ["CLOSED", "END", "NEED_DATA", "BadRequest", "Request", "ServerConnection"]

#: the client closed the connection between requests
CLOSED: Final = _Marker("CLOSED")

#: what a request target may not hold: h11 takes only visible ASCII bytes
_NOT_IN_REQUEST_TARGET: Final = bytes(range(0x21)) + bytes(range(0x7F, 0x100))
#: statuses whose responses never have a body
_NO_BODY: Final = (204, 304)

#: the reader's state after a request it could not read
_ERROR: Final = -1
# the response's states
_IDLE, _READY, _BODY, _SENT = range(4)
# how a response's body is framed
_BY_LENGTH, _BY_CHUNKS, _BY_CLOSE = range(3)


class BadRequest(Exception):
    """The client sent something that is not a request h11 reads; ``status`` is the answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Request(msgspec.Struct, frozen=True):
    """A request's head: names lowercased, values without surrounding blanks (``Content-Length``
    as its one number, ``Transfer-Encoding`` lowercased)."""

    method: bytes
    target: bytes
    http_version: bytes
    headers: list[tuple[bytes, bytes]]


def _request_line(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The method, target and version of ``method SP request-target SP HTTP/d.d`` (h11's
    grammar); None when ``line`` is not one."""
    first = line.find(b" ")
    last = line.rfind(b" ")
    if first < 1 or last <= first + 1:
        return None
    method, target, version = line[:first], line[first + 1 : last], line[last + 1 :]
    if (
        len(version) != 8
        or version[:5] != b"HTTP/"
        or not version[5:6].isdigit()  # bytes.isdigit: ASCII digits only
        or version[6:7] != b"."
        or not version[7:8].isdigit()
        or not _is_token(method)
        or _holds_any(target, _NOT_IN_REQUEST_TARGET)
    ):
        return None
    return method, target, version[5:]


def _check_value(name: bytes, value: bytes) -> None:
    """A response field as h11 takes it: a token for a name; a value with no NUL, line break,
    VT or FF, and no blank at either end."""
    if not _is_token(name):
        raise LocalProtocolError(f"illegal header name {name[:100]!r}")
    if value and (_holds_any(value, _NOT_IN_VALUE) or value[:1] in (b" ", b"\t") or value[-1:] in (b" ", b"\t")):
        # the value is not shown: it may be a credential
        raise LocalProtocolError(f"illegal value of header {name.decode('ascii')!r}")


#: response fields, each as ``name NUL value LF``, that :func:`_check_value` takes: a token, and a
#: value with none of :data:`_NOT_IN_VALUE` that neither starts nor ends with a blank. NUL and LF
#: are in neither a name nor a value that is taken, so each line is one field, split where it
#: was joined. Every repetition is possessive: nothing is tried twice.
_CHECKED_FIELDS: Final = (
    rb"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]++\x00(?:[^ \t\x00\n\r\x0b\x0c]++(?:[ \t]++[^ \t\x00\n\r\x0b\x0c]++)*+)?\n)*+"
)


@functools.cache
def _checked_fields() -> re.Pattern[bytes]:
    """(Compiled at the first response, not at import.)"""
    return re.compile(_CHECKED_FIELDS)


def _all_valid(fields: list[tuple[bytes, bytes]]) -> bool:
    """Whether :func:`_check_value` takes every field, asked in one pass of the regular
    expression engine. A LF inside a name or value makes more lines than fields: not taken (and
    then each field is checked alone, which says what is wrong)."""
    section = b"".join([b"%s\x00%s\n" % field for field in fields])
    return section.count(b"\n") == len(fields) and _checked_fields().fullmatch(section) is not None


class ServerConnection(_MessageReader):
    """One client connection, one request at a time (see the module's theory of operation).

    Args:
        max_head_bytes: the most bytes an incomplete head, chunk-size line or trailer section may
            take.
    """

    def __init__(self, max_head_bytes: int = 16 * 1024) -> None:
        super().__init__(max_head_bytes)
        #: the request being served (None before its head is read)
        self.request: Request | None = None
        self._request_keep_alive = True
        self._response = _IDLE
        self._framing = _BY_LENGTH
        self._to_send = 0
        self._head_request = False
        self._response_keep_alive = True
        #: the client sent ``Expect: 100-continue`` and neither a body nor an answer has followed
        self.waiting_for_100_continue = False

    # -- reading -----------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes read from the connection; ``b""`` when the client closed its side."""
        if data:
            self._buffer += data
        else:
            self._eof = True

    @property
    def buffered(self) -> int:
        """Bytes read and not yet taken by an event (a pipelined request, or part of one)."""
        return len(self._buffer)

    @property
    def request_complete(self) -> bool:
        """Whether the current request has been read to its end."""
        return self._state == _DONE

    @property
    def failed(self) -> bool:
        """Whether the client sent something unreadable (nothing more is read)."""
        return self._state == _ERROR

    def next_event(self) -> Request | bytes | _Marker:
        """The next part of the request: its :class:`Request`, body bytes, or :data:`END` (again
        on every later call until :meth:`start_next_cycle`); :data:`NEED_DATA` until more bytes
        arrive; :data:`CLOSED` when the client closed the connection before another request.

        Raises:
            BadRequest: the request cannot be read (nothing more will be).
        """
        state = self._state
        try:
            if state == _HEAD:
                return self._head()
            if state == _DONE:
                self.waiting_for_100_continue = False  # (h11: the client's end of message)
                return END
            if state == _ERROR:
                raise BadRequest("the request could not be read")
            event = self._fixed() if state == _LENGTH else self._chunked()
            if event is not NEED_DATA:
                self.waiting_for_100_continue = False  # (h11: the client's body)
            return event
        except BadRequest:
            self._state = _ERROR
            raise

    def _fail(self, message: str, status: int = 400) -> Exception:
        return BadRequest(message, status)

    def _short(self) -> Exception:
        return BadRequest(f"the client closed the connection inside a request body (after {self._received} bytes)")

    def _head(self) -> Request | _Marker:
        buffer = self._buffer
        if buffer[:1] == b"\n" or buffer[:2] == b"\r\n":
            raise BadRequest("no request line received")
        if buffer and buffer[0] < 0x21:  # no request line starts so (a TLS handshake to plain HTTP)
            raise BadRequest(f"illegal request line: {_shown(buffer)}")
        raw = self._section("request head")
        if raw is None:
            if self._eof:
                if buffer:
                    raise BadRequest("the client closed the connection in the middle of a request head")
                return CLOSED
            return NEED_DATA
        first, section = _first_line(raw)
        parts = _request_line(first)
        if parts is None:
            raise BadRequest(f"illegal request line: {_shown(first)}")
        method, target, version = parts
        fields, length, chunked = _fields(section, "request head", self._fail)
        headers = [(name.lower(), value) for name, value in fields]
        # RFC 9112 §3.2: an HTTP/1.1 request without Host, or any request with two, is a 400
        hosts = sum(1 for name, _ in headers if name == b"host")
        if version == b"1.1" and not hosts:
            raise BadRequest("Missing mandatory Host: header")
        if hosts > 1:
            raise BadRequest("Found multiple Host: headers")
        request = Request(method, target, version, headers)
        self.request = request
        self._request_keep_alive = version >= b"1.1" and b"close" not in _comma_values(headers, b"connection")
        self.waiting_for_100_continue = version >= b"1.1" and b"100-continue" in _comma_values(headers, b"expect")
        self._response = _READY
        self._received = 0
        if chunked:
            self._state = _CHUNK_HEADER_LINE
        elif length is not None and int(length):
            self._state = _LENGTH
            self._remaining = int(length)
        else:
            self._state = _DONE
        return request

    # -- writing -----------------------------------------------------------------------------

    @property
    def response_ready(self) -> bool:
        """Whether a request has been read and its response not yet started."""
        return self._response == _READY

    @property
    def response_started(self) -> bool:
        """Whether the response's head has been written (or is held to be)."""
        return self._response in (_BODY, _SENT)

    @property
    def response_complete(self) -> bool:
        """Whether the response to the current request has been written to its end."""
        return self._response == _SENT

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may carry another request after this one (so far)."""
        return self._request_keep_alive and self._response_keep_alive

    def informational(self, status: int, headers: list[tuple[bytes, bytes]], reason: bytes = b"") -> bytes:
        """The bytes of a 1xx head (``100 Continue``) before the response.

        Raises:
            LocalProtocolError: no request waits for a response, the status is not 1xx, or a
                field is not valid.
        """
        if self._response != _READY:
            raise LocalProtocolError("no request is waiting for a response")
        if not 100 <= status < 200 or status == 101:
            raise LocalProtocolError(f"an informational response needs a 1xx status other than 101, not {status}")
        for name, value in headers:
            _check_value(name, value)
        self.waiting_for_100_continue = False
        return b"".join([b"HTTP/1.1 %d %s\r\n" % (status, reason), *_lines(headers), b"\r\n"])

    def response(self, status: int, headers: list[tuple[bytes, bytes]], reason: bytes = b"") -> bytes:
        """The bytes of the response's head, framed as h11 frames it (see the module's theory of
        operation); its body follows with :meth:`body` and :meth:`end`.

        Raises:
            LocalProtocolError: no request waits for a response, the status is not 200 to 999, or
                a field (or the framing it asks for) is not valid.
        """
        request = self.request
        if self._response != _READY or request is None:
            raise LocalProtocolError("no request is waiting for a response")
        if not 200 <= status < 1000:
            raise LocalProtocolError(f"a response needs a status from 200 to 999, not {status}")
        if request.method == b"CONNECT" and status < 300:
            raise LocalProtocolError("a 2xx answer to CONNECT would switch protocols, which this server does not do")
        fields: list[tuple[bytes, bytes]] = []
        length: bytes | None = None
        coding = False
        checked = _all_valid(headers)
        for name, value in headers:
            if not checked:
                _check_value(name, value)
            # (only a name of the length of one of the two framing fields is lowercased to compare)
            lowered = name.lower() if len(name) == 14 or len(name) == 17 else name
            if lowered == b"content-length":
                number = _content_length(value)
                if number is None:
                    raise LocalProtocolError(f"illegal or conflicting Content-Length {value[:40]!r}")
                if length is not None:
                    if number != length:
                        raise LocalProtocolError("conflicting Content-Length headers")
                    continue
                length = number
                value = number
            elif lowered == b"transfer-encoding":
                if coding:
                    raise LocalProtocolError("multiple Transfer-Encoding headers")
                value = value.lower()
                if value != b"chunked":
                    raise LocalProtocolError("Only Transfer-Encoding: chunked is supported")
                coding = True
            fields.append((name, value))
        self._head_request = request.method == b"HEAD"
        # a HEAD response's head is what a GET would have had; its body is empty all the same
        if status in _NO_BODY:
            framing = _BY_LENGTH
        elif coding:
            framing = _BY_CHUNKS
        elif length is not None:
            framing = _BY_LENGTH
        else:
            framing = _BY_CLOSE
        old_client = request.http_version < b"1.1"
        need_close = False
        if framing != _BY_LENGTH:  # framed by chunks, or by the end of the connection for HTTP/1.0
            fields = [(n, v) for n, v in fields if n.lower() not in (b"content-length", b"transfer-encoding")]
            if old_client:
                need_close = not self._head_request
                framing = _BY_CLOSE
            else:
                fields.append((b"Transfer-Encoding", b"chunked"))
                framing = _BY_CHUNKS
        tokens = _comma_values(fields, b"connection")
        if not self._request_keep_alive or need_close:
            kept = set(tokens) - {b"keep-alive"} | {b"close"}
            fields = [(n, v) for n, v in fields if n.lower() != b"connection"]
            fields += [(b"Connection", token) for token in sorted(kept)]
        self._response_keep_alive = self._request_keep_alive and not need_close and b"close" not in tokens
        # the body the writer holds to: none for HEAD, 204 and 304
        if self._head_request or status in _NO_BODY:
            self._framing, self._to_send = _BY_LENGTH, 0
        else:
            self._framing = framing
            self._to_send = int(length) if framing == _BY_LENGTH and length is not None else 0
        self._response = _BODY
        self.waiting_for_100_continue = False
        return b"".join([b"HTTP/1.1 %d %s\r\n" % (status, reason), *_lines(fields), b"\r\n"])

    def body(self, data: bytes) -> bytes:
        """The bytes that carry ``data`` in the response's body.

        Raises:
            LocalProtocolError: no response head was written, or ``data`` goes past the
                ``Content-Length``.
        """
        if self._response != _BODY:
            raise LocalProtocolError("no response body is being written")
        framing = self._framing
        if framing == _BY_LENGTH:
            if len(data) > self._to_send:
                raise LocalProtocolError("Too much data for declared Content-Length")
            self._to_send -= len(data)
            return data
        if framing == _BY_CHUNKS:
            return b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        return data

    def end(self) -> bytes:
        """The bytes that end the response (the last chunk, when it has chunks).

        Raises:
            LocalProtocolError: no response head was written, or the body is shorter than its
                ``Content-Length``.
        """
        if self._response != _BODY:
            raise LocalProtocolError("no response body is being written")
        if self._framing == _BY_LENGTH and self._to_send:
            raise LocalProtocolError("Too little data for declared Content-Length")
        self._response = _SENT
        if self._framing == _BY_CLOSE:
            self._response_keep_alive = False
            return b""
        return b"0\r\n\r\n" if self._framing == _BY_CHUNKS else b""

    def start_next_cycle(self) -> None:
        """Readies the connection for the next request.

        Raises:
            LocalProtocolError: the request or its response is not complete, or the connection
                cannot carry another request.
        """
        if self._state != _DONE or self._response != _SENT or not self.keep_alive:
            raise LocalProtocolError("the connection cannot carry another request")
        self._state = _HEAD
        self._searched = 0
        self.request = None
        self._response = _IDLE
        self._response_keep_alive = True
        self.waiting_for_100_continue = False


def _lines(fields: list[tuple[bytes, bytes]]) -> list[bytes]:
    """Header lines as h11 writes them: a ``Host`` field first, then the rest in order."""
    lines = [b"%s: %s\r\n" % field for field in fields]
    hosts = [i for i, (name, _) in enumerate(fields) if len(name) == 4 and name.lower() == b"host"]
    if hosts:  # (a response seldom has one)
        lines = [lines[i] for i in hosts] + [line for i, line in enumerate(lines) if i not in hosts]
    return lines
