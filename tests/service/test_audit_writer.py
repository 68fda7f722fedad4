"""The audit writer's group commit: a barrier returns only once its record is committed, calls
finishing together share a transaction, and a failing store holds answers back (bounded) without
losing records."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from mcpwire.service.audit import AuditWriter
from mcpwire.service.events import EventHub
from mcpwire.service.store import AuditIn, Store, StoreError, open_store


def _record(i: int) -> AuditIn:
    return AuditIn(time=1000.0 + i, server="everything", tool="echo", outcome="ok", trace_id=f"t-{i}")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(f"sqlite:///{tmp_path / 'audit.db'}")
    yield opened
    await opened.aclose()


async def test_a_barrier_commits_what_is_queued_itself(store: Store) -> None:
    """No writer task runs: the barrier makes the commit, and the records are published once stored."""
    hub = EventHub()
    sub, _ = hub.subscribe()
    writer = AuditWriter(store, hub)
    writer.add(_record(1))
    writer.add(_record(2))
    with trio.fail_after(10):
        assert await writer.barrier() is True
    assert writer.pending == 0 and writer.committed == 2 and writer.batches == 1
    stored = (await store.audit()).items
    assert [r.trace_id for r in stored] == ["t-2", "t-1"]
    published = [await sub.receive(1) for _ in range(2)]
    assert all(e is not None and e.kind == "audit" for e in published)
    assert [e.data["trace_id"] for e in published if e] == ["t-1", "t-2"]
    assert [e.data["id"] for e in published if e] == sorted(r.id for r in stored)
    # an event's data is the stored row as the API lists it (the same fields, in the same order)
    rows = sorted(stored, key=lambda r: r.id)
    expected = [list(msgspec.to_builtins(r).items()) for r in rows]
    assert [list((e.data if e else {}).items()) for e in published] == expected


async def test_calls_finishing_together_share_commits_and_wait_for_their_own(store: Store) -> None:
    writer = AuditWriter(store)
    seen_at_return: dict[int, bool] = {}

    async def call(i: int) -> None:
        await trio.sleep(0.001 * (i % 5))
        writer.add(_record(i))
        assert await writer.barrier() is True
        found = (await store.audit(trace_id=f"t-{i}")).items
        seen_at_return[i] = len(found) == 1

    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        with trio.fail_after(30):
            async with trio.open_nursery() as calls:
                for i in range(200):
                    calls.start_soon(call, i)
        nursery.cancel_scope.cancel()
    assert seen_at_return == {i: True for i in range(200)}
    assert writer.committed == 200
    assert writer.batches < 200  # grouped: fewer transactions than records


async def test_calls_that_reach_their_barrier_in_the_step_that_queued_share_a_commit_when_others_run(
    store: Store,
) -> None:
    """A call served in its HTTP request's task queues its record and reaches its barrier in one
    step: told that other calls are under way, the barrier yields once first, and the calls that
    finish in the same pass of the scheduler share one commit; alone, each commits its own."""
    writer = AuditWriter(store, linger=60.0)

    async def wave(others: bool) -> int:
        go = trio.Event()
        before = writer.batches

        async def call(i: int) -> None:
            await go.wait()
            writer.add(_record(i))
            assert await writer.barrier(others) is True

        async with trio.open_nursery() as calls:
            for i in range(32):
                calls.start_soon(call, i)
            await trio.testing.wait_all_tasks_blocked()
            go.set()  # every call runs in the next pass
        return writer.batches - before

    with trio.fail_after(20):
        assert await wave(others=False) == 32
        assert await wave(others=True) == 1
    assert writer.committed == 64


class _Failing:
    """A store whose appends fail until it is told to work."""

    location = "sqlite:///failing.db"

    def __init__(self, real: Store) -> None:
        self.real = real
        self.working = False
        self.failures = 0

    async def append_audit(self, records: Sequence[AuditIn]) -> list[int]:
        if not self.working:
            self.failures += 1
            raise StoreError("the database sqlite:///failing.db failed: disk I/O error")
        return await self.real.append_audit(records)

    def append_audit_now(self, records: Sequence[AuditIn]) -> list[int] | None:
        if not self.working:
            self.failures += 1
            raise StoreError("the database sqlite:///failing.db failed: disk I/O error")
        return self.real.append_audit_now(records)


async def test_a_failing_store_holds_answers_back_for_a_bounded_time_and_loses_nothing(store: Store) -> None:
    failing = _Failing(store)
    writer = AuditWriter(failing, timeout=0.5)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        writer.add(_record(1))
        with trio.fail_after(10):
            assert await writer.barrier() is False  # not committed within its bound
        assert writer.pending == 1 and failing.failures >= 1
        failing.working = True
        with trio.fail_after(10):
            while not await writer.barrier():  # the writer's next retry commits it
                pass
            assert writer.pending == 0
            writer.add(_record(2))
            assert await writer.barrier() is True
        nursery.cancel_scope.cancel()
    assert sorted(r.trace_id or "" for r in (await store.audit()).items) == ["t-1", "t-2"]


async def test_the_writer_commits_what_no_barrier_asks_for_and_publishes_within_its_linger(store: Store) -> None:
    """A record nobody waits for (a library host's) is committed by the writer task at its
    deadline; a record a barrier committed is published by the writer after the barrier returned,
    so its event never delays an answer."""
    hub = EventHub()
    sub, _ = hub.subscribe()
    writer = AuditWriter(store, hub, linger=0.5)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        writer.add(_record(1))
        assert writer.pending == 1  # not committed at once: nothing woke the writer
        first = await sub.receive(10)  # published once the writer committed it
        assert first is not None and first.data["trace_id"] == "t-1"
        assert writer.pending == 0

        writer.add(_record(2))
        with trio.fail_after(10):
            assert await writer.barrier() is True
        assert writer.committed == 2
        assert await sub.receive(0.05) is None  # published by the writer, not before the answer
        with trio.fail_after(10):
            second = await sub.receive(5)
        assert second is not None and second.data["trace_id"] == "t-2"
        nursery.cancel_scope.cancel()
    assert [r.trace_id for r in (await store.audit()).items] == ["t-2", "t-1"]


async def test_while_records_keep_coming_the_writer_looks_of_its_own_accord(store: Store) -> None:
    """A parked writer is armed by the next record (a deadline); once it has woken, records that
    keep coming arm nothing (the writer looks again every ``linger`` seconds anyway) and are
    still published within about ``linger``; after an interval with none it parks again."""
    hub = EventHub()
    sub, _ = hub.subscribe()
    linger = 0.2
    writer = AuditWriter(store, hub, linger=linger)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        await trio.sleep(0.05)
        assert writer._park is not None and writer._park.deadline == float("inf")  # parked, unarmed
        writer.add(_record(1))
        assert writer._park.deadline < float("inf")  # armed by the record
        with trio.fail_after(10):
            assert (await sub.receive(10)) is not None
        for i in range(2, 6):  # records keep coming: each one arms nothing
            writer.add(_record(i))
            assert writer._park is None
            assert await writer.barrier() is True
            started = trio.current_time()
            event = await sub.receive(10)
            assert event is not None and event.data["trace_id"] == f"t-{i}"
            assert trio.current_time() - started < 2 * linger + 5  # (a loaded machine's slack)
        await trio.sleep(6 * linger)  # an interval with none (two looks at most): parked again
        assert writer._park is not None and writer._park.deadline == float("inf")
        writer.add(_record(6))
        assert writer._park.deadline < float("inf")
        with trio.fail_after(10):
            event = await sub.receive(10)
        assert event is not None and event.data["trace_id"] == "t-6"
        nursery.cancel_scope.cancel()
    assert len((await store.audit()).items) == 6


async def test_calls_finishing_during_a_commit_commit_next_without_waiting_for_the_writer(store: Store) -> None:
    """Records queued while a commit runs are committed by the first of their barriers to run
    after it, not at the writer's deadline (here far off): 64 calls in flight never stall."""
    writer = AuditWriter(store, linger=60.0)

    async def call(i: int) -> None:
        writer.add(_record(i))
        assert await writer.barrier() is True

    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        with trio.fail_after(20):
            for wave in range(5):
                async with trio.open_nursery() as calls:
                    for i in range(64):
                        calls.start_soon(call, wave * 64 + i)
        nursery.cancel_scope.cancel()
    assert writer.committed == 320
    assert 5 <= writer.batches < 320


class _Counting:
    """The store, counting the commits made on the caller's thread and on a worker thread; with
    ``now=False`` it never commits on the caller's thread (as a server database does not)."""

    def __init__(self, real: Store, *, now: bool = True) -> None:
        self.real = real
        self.location = real.location
        self.now = now
        self.on_thread = 0
        self.awaited = 0

    async def append_audit(self, records: Sequence[AuditIn]) -> list[int]:
        self.awaited += 1
        return await self.real.append_audit(records)

    def append_audit_now(self, records: Sequence[AuditIn]) -> list[int] | None:
        if not self.now:
            return None
        ids = self.real.append_audit_now(records)
        self.on_thread += ids is not None
        return ids


async def test_a_barrier_commits_on_its_own_thread_when_the_store_can(store: Store) -> None:
    """A local SQLite file whose lock is free takes the commit on the barrier's own thread; a store
    that cannot commit without waiting (``append_audit_now`` says None) is awaited instead. Either
    way the records are stored, in order."""
    counting = _Counting(store)
    writer = AuditWriter(counting)  # type: ignore[arg-type]
    with trio.fail_after(10):
        for i in range(3):
            writer.add(_record(i))
            assert await writer.barrier() is True
    assert (counting.on_thread, counting.awaited) == (3, 0)
    counting.now = False
    with trio.fail_after(10):
        writer.add(_record(3))
        assert await writer.barrier() is True
    assert (counting.on_thread, counting.awaited) == (3, 1)
    assert writer.committed == 4 and writer.pending == 0
    stored = sorted((await store.audit()).items, key=lambda r: r.id)
    assert [r.trace_id for r in stored] == ["t-0", "t-1", "t-2", "t-3"]


async def test_sqlite_commits_on_the_callers_thread_only_when_it_needs_no_wait(tmp_path: Path) -> None:
    """``append_audit_now`` on SQLite: done at once while the write lock is free; None (nothing
    appended) while another connection holds the lock, and once a checkpoint is due (a worker
    thread's commit makes it)."""
    import sqlite3

    from mcpwire.service.store import base
    from mcpwire.service.store import sqlite as sqlite_store

    path = tmp_path / "audit.db"
    opened = await open_store(f"sqlite:///{path}")
    try:
        assert opened.append_audit_now([_record(1)]) is not None
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            assert opened.append_audit_now([_record(2)]) is None
        finally:
            other.execute("ROLLBACK")
            other.close()
        driver = opened._driver
        assert isinstance(driver, sqlite_store.SqliteDriver)
        driver._since_checkpoint = sqlite_store.CHECKPOINT_EVERY
        assert opened.append_audit_now([_record(3)]) is None
        assert await opened.append_audit([_record(4)])  # (the worker thread checkpoints)
        assert opened.append_audit_now([_record(5)]) is not None
        assert sorted(r.trace_id or "" for r in (await opened.audit()).items) == ["t-1", "t-4", "t-5"]
        # one statement at once: consecutive ids, in order; more rows than one statement takes wait
        ids = opened.append_audit_now([_record(n) for n in range(6, 9)])
        assert ids is not None and ids == list(range(ids[0], ids[0] + 3))
        page = await opened.audit(limit=3)
        assert [(r.id, r.trace_id) for r in page.items] == [(ids[2], "t-8"), (ids[1], "t-7"), (ids[0], "t-6")]
        many = [_record(n) for n in range(10, 10 + base.rows_per_insert(base.AUDIT_COLUMNS) + 1)]
        assert opened.append_audit_now(many) is None
        assert (await opened.audit(limit=1)).items[0].id == ids[2]  # (nothing of them was written)
    finally:
        await opened.aclose()
