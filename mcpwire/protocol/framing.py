"""Newline-delimited framing for stdio (and any byte-stream transport).

Theory of operation: 2026-07-28 basic/transports/stdio: "Messages are delimited by newlines,
and MUST NOT contain embedded newlines" (ST-03). Bytes arrive in arbitrary pieces; the buffer
accumulates them in one ``bytearray`` (amortised O(1) appends, O(1) deletes from the front) and
remembers how far it has already scanned for ``\\n``, so a 32 MiB line costs one pass, not a
quadratic series of concatenations and rescans.

Only ``\\n`` splits. ``str.splitlines`` would also split on U+2028, U+0085 and ``\\x1c``, which
are legal, unescaped content inside JSON strings. A trailing ``\\r`` is stripped (servers on
Windows, or ones that print with CRLF), a UTF-8 byte order mark is accepted at the very start of
the stream, and blank lines are skipped. A line longer than ``max_line_bytes`` raises
:class:`~mcpwire.errors.FrameTooLarge` as soon as the buffer passes the limit, before it grows
any further, so a server that never sends a newline cannot exhaust memory.
"""

from __future__ import annotations

from typing import Final

from ..errors import FrameTooLarge

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "LineBuffer", "encode_line"]

#: Default maximum size of one message: large results (files, images) are legitimate.
DEFAULT_MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024

_BOM: Final = b"\xef\xbb\xbf"
_COPY_ONCE_BYTES: Final = 16 * 1024  # longer lines are copied out through a memoryview


class LineBuffer:
    """Splits a byte stream into lines.

    Args:
        max_line_bytes: the largest line accepted, excluding its terminator.
    """

    __slots__ = ("_buf", "_max", "_scanned", "_started")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be positive, not {max_line_bytes}")
        self._buf = bytearray()
        self._max = max_line_bytes
        self._scanned = 0  # bytes of _buf already known to hold no b"\n"
        self._started = False  # a BOM is only meaningful before the first byte

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a complete line."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Adds ``data`` and returns every line it completes, terminators removed.

        Raises:
            FrameTooLarge: a line exceeds ``max_line_bytes``. The buffer is unusable after.
        """
        buf = self._buf
        buf += data
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)):
                return []  # could still be the start of a BOM
            self._started = True
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
        lines: list[bytes] = []
        start = 0
        pos = buf.find(b"\n", self._scanned)
        while pos != -1:
            end = pos
            if end > start and buf[end - 1] == 0x0D:  # strip one trailing \r
                end -= 1
            if end - start > self._max:
                raise FrameTooLarge(end - start, self._max)
            if end - start > _COPY_ONCE_BYTES:
                with memoryview(buf) as view:  # one copy, not two (slice, then bytes)
                    lines.append(bytes(view[start:end]))
            elif end > start:
                lines.append(bytes(buf[start:end]))
            start = pos + 1
            pos = buf.find(b"\n", start)
        if start:
            del buf[:start]
        self._scanned = len(buf)
        if len(buf) > self._max + 1:  # +1: a line of exactly max bytes may still await its \r
            raise FrameTooLarge(len(buf), self._max)
        return lines

    def close(self) -> bytes | None:
        """At end of stream: the final line if it lacked a terminator, else ``None``.

        Raises:
            FrameTooLarge: that final line exceeds ``max_line_bytes``.
        """
        rest = bytes(self._buf)
        if rest.endswith(b"\r"):
            rest = rest[:-1]
        self._buf.clear()
        self._scanned = 0
        if len(rest) > self._max:  # ST-07: the limit holds for the stream's last line too
            raise FrameTooLarge(len(rest), self._max)
        if not rest.strip():
            return None
        return rest


def encode_line(payload: bytes) -> bytes:
    """Terminates an encoded JSON message for a newline-delimited stream.

    msgspec never emits raw newlines (they are escaped inside strings), so no check is needed;
    the assertion documents the invariant (ST-03).
    """
    return payload + b"\n"
