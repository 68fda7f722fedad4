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

With a journal (``journal=True``, on a store that keeps one: a SQLite file committed with
``synchronous=NORMAL``; see :mod:`mcpwire.service.store.journal`), a barrier's commit is an append
to this process's journal instead: one ``write``, as durable when the process dies as the
transaction it replaces, and about a tenth of its cost. The writer task then moves what was
journaled into the database in one transaction per look (ids are assigned, and events published,
then), and a reader of the audit in this process first has it moved (:meth:`AuditWriter.flush`).
Barriers then never wait for the database, even while it fails: the journal holds the records
until it is back. The journal is open while the writer task runs; at its end, what is left is
moved and the journal deleted. A journal its process left behind is moved by the next process
to open the store, or within ``ADOPT_INTERVAL`` seconds by another one running on it.

When the store fails, the batch stays queued and is retried with backoff; barriers wait at most
``timeout`` seconds and then report failure (the response becomes a 503). The queue is bounded:
past ``max_queued`` records (queued or journaled) new ones are dropped and counted, and logged
once per burst.
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
from .store.base import audit_rows

__all__ = ["BARRIER_TIMEOUT", "LINGER", "AuditWriter"]

log = logging.getLogger("mcpwire.service.audit")

BARRIER_TIMEOUT: Final = 10.0
MAX_BATCH: Final = 1000
MAX_QUEUED: Final = 100_000
#: seconds a record (or a committed record's event) waits at most for the writer task
LINGER: Final = 0.02
#: seconds between looks for the audit journals of processes that are gone
ADOPT_INTERVAL: Final = 5.0


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
        journal: bool = False,
    ) -> None:
        self._store = store
        #: journal records while the writer task runs, where the store allows
        self._journal = journal
        #: records are journaled now (the journal is open and the writer task moves them)
        self._journaling = False
        #: journaled records not yet in the database (durable, and counted as committed), and the
        #: journal's size after the last of them
        self._journaled: list[AuditIn] = []
        #: their rows, as journaled and to be moved
        self._journaled_rows: list[tuple[object, ...]] = []
        self._journal_end = 0
        #: queued records being committed to the database directly (the first ones queued)
        self._inflight = 0
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
    def journaled(self) -> int:
        """Records durable in the journal, not yet in the database."""
        return len(self._journaled)

    @property
    def pending(self) -> int:
        return self._queued - self._committed

    def add(self, record: AuditIn) -> None:
        """Queues one record (synchronous; never blocks)."""
        if len(self._queue) + len(self._journaled) >= self._max_queued:
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
        if others and (self._journaling or not self._committing):
            await trio.lowlevel.cancel_shielded_checkpoint()
            if self._committed >= target:
                return True
        if self._journaling and self._journal_now() and self._committed >= target:
            return True  # (journaled on this thread, whatever the database is doing)
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
        self._journaling = self._journal and self._store.open_audit_journal()
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
                        if not self._queue and not self._journaled and not self._unpublished:
                            await trio.sleep_forever()  # until a record arms the deadline
                    self._park = None
                self._publish()
                if not self._queue and not self._journaled:
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
                while (self._queue or self._journaled) and await self._commit_batch():
                    pass
                if self._journal:
                    self._journaling = False
                    try:
                        await self._store.close_audit_journal(drained=not self._journaled)
                    except StoreError as exc:
                        log.error("cannot close the audit journal: %s", exc)
            self._publish()

    async def adopt_orphans(self, interval: float = ADOPT_INTERVAL) -> None:
        """Every ``interval`` seconds until cancelled, moves into the store what the audit
        journals of processes that are gone hold (see :meth:`Store.adopt_audit_journals`)."""
        if self._store.journal_folder is None:
            return
        while True:
            await trio.sleep(interval)
            try:
                await self._store.adopt_audit_journals()
            except StoreError as exc:
                log.warning("cannot move orphaned audit journals into the store (will retry): %s", exc)

    async def flush(self) -> bool:
        """Puts what is queued or journaled now into the store (for shutdown, tests, and a read of
        the audit that must see them); False when the store failed."""
        while self._queue or self._journaled:
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

    def _journal_now(self) -> bool:
        """Journals every queued record not being committed directly (one append); whether it
        did (when the journal fails, records are committed to the database again)."""
        batch = self._queue[self._inflight :]
        if not batch:
            return False
        rows = audit_rows(batch)
        end = self._store.journal_audit(rows)
        if end is None:
            self._journaling = False
            return False
        del self._queue[self._inflight :]
        self._journaled += batch
        self._journaled_rows += rows
        self._journal_end = end
        self._committed += len(batch)
        self._arm()
        return True

    async def _commit_batch(self) -> bool:
        """Puts the oldest records in the store (one commit at a time: a second caller waits for
        the first to end): what was journaled, all in one transaction, else queued records;
        False when the store failed."""
        while self._committing:
            await self._progress.wait()
        if self._journaling and self._queue:
            self._journal_now()
        journaled = bool(self._journaled)
        batch = self._journaled[:] if journaled else self._queue[:MAX_BATCH]
        if not batch:
            return True
        end = self._journal_end
        self._committing = True
        try:
            if journaled:
                ids = await self._store.append_journaled(self._journaled_rows[: len(batch)], end)
            else:
                self._inflight = len(batch)  # (not to be journaled meanwhile)
                ids = await self._store.append_audit(batch)
        except StoreError as exc:
            self._failed(batch, exc)
            return False
        finally:
            # (whoever waits runs after this task's next checkpoint: the counts below are set by then)
            self._inflight = 0
            self._committing = False
            progress, self._progress = self._progress, trio.Event()
            progress.set()
        self._stored(batch, ids, journaled=journaled)
        if journaled and not self._journaled:  # (all of it in the database: it may start anew)
            try:
                await self._store.renew_audit_journal()
            except StoreError as exc:
                log.warning("cannot delete a full audit journal (the next process on the store will): %s", exc)
        return True

    def _failed(self, batch: list[AuditIn], exc: StoreError) -> None:
        self.failures += 1
        if not self._failing:
            log.error("cannot store %d audit records (will retry): %s", len(batch), exc)
        self._failing = True

    def _stored(self, batch: list[AuditIn], ids: list[int], *, journaled: bool = False) -> None:
        """Accounts for ``batch``, just committed with ``ids`` (``journaled``: moved from the
        journal, where it was already counted as committed)."""
        if self._failing:
            log.warning("audit records are stored again")
            self._failing = False
        if journaled:
            del self._journaled[: len(batch)]
            del self._journaled_rows[: len(batch)]
        else:
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
                # (its fields hold plain values already: no conversion, no copy)
                self.hub.publish("audit", {"id": record_id, **msgspec.structs.asdict(record)})
            if self._on_stored is not None:
                self._on_stored(AuditRow(id=record_id, **msgspec.structs.asdict(record)))
