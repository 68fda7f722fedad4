"""Host events: what changed, for anyone listening (a console, an API's event stream, a test).

Theory of operation: the host emits a :class:`HostEvent` for every change of a server's status,
of its tool, prompt or resource lists, of an approval, of a tool's pin, and for every audit
record. Each listener (:class:`HostEvents`) has its own bounded buffer; emitting never blocks, so a
slow listener loses events (counted in ``dropped``) instead of slowing calls down.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Self

import msgspec
import trio

from .approvals import Approval
from .pins import Pin
from .policies.audit import AuditRecord

__all__ = ["EventHub", "EventKind", "HostEvent", "HostEvents"]

EventKind = Literal["status", "tools", "prompts", "resources", "approval", "pin", "audit"]


class HostEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One change.

    ``kind`` is ``status`` (``status`` and ``previous`` differ), ``tools``, ``prompts`` or
    ``resources`` (the server's lists changed; the counts are current), ``approval`` (``approval``
    was opened, confirmed, decided or expired; values under secret-looking argument keys are
    redacted), ``pin`` (``pin`` was first seen, quarantined,
    reverted or approved; ``change`` says which, ``diff`` shows a changed definition) or
    ``audit`` (``record`` was written). ``server`` and ``status`` always describe the server.
    """

    server: str
    kind: EventKind
    status: str
    previous: str | None = None
    error: str | None = None
    restart_count: int = 0
    tool_count: int = 0
    prompt_count: int = 0
    resource_count: int = 0
    approval: Approval | None = None
    pin: Pin | None = None
    change: str | None = None
    diff: str | None = None
    record: AuditRecord | None = None


class EventHub:
    """The listeners of one host."""

    def __init__(self) -> None:
        self.listeners: list[HostEvents] = []
        self.closed = False
        #: kind -> whether a listener takes it, for the listeners there are now
        self._wanted: dict[str, bool] = {}

    def add(self, listener: HostEvents) -> None:
        self.listeners.append(listener)
        self._wanted.clear()

    def discard(self, listener: HostEvents) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)
            self._wanted.clear()

    def wants(self, kind: EventKind) -> bool:
        """Whether a listener would take an event of ``kind`` (else there is no need to build it)."""
        wanted = self._wanted.get(kind)
        if wanted is None:
            wanted = self._wanted[kind] = any(
                listener.kinds is None or kind in listener.kinds for listener in self.listeners
            )
        return wanted

    def emit(self, event: HostEvent) -> None:
        for listener in list(self.listeners):
            if listener.kinds is None or event.kind in listener.kinds:
                listener._offer(event)

    def close(self) -> None:
        self.closed = True
        for listener in list(self.listeners):
            listener.close()


class HostEvents:
    """Events of a host from the moment this object is created, until the host closes.

    Iterate it (``async for event in host.events()``) or use it as an async context manager to
    stop listening early. The buffer is bounded; when it is full, new events are dropped and
    counted in ``dropped``. ``kinds`` (None: every kind) are the kinds of event it receives:
    others are not buffered, do not wake the listener and, when no listener wants them, are not
    even built (an audit record per call, say).
    """

    def __init__(self, hub: EventHub, buffer: int, kinds: Iterable[EventKind] | None = None) -> None:
        self._hub = hub
        self.kinds: frozenset[str] | None = None if kinds is None else frozenset(kinds)
        self._send, self._recv = trio.open_memory_channel[HostEvent](buffer)
        self.dropped = 0
        if hub.closed:
            self._send.close()  # nothing more will happen
        else:
            hub.add(self)

    def _offer(self, event: HostEvent) -> None:
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.dropped += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def close(self) -> None:
        """Stops listening; iteration ends after the buffered events."""
        self._hub.discard(self)
        self._send.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> HostEvent:
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        self._recv.close()
