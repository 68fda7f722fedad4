"""Audit records into the store by group commit, and a barrier that makes acknowledgements honest.

Theory of operation: the host writes a record synchronously (:meth:`AuditWriter.add`, a list
append). Everything queued is appended in one transaction, and the stored records are then
published as ``audit`` events. :meth:`AuditWriter.barrier` waits until every record queued before
it was called is committed; the middleware awaits it before a response starts (and before each
later chunk of a streamed one), so a caller never sees an answer whose audit record could still be
lost. When nothing is queued the barrier costs two integer compares. A barrier that finds records
queued and no commit under way makes the commit itself (of everything queued, its own record
among them) instead of handing it to the writer task and waiting for it: on its own thread when
the store can commit without waiting (a local SQLite file whose lock is free), which needs no
bound on its time; calls that finish while a
commit runs wait for it to end, and the first of them to run then commits for them all. When other
calls are under way it first yields once, so that those finishing in the same pass of the
scheduler queue their records and share its commit.

The writer task is not woken per record: a record arms its deadline (``linger`` seconds after the
first record it has not seen), so a call whose barrier commits its record costs no task switch.
At the deadline the writer commits what no barrier asked for (records of callers that do not wait
for durability, such as a library host's), and publishes what barriers committed: events leave
at most ``linger`` after their commit, and never delay an answer. While records keep coming, the
writer looks again every ``linger`` seconds of its own accord, and records arm nothing; after a
look that finds none came, it parks until the next record arms it. It retries with backoff when
the store fails.

When the store fails, the batch stays queued and is retried with backoff; barriers wait at most
``timeout`` seconds and then report failure (the response becomes a 503). The queue is bounded:
past ``max_queued`` records new ones are dropped and counted, and logged once per burst.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Final

import msgspec
import trio

from .events import EventHub
from .store import AuditIn, AuditRow, Store, StoreError

__all__ = ["BARRIER_TIMEOUT", "LINGER", "AuditWriter"]

log = logging.getLogger("mcpwire.service.audit")

BARRIER_TIMEOUT: Final = 10.0
MAX_BATCH: Final = 1000
MAX_QUEUED: Final = 100_000
#: seconds a record (or a committed record's event) waits at most for the writer task
LINGER: Final = 0.02


class AuditWriter:
    """Queues audit records and commits them in batches (see the module's theory of operation)."""

    def __init__(
        self,
        store: Store,
        hub: EventHub | None = None,
        *,
        timeout: float = BARRIER_TIMEOUT,
        max_queued: int = MAX_QUEUED,
        linger: float = LINGER,
        on_stored: Callable[[AuditRow], None] | None = None,
    ) -> None:
        self._store = store
        self.hub = hub
        self.location = store.location
        self._timeout = timeout
        self._max_queued = max_queued
        self._on_stored = on_stored
        self._linger = linger
        self._queue: list[AuditIn] = []
        self._queued = 0  # records ever accepted
        self._committed = 0  # records ever committed (a prefix of the accepted ones)
        #: committed records not yet published, with their ids
        self._unpublished: list[tuple[int, AuditIn]] = []
        #: the writer task's wait, whose deadline a record arms (None unless it is parked)
        self._park: trio.CancelScope | None = None
        #: a writer task runs
        self._writing = False
        self._progress = trio.Event()
        self._failing = False
        self._committing = False
        self.dropped = 0
        self.batches = 0
        self.failures = 0

    @property
    def committed(self) -> int:
        """Records committed since the start."""
        return self._committed

    @property
    def pending(self) -> int:
        return self._queued - self._committed

    def add(self, record: AuditIn) -> None:
        """Queues one record (synchronous; never blocks)."""
        if len(self._queue) >= self._max_queued:
            if self.dropped == 0 or self.dropped % 1000 == 0:
                log.error("audit queue full (%d records): the store is not keeping up; dropping", len(self._queue))
            self.dropped += 1
            return
        self._queue.append(record)
        self._queued += 1
        self._arm()

    def _arm(self) -> None:
        """Makes the writer task look within ``linger`` seconds (a deadline, not a wake-up)."""
        park = self._park
        if park is not None and park.deadline == math.inf:
            park.deadline = trio.current_time() + self._linger

    async def barrier(self, others: bool = False) -> bool:
        """Waits until every record queued so far is committed; False after ``timeout`` seconds.

        ``others``: other calls are under way, and some may finish in the same pass of the
        scheduler; a barrier that would commit yields once first, so that their records are
        queued too and one commit takes them all (a call that runs in the task of its HTTP
        request reaches its barrier in the step that queued its record).

        Cancellation: returns to the caller's cancel scope at once (nothing is undone).
        """
        target = self._queued
        if self._committed >= target:
            return True
        if others and not self._committing:
            await trio.lowlevel.cancel_shielded_checkpoint()
            if self._committed >= target:
                return True
        if not self._committing and not self._failing and self._commit_now():
            return True  # (committed on this thread: no wait, so nothing to bound)
        with trio.move_on_after(self._timeout):
            while self._committed < target:
                if self._committing or self._failing:
                    await self._progress.wait()  # a commit under way, or the writer's retry
                else:
                    await self._commit_batch()
        return self._committed >= target

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Commits and publishes until cancelled; on cancellation, one last bounded flush runs."""
        task_status.started()
        delay = 0.05
        self._writing = True
        seen = self._queued
        try:
            while True:
                if self._queued != seen:  # records came since the last look: look again, unarmed
                    seen = self._queued
                    await trio.sleep(self._linger)
                else:
                    with trio.CancelScope() as self._park:
                        if not self._queue and not self._unpublished:
                            await trio.sleep_forever()  # until a record arms the deadline
                    self._park = None
                self._publish()
                if not self._queue:
                    continue
                if await self._commit_batch():
                    delay = 0.05
                    self._publish()
                else:
                    await trio.sleep(delay)
                    delay = min(delay * 2, 2.0)
        finally:
            self._park = None
            self._writing = False
            with trio.CancelScope(shield=True), trio.move_on_after(self._timeout):
                while self._queue and await self._commit_batch():
                    pass
            self._publish()

    async def flush(self) -> bool:
        """Commits what is queued now (for shutdown and tests); False when the store failed."""
        while self._queue:
            if not await self._commit_batch():
                return False
        self._publish()
        return True

    def _commit_now(self) -> bool:
        """Commits every queued record on this thread when the store can do so without waiting
        (see :meth:`Store.append_audit_now`); whether it did. Nobody waits on a commit made here
        (it has no checkpoint), so there is no one to wake."""
        committed = 0
        while self._queue:
            batch = self._queue[:MAX_BATCH]
            try:
                ids = self._store.append_audit_now(batch)
            except StoreError as exc:
                self._failed(batch, exc)
                return False
            if ids is None:
                return False
            self._stored(batch, ids)
            committed += 1
        return committed > 0

    async def _commit_batch(self) -> bool:
        """Commits the oldest queued records (one commit at a time: a second caller waits for
        the first to end); False when the store failed."""
        while self._committing:
            await self._progress.wait()
        batch = self._queue[:MAX_BATCH]
        if not batch:
            return True
        self._committing = True
        try:
            ids = await self._store.append_audit(batch)
        except StoreError as exc:
            self._failed(batch, exc)
            return False
        finally:
            # (whoever waits runs after this task's next checkpoint: the counts below are set by then)
            self._committing = False
            progress, self._progress = self._progress, trio.Event()
            progress.set()
        self._stored(batch, ids)
        return True

    def _failed(self, batch: list[AuditIn], exc: StoreError) -> None:
        self.failures += 1
        if not self._failing:
            log.error("cannot store %d audit records (will retry): %s", len(batch), exc)
        self._failing = True

    def _stored(self, batch: list[AuditIn], ids: list[int]) -> None:
        """Accounts for ``batch``, just committed with ``ids``."""
        if self._failing:
            log.warning("audit records are stored again")
            self._failing = False
        del self._queue[: len(batch)]
        self._committed += len(batch)
        self.batches += 1
        self._unpublished.extend(zip(ids, batch, strict=True))
        if not self._writing:
            self._publish()  # no writer task to leave it to
        else:
            self._arm()

    def _publish(self) -> None:
        """Publishes the records committed so far (as events and to ``on_stored``)."""
        done, self._unpublished = self._unpublished, []
        for record_id, record in done:
            if self.hub is not None:
                # (an AuditRow's fields are the id, then the record's: the same mapping, built once)
                self.hub.publish("audit", {"id": record_id, **msgspec.to_builtins(record)})
            if self._on_stored is not None:
                self._on_stored(AuditRow(id=record_id, **msgspec.structs.asdict(record)))
