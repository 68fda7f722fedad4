"""A bounded Server-Sent Events decoder, without I/O.

Theory of operation: the WHATWG event-stream format (HT-S01): lines end in CRLF, LF or CR; a
line ``field: value`` adds to the event being built (one leading space of the value is
stripped); ``data`` lines accumulate joined by ``\\n``; an empty line dispatches the event; lines
starting with ``:`` are comments (keep-alives); ``id`` sets the last event id (ignored when it
contains NUL); ``retry`` takes ASCII digits only (anything else is ignored); unknown fields are
ignored; a UTF-8 BOM at the start is dropped. An event with empty ``data`` still updates the id
and retry (the 2025-11-25 *priming* event: an id and no data, HT-S02), and is reported so the
caller can remember the id, but it is not a message.

Memory is bounded (HT-S03): one event's accumulated size may not exceed ``max_event_bytes``, and a
line without a terminator may not grow past it either, so a server that streams a gigabyte with
no newline fails fast with :class:`~mcpwire.errors.FrameTooLarge`. A CR at the end of one chunk
may be the first half of a CRLF split across chunks; the decoder remembers that.
"""

from __future__ import annotations

import msgspec

from ..errors import FrameTooLarge
from .framing import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["SSEDecoder", "SSEEvent"]

_BOM = b"\xef\xbb\xbf"


class SSEEvent(msgspec.Struct, frozen=True):
    """One dispatched event. ``id`` is the stream's last event id after this event."""

    event: str
    data: str
    id: str | None
    retry: int | None


class SSEDecoder:
    """Feeds bytes, returns complete events."""

    __slots__ = ("_buf", "_data", "_data_size", "_event", "_last_id", "_max", "_pending_cr", "_retry", "_started")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max = max_event_bytes
        self._buf = bytearray()
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._pending_cr = False
        self._started = False

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    @property
    def retry(self) -> int | None:
        """The last ``retry`` value in milliseconds, if any."""
        return self._retry

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []  # nothing to read, and a CR that ended the last chunk may still meet its LF
        buf = self._buf
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        buf += chunk
        if not self._started:
            # Only the stream's first bytes can be a BOM: wait while they may still become one,
            # and decide once, before any line is read (a BOM later in the stream is content).
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)):
                return []
            self._started = True
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
        events: list[SSEEvent] = []
        start = 0
        n = len(buf)
        while start < n:
            lf = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, lf if lf != -1 else n)
            if cr != -1:
                end, nxt = cr, cr + 1
                if nxt < n and buf[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._pending_cr = True
            elif lf != -1:
                end, nxt = lf, lf + 1
            else:
                break
            event = self._line(bytes(buf[start:end]))
            if event is not None:
                events.append(event)
            start = nxt
        if start:
            del buf[:start]
        if len(buf) > self._max:
            raise FrameTooLarge(len(buf), self._max)
        return events

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            return self._dispatch()
        if raw[:1] == b":":
            return None  # comment / keep-alive
        line = raw.decode("utf-8", "replace")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_size += len(value) + 1
            if self._data_size > self._max:
                size = self._data_size
                self._data.clear()
                self._data_size = 0
                raise FrameTooLarge(size, self._max)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            # WHATWG: "If the field value consists of only ASCII digits"; str.isdigit() alone
            # also accepts digits such as "²" that int() refuses.
            self._retry = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        # WHATWG: an event without data lines is not dispatched; its id and retry still count
        # (read them from last_event_id / retry).
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data), self._last_id, self._retry)
        self._data.clear()
        self._data_size = 0
        self._event = ""
        return event
