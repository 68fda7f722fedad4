"""A list that keeps the beginning and the end of what was appended, and counts the rest.

Theory of operation: everything the harness records comes from the server under test, which may
send without end (a flood of notifications, an endless SSE stream). A :class:`BoundedLog` keeps
the first ``head`` items and the last ``tail`` items (each part also bounded in bytes, as measured
by ``size``) and counts what it let go. Positions stay *logical*: ``len()`` is the number of items
ever appended, and ``log[start:]`` returns the kept items appended at position ``start`` or later,
so ``start = len(log); ...; log[start:]`` means "what arrived since", as with a list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, overload

__all__ = ["BoundedLog"]

T = TypeVar("T")


def _one(_: object) -> int:
    return 1


class BoundedLog(Sequence[T]):
    """The first ``head`` and last ``tail`` items appended (and at most ``max_bytes`` of each part)."""

    __slots__ = (
        "_head",
        "_head_bytes",
        "_head_limit",
        "_max_bytes",
        "_size",
        "_tail",
        "_tail_bytes",
        "_tail_limit",
        "appended",
    )

    def __init__(
        self, *, head: int = 1000, tail: int = 1000, max_bytes: int | None = None, size: Callable[[T], int] = _one
    ) -> None:
        if head < 0 or tail < 0:
            raise ValueError(f"head and tail must not be negative, not {head} and {tail}")
        self._head: list[T] = []
        self._tail: deque[tuple[int, T, int]] = deque()
        self._tail_limit = tail
        self._head_limit = head
        #: bytes each part (head, tail) may hold
        self._max_bytes = None if max_bytes is None else max_bytes // 2
        self._size = size
        self._head_bytes = 0
        self._tail_bytes = 0
        #: how many items were ever appended (the logical length)
        self.appended = 0

    def append(self, item: T) -> None:
        position = self.appended
        self.appended += 1
        half = self._max_bytes
        cost = self._size(item) if half is not None else 1
        if len(self._head) == position and position < self._head_limit:
            if half is None:
                self._head.append(item)
                return
            if self._head_bytes + cost <= half:
                self._head.append(item)
                self._head_bytes += cost
                return
        if self._tail_limit == 0:
            return
        self._tail.append((position, item, cost))
        self._tail_bytes += cost
        while len(self._tail) > self._tail_limit or (half is not None and self._tail_bytes > half and self._tail):
            _, _, dropped_cost = self._tail.popleft()
            self._tail_bytes -= dropped_cost

    @property
    def dropped(self) -> int:
        """How many appended items are no longer kept."""
        return self.appended - len(self._head) - len(self._tail)

    def clear(self) -> None:
        self._head.clear()
        self._tail.clear()
        self._head_bytes = self._tail_bytes = 0
        self.appended = 0

    def _kept(self) -> Iterator[tuple[int, T]]:
        yield from enumerate(self._head)
        for position, item, _ in self._tail:
            yield position, item

    def __len__(self) -> int:
        return self.appended

    def __bool__(self) -> bool:
        return self.appended > 0

    def __iter__(self) -> Iterator[T]:
        for _, item in self._kept():
            yield item

    def __reversed__(self) -> Iterator[T]:
        for _, item, _ in reversed(self._tail):
            yield item
        yield from reversed(self._head)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.appended)
            if step != 1:
                raise ValueError("a BoundedLog slice takes no step")
            return [item for position, item in self._kept() if start <= position < stop]
        position = index + self.appended if index < 0 else index
        for at, item in self._kept():
            if at == position:
                return item
        if 0 <= position < self.appended:
            raise IndexError(f"item {index} is no longer kept ({self.dropped} of {self.appended} dropped)")
        raise IndexError("BoundedLog index out of range")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BoundedLog | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BoundedLog({self.appended} appended, {self.dropped} dropped)"
