"""The table of requests awaiting an answer.

Theory of operation: ids come from one monotonically increasing integer counter per connection,
never reset, not even when a legacy session is re-initialised over the same process. That
satisfies both eras at once: 2025-11-25 basic "The request ID MUST NOT have been previously used
by the requestor within the same session" (JR-03) and 2026-07-28 "MUST NOT match the ID of any
other request the sender has issued and not yet received a response for" (JR-04, JR-05).

Each entry holds an opaque *waiter* supplied by the I/O layer (the table never awaits). An entry
leaves the table exactly once: :meth:`RequestTable.resolve` when its answer arrives,
:meth:`RequestTable.abandon` on timeout or cancellation, or :meth:`RequestTable.fail_all` when
the connection ends. An answer for an id that already left is *late* (after abandon) or
*unknown* (never ours); both are counted and returned as ``None``, never raised, because
2026-07-28 cancellation: "The client SHOULD ignore any response to the cancelled request that
arrives afterward" (JR-06, UT-C03). Ids are matched with their JSON type: ``1`` is not ``"1"``.
"""

from __future__ import annotations

from collections import deque
from typing import Final, Generic, TypeVar

from .jsonrpc import RequestId

__all__ = ["ABANDONED_MEMORY", "PendingRequest", "RequestTable"]

W = TypeVar("W")

#: how many abandoned ids a table remembers, to count a late answer as late rather than unknown
ABANDONED_MEMORY: Final = 4096


class PendingRequest(Generic[W]):
    """One request in flight."""

    __slots__ = ("id", "method", "waiter")

    def __init__(self, request_id: int, method: str, waiter: W) -> None:
        self.id = request_id
        self.method = method
        self.waiter = waiter

    def __repr__(self) -> str:
        return f"<PendingRequest {self.method} id={self.id}>"


class RequestTable(Generic[W]):
    """Allocates ids and resolves each waiter exactly once."""

    __slots__ = ("_abandoned", "_abandoned_order", "_next_id", "_pending", "late", "unknown")

    def __init__(self, first_id: int = 1) -> None:
        self._next_id = first_id
        self._pending: dict[RequestId, PendingRequest[W]] = {}
        self._abandoned: set[RequestId] = set()
        self._abandoned_order: deque[RequestId] = deque()
        #: answers that arrived after their request was abandoned.
        self.late = 0
        #: answers whose id was never allocated here.
        self.unknown = 0

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._pending

    @property
    def next_id(self) -> int:
        """The id the next :meth:`add` will use."""
        return self._next_id

    def add(self, method: str, waiter: W) -> PendingRequest[W]:
        """Allocates a fresh id for ``method`` and registers its waiter."""
        request_id = self._next_id
        self._next_id = request_id + 1
        entry = PendingRequest(request_id, method, waiter)
        self._pending[request_id] = entry
        return entry

    def get(self, request_id: RequestId) -> PendingRequest[W] | None:
        """The entry for ``request_id`` if still in flight, without removing it."""
        return self._pending.get(request_id)

    def resolve(self, request_id: RequestId | None) -> PendingRequest[W] | None:
        """Removes and returns the entry an answer belongs to; ``None`` if late or unknown."""
        entry = self._pending.pop(request_id, None) if request_id is not None else None
        if entry is None:
            if request_id in self._abandoned:
                self._abandoned.discard(request_id)
                self.late += 1
            else:
                self.unknown += 1
        return entry

    def abandon(self, request_id: RequestId) -> PendingRequest[W] | None:
        """Removes an entry whose answer is no longer wanted (timeout, cancellation)."""
        entry = self._pending.pop(request_id, None)
        if entry is not None:
            self._abandoned.add(request_id)
            self._abandoned_order.append(request_id)
            if len(self._abandoned_order) > ABANDONED_MEMORY:
                self._abandoned.discard(self._abandoned_order.popleft())
        return entry

    def fail_all(self) -> list[PendingRequest[W]]:
        """Removes and returns every entry (the connection ended)."""
        entries = list(self._pending.values())
        self._pending.clear()
        return entries
