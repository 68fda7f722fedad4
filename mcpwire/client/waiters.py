"""What a caller waits on: one wake-up per request, and one task that watches every deadline.

Theory of operation: a request's caller sleeps on its :class:`Waiter` until the answer, a
progress update or its deadline arrives. The waiter is a one-task event (a call has exactly one
waiter, its caller), and all of a client's deadlines live in one heap watched by one task
(:class:`Deadlines`), so a call costs one small object and one heap push rather than a cancel
scope of its own.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from ..errors import RequestTimeout
from ..protocol.jsonrpc import ErrorResponse, Response
from ..protocol.pending import PendingRequest
from ..protocol.types import JSONObject

__all__ = ["COMPACT_DEADLINES_AT", "Deadlines", "ProgressSink", "Wake", "Waiter", "wait_for_answer"]

#: delivers the progress updates that arrived while a call waited (``None``: none wanted)
ProgressSink = Callable[[list[JSONObject]], Awaitable[None]] | None

#: heap entries of finished calls are dropped once the heap is this large (and 4x the live ones)
COMPACT_DEADLINES_AT: Final = 1024


class Wake:
    """A one-waiter event: what a request's caller sleeps on until its answer (or progress, or
    its deadline) arrives.

    ``trio.Event`` serves any number of waiters through a parking lot; a call has exactly one
    waiter, its caller, so this keeps just that task and reschedules it directly: one small
    object per call and no parking-lot bookkeeping, on the path every call takes. ``clear()``
    re-arms it for the next wait (after progress).
    """

    __slots__ = ("_flag", "_task")

    def __init__(self) -> None:
        self._flag = False
        self._task: trio.lowlevel.Task | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            task = self._task
            if task is not None:
                self._task = None
                trio.lowlevel.reschedule(task)

    def clear(self) -> None:
        self._flag = False

    async def wait(self) -> None:
        """Returns once set. Cancellation: a checkpoint; raises ``Cancelled`` as trio does."""
        if self._flag:
            await trio.lowlevel.checkpoint()
            return
        if self._task is not None:  # pragma: no cover - one waiter by construction
            raise RuntimeError("a call's wake-up has a single waiter")
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


class Waiter(Wake):
    """What one request's caller waits on, and its wake-up (a plain slotted class: one is made
    per call)."""

    __slots__ = ("channel", "deadline", "done", "expired", "outcome", "progress", "typed_tool")

    def __init__(
        self,
        *,
        progress: list[JSONObject] | None = None,
        channel: trio.MemorySendChannel[Waiter] | None = None,
    ) -> None:
        self._flag = False
        self._task = None
        self.outcome: Response | ErrorResponse | BaseException | None = None
        self.progress = progress  # None: progress not wanted
        self.channel = channel  # handshake waiters report here
        self.deadline = math.inf  # when the caller gives up (reset on progress)
        self.expired = False  # set by the deadline watcher
        self.done = False  # the caller stopped waiting (answered, timed out or cancelled)
        self.typed_tool = False  # call_tool's own: its answer may come as a ToolCallResponse


class Deadlines:
    """Every request timeout of one client, watched by a single task.

    A cancel scope per call would cost each call a registration in trio's deadline table and a
    cancel-status node; here a call costs one heap push. The watcher sleeps in one cancel scope
    whose deadline is the earliest pending one; at it, it marks each due waiter ``expired`` and
    sets its event. Entries of calls that finished stay in the heap until compacted (when the
    heap holds far more entries than live waiters), so memory stays bounded by the calls in flight.
    """

    __slots__ = ("_armed", "_heap", "_next_compaction", "_scope", "_seq", "_started", "_stop")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Waiter]] = []
        self._next_compaction = COMPACT_DEADLINES_AT
        self._seq = 0
        self._scope: trio.CancelScope | None = None
        self._armed = math.inf  # the scope's deadline, kept here: reading the property costs a call
        self._started = False
        self._stop = trio.CancelScope()

    def add(self, waiter: Waiter, deadline: float, nursery: trio.Nursery) -> None:
        waiter.deadline = deadline
        heap = self._heap
        self._seq += 1
        heapq.heappush(heap, (deadline, self._seq, waiter))
        if len(heap) > self._next_compaction:
            self._compact()  # amortised O(1): the next one waits until the heap grows 4x again
            self._next_compaction = max(COMPACT_DEADLINES_AT, 4 * len(heap))
        if not self._started:
            self._started = True
            nursery.start_soon(self._watch)
        elif self._scope is not None and deadline < self._armed:
            self._scope.deadline = self._armed = deadline

    def __len__(self) -> int:
        """Entries in the heap (finished calls' included until compacted)."""
        return len(self._heap)

    def waiters(self) -> list[Waiter]:
        """The waiters the heap holds (finished calls' included until compacted)."""
        return [entry[2] for entry in self._heap]

    def close(self) -> None:
        self._stop.cancel()

    def _compact(self) -> None:
        self._heap[:] = [e for e in self._heap if not e[2].done and e[2].deadline == e[0]]
        heapq.heapify(self._heap)

    async def _watch(self) -> None:
        heap = self._heap
        with self._stop:
            while True:
                self._armed = heap[0][0] if heap else math.inf
                with trio.CancelScope(deadline=self._armed) as scope:
                    self._scope = scope
                    await trio.sleep_forever()
                self._scope = None
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    deadline, _, waiter = heapq.heappop(heap)
                    if not waiter.done and waiter.outcome is None and waiter.deadline == deadline:
                        waiter.expired = True
                        waiter.set()


async def wait_for_answer(
    entry: PendingRequest[Waiter],
    *,
    limit: float,
    hard_limit: float,
    hard_deadline: float | None = None,
    deadlines: Deadlines,
    nursery: trio.Nursery,
    clock: trio.abc.Clock,
    progress: ProgressSink,
    server: str,
) -> Response | ErrorResponse | BaseException:
    """Waits for the answer to ``entry``: its outcome (an answer, or why none will come).

    The deadline is ``limit`` seconds away and each progress update moves it ``limit`` seconds
    on (LC-62), never past ``hard_limit`` (or ``limit``, if larger) from the start, nor past
    ``hard_deadline`` (on the clock) when given.

    Raises:
        RequestTimeout: no answer in time (the caller cancels the request on the wire).

    Cancellation: raises ``Cancelled`` as trio does; the waiter is released either way.
    """
    waiter = entry.waiter
    now = clock.current_time()
    hard = now + max(hard_limit, limit)  # so the first deadline, now + limit, is within it
    if hard_deadline is not None and hard_deadline < hard:
        hard = hard_deadline
    deadlines.add(waiter, min(now + limit, hard), nursery)
    try:
        while True:
            if waiter._flag:
                await trio.lowlevel.checkpoint()
            else:  # waiter.wait(), inlined: this is every call's one wait
                waiter._task = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(waiter._abort)
            if waiter.outcome is not None:
                if waiter.progress and progress is not None:
                    # Progress that arrived before the answer, in the same wake-up: deliver it.
                    await progress(waiter.progress)
                return waiter.outcome
            if waiter.progress:
                items, waiter.progress = waiter.progress, []
                waiter.clear()
                waiter.expired = False
                # LC-62: reset, but capped
                deadlines.add(waiter, min(clock.current_time() + limit, hard), nursery)
                if progress is not None:
                    await progress(items)
                continue
            if waiter.expired:
                break
            waiter.clear()  # pragma: no cover - set with neither outcome nor progress
    finally:
        # The heap may keep this waiter until its deadline: drop what it holds (a large answer
        # must not outlive the call; the caller has it from the return value).
        waiter.done = True
        waiter.outcome = None
        waiter.progress = None
    capped = clock.current_time() >= hard
    raise RequestTimeout(
        f"'{entry.method}' (id {entry.id}) to server '{server}' got no answer within "
        + (f"the hard cap of {hard - now:g}s" if capped else f"{limit:g}s")
        + "; it was cancelled",
        method=entry.method,
        request_id=entry.id,
        server=server,
        timeout=limit,
    )
