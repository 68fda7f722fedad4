"""``/events``: one server-sent event stream of what happens in the service, resumable.

Theory of operation: :meth:`EventHub.publish` (synchronous, cheap) numbers each event and keeps
the last ``kept`` in a ring. A subscriber gets a bounded channel; a subscriber that falls
``buffer`` events behind is dropped (its stream ends), so one slow client cannot make the service
hold unbounded memory: it reconnects with ``Last-Event-ID`` and receives what it missed from the
ring. Ids are ``<boot>-<n>``: after a restart, or when the ring no longer holds the event after the
one a client names, the client first gets a ``reset`` event saying events may have been missed.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Final

import msgspec
import trio

from ..protocol.types import JSONValue

__all__ = ["KEEPALIVE_SECONDS", "EventHub", "ServiceEvent", "Subscription"]

#: seconds between comment lines that keep an idle stream (and proxies) alive
KEEPALIVE_SECONDS: Final = 15.0
_encode = msgspec.json.Encoder().encode


class ServiceEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event: ``kind`` (``status``, ``tools``, ``approval``, ``pin``, ``prompts``,
    ``resources``, ``audit``, ``server``, ``reset``), when, and its data."""

    id: str
    kind: str
    time: float
    data: dict[str, JSONValue]

    def sse(self) -> bytes:
        payload = _encode({"kind": self.kind, "time": self.time, "data": self.data})
        return b"id: " + self.id.encode() + b"\nevent: " + self.kind.encode() + b"\ndata: " + payload + b"\n\n"


class Subscription:
    """A subscriber's bounded queue; iterate it for events until it is closed or dropped."""

    def __init__(self, hub: EventHub, buffer: int) -> None:
        self._hub = hub
        self._send, self._recv = trio.open_memory_channel[ServiceEvent](buffer)
        self.dropped = False

    def offer(self, event: ServiceEvent) -> None:
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.dropped = True
            self._hub.dropped_clients += 1
            self.close()
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def close(self) -> None:
        self._hub._subscribers.discard(self)
        self._send.close()

    async def receive(self, timeout: float) -> ServiceEvent | None:
        """The next event; ``None`` after ``timeout`` seconds without one.

        Raises:
            trio.EndOfChannel: the subscription was closed (shutdown) or dropped (too slow).
        """
        with trio.move_on_after(timeout):
            return await self._recv.receive()
        return None

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        self._recv.close()


class EventHub:
    """Numbered events, a ring of recent ones, and bounded subscribers."""

    def __init__(self, *, kept: int = 1000, buffer: int = 1000) -> None:
        self.boot = secrets.token_hex(4)
        self._next = 1
        self._ring: deque[ServiceEvent] = deque(maxlen=max(1, kept))
        self._buffer = max(1, buffer)
        self._subscribers: set[Subscription] = set()
        self._closed = False
        self.published = 0
        self.dropped_clients = 0

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @property
    def position(self) -> str:
        """The id of the latest event (``<boot>-0`` before the first): a page made now subscribes
        after it, so that what changes between the page being made and its stream opening is
        not lost."""
        return f"{self.boot}-{self._next - 1}"

    def publish(self, kind: str, data: dict[str, JSONValue]) -> ServiceEvent:
        event = ServiceEvent(id=f"{self.boot}-{self._next}", kind=kind, time=time.time(), data=data)
        self._next += 1
        self.published += 1
        self._ring.append(event)
        for sub in list(self._subscribers):
            sub.offer(event)
        return event

    def subscribe(self, last_event_id: str | None = None) -> tuple[Subscription, list[ServiceEvent]]:
        """A new subscription and what it missed after ``last_event_id`` (a ``reset`` event first
        when that id is from another run or no longer kept)."""
        sub = Subscription(self, self._buffer)
        if self._closed:
            sub.close()
        else:
            self._subscribers.add(sub)
        return sub, self._missed(last_event_id)

    def _missed(self, last_event_id: str | None) -> list[ServiceEvent]:
        if not last_event_id:
            return []
        boot, _, number = last_event_id.strip().partition("-")
        ring = list(self._ring)
        oldest = int(ring[0].id.partition("-")[2]) if ring else self._next
        if boot == self.boot and number.isdigit():
            after = int(number)
            if after + 1 >= oldest or after >= self._next - 1:
                return [e for e in ring if int(e.id.partition("-")[2]) > after]
            reason = "the events after the one named are no longer kept"
        else:
            reason = "the service restarted since the event named"
        reset = ServiceEvent(
            id=f"{self.boot}-{max(0, oldest - 1)}",
            kind="reset",
            time=time.time(),
            data={"reason": reason, "lastEventId": last_event_id[:100]},
        )
        return [reset, *ring]

    def close(self) -> None:
        """Ends every stream (at shutdown)."""
        self._closed = True
        for sub in list(self._subscribers):
            sub.close()


async def sse_stream(
    hub: EventHub, last_event_id: str | None, *, keepalive: float = KEEPALIVE_SECONDS
) -> AsyncIterator[bytes]:
    """The bytes of one ``/events`` response: missed events, then live ones, with keep-alives."""
    sub, missed = hub.subscribe(last_event_id)
    async with sub:
        yield b": mcpwire events\nretry: 2000\n\n"
        for event in missed:
            yield event.sse()
        while True:
            try:
                live = await sub.receive(keepalive)
            except trio.EndOfChannel:
                return
            yield b": keep-alive\n\n" if live is None else live.sse()
