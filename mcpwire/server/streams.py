"""HTTP response streams: the messages of one request, kept for resumption.

Theory of operation: over Streamable HTTP every request gets an :class:`EventStream`, the
:class:`~mcpwire.server.core.Outlet` its handler writes to. The stream keeps its messages, each
encoded once, numbered from 1 (event id ``<stream>.<n>``), until the response is written; the
HTTP response reads them (:meth:`EventStream.wait`) and may start again after a cursor when the
client resumes with ``Last-Event-ID`` (2025-03-26 and later: "the server MAY use this header to
replay messages that would have been sent after the last event ID, on the stream that was
disconnected"). At most :data:`MAX_EVENTS` are kept; older ones cannot be replayed.

A stream is *done* after its final message (the request's answer). A resumable stream may be
*kicked* (:meth:`EventStream.drop_connection`): the response that is writing it ends at once,
leaving the stream open for a resuming GET (2025-11-25 basic/transports: the server "MAY close
the connection ... without terminating the stream"). A stream whose request runs in the task of
the response writing it (*held*) is never kicked: that response could not end before the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import trio

from ..protocol.serving import encode
from .core import JSONObject

__all__ = ["MAX_EVENTS", "EventStream"]

log = logging.getLogger("mcpwire.server.streams")

#: Events kept per stream for resumption.
MAX_EVENTS: Final = 1000


class EventStream:
    """The messages of one request (or one standalone GET stream), in order.

    Args:
        number: the stream's number in its session (the event id prefix).
        primed: start SSE with a priming event (an id and empty data: 2025-11-25).
        resumable: events carry ids and the stream can be resumed.
        persistent: a final message does not end the stream (HTTP+SSE, standalone streams).
    """

    __slots__ = (
        "_changed",
        "_kicked",
        "_next",
        "done",
        "events",
        "held",
        "number",
        "on_message",
        "on_nudge",
        "persistent",
        "primed",
        "readers",
        "resumable",
    )

    def __init__(
        self, number: int = 0, *, primed: bool = False, resumable: bool = False, persistent: bool = False
    ) -> None:
        self.number = number
        self.primed = primed
        self.resumable = resumable
        self.persistent = persistent
        #: (sequence number, encoded message, the message's error code when it is a final error)
        self.events: list[tuple[int, bytes, int | None]] = []
        self.done = False
        #: responses writing this stream now (0: nobody reads; messages wait for a resumption)
        self.readers = 0
        self._next = 1
        self._kicked = 0
        #: set by the next change; made when someone takes it (most streams have no reader)
        self._changed: trio.Event | None = None
        #: called after each message is kept (a response that writes only when needed)
        self.on_message: Callable[[], None] | None = None
        #: the request runs in the task of the response writing it: a kick is refused
        self.held = False
        #: called by :meth:`nudge` (the end of a wait that a request in flight must act on)
        self.on_nudge: Callable[[], None] | None = None

    # -- the Outlet side ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the stream is done: later messages are dropped."""
        return self.done

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        self.push(message, final=final)

    def push(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        """Keep one message (dropped once the stream is done)."""
        if self.done:
            return
        code = None
        error = message.get("error") if final and isinstance(message, dict) else None
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            code = error["code"]
        self.events.append((self._next, encode(message), code))
        self._next += 1
        if len(self.events) > MAX_EVENTS:
            del self.events[0]
        self.done = final and not self.persistent
        self._wake()
        if self.on_message is not None:
            self.on_message()

    def finish(self) -> None:
        """End the stream without a final message (a session ended, the server closes)."""
        self.done = True
        self._wake()

    def drop_connection(self) -> None:
        """End the response writing this stream now; a primed stream stays resumable. Not for a
        held stream (logged): its response ends with its request."""
        if self.held:
            log.warning("stream %d: its request runs in the task of its response, which cannot end first", self.number)
            return
        if self.primed:
            self._kicked += 1
            self._wake()

    # -- the HTTP side ---------------------------------------------------------------------------

    def nudge(self) -> None:
        """Wake whoever waits for a change, with nothing changed (a wait whose time is up)."""
        self._wake()
        if self.on_nudge is not None:
            self.on_nudge()

    @property
    def kicks(self) -> int:
        """How often :meth:`drop_connection` was called (a response compares it to its own count)."""
        return self._kicked

    def after(self, cursor: int) -> list[tuple[int, bytes, int | None]]:
        """The events with sequence numbers above ``cursor``."""
        return [event for event in self.events if event[0] > cursor]

    def signal(self) -> trio.Event:
        """The event the next change (a message, the end, a kick) sets: take it before looking at
        the stream, wait on it after, and no change made meanwhile is missed."""
        if self._changed is None:
            self._changed = trio.Event()
        return self._changed

    def event_id(self, seq: int) -> str:
        return f"{self.number}.{seq}"

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None
