"""The WHATWG event-stream format, parsed incrementally (the HTTP wires read SSE with it).

Theory of operation: :meth:`SseParser.feed` takes bytes as they come (any chunking), decodes UTF-8
incrementally (invalid bytes become U+FFFD), splits lines on CRLF, LF or CR (a CR at the end of a
chunk waits to see whether an LF follows) and dispatches an :class:`SseEvent` at each blank line,
with the event's ``id`` and ``retry`` when the server set them. Comment lines (keep-alives) are
only counted.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_EVENT_CHARS", "SseEvent", "SseParser"]

#: the longest line or event data kept; a longer one is dropped and counted in ``oversize``
MAX_EVENT_CHARS: Final = 16 * 1024 * 1024


@dataclass(slots=True, frozen=True)
class SseEvent:
    """One dispatched SSE event (WHATWG event-stream rules)."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class SseParser:
    """Incremental WHATWG event-stream parser (lines end in CRLF, LF or CR)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        #: the line begun and not ended yet, in pieces (a long line is not copied again per chunk)
        self._partial: list[str] = []
        self._partial_chars = 0
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._pending_cr = False
        self._data_chars = 0
        self.comments = 0
        #: lines or events dropped for being longer than MAX_EVENT_CHARS
        self.oversize = 0

    def feed(self, data: bytes) -> list[SseEvent]:
        text = self._decoder.decode(data)
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = text.endswith("\r")
        if "\n" not in text and "\r" not in text:
            self._partial.append(text)
            self._partial_chars += len(text)
            if self._partial_chars > MAX_EVENT_CHARS:  # a line without end: drop what came of it
                self._partial, self._partial_chars = [], 0
                self.oversize += 1
            return []
        lines = re.split(r"\r\n|\r|\n", "".join(self._partial) + text)
        rest = lines.pop()
        self._partial, self._partial_chars = ([rest], len(rest)) if rest else ([], 0)
        out: list[SseEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                out.append(event)
        return out

    def _line(self, line: str) -> SseEvent | None:
        if line == "":
            if not self._data and self._id is None and self._retry is None:
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
            self._data, self._event, self._id, self._retry = [], "", None, None
            self._data_chars = 0
            return event
        if line.startswith(":"):
            self.comments += 1
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_chars += len(value) + 1
            if self._data_chars > MAX_EVENT_CHARS:
                self._data, self._data_chars = [], 0
                self.oversize += 1
            else:
                self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None
