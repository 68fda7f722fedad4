"""Audit journals: a barrier's record is durable once appended to the process's journal, the
writer moves journaled records into the database (each exactly once), and what a process that is
gone left journaled is moved by the next one on the store: at its start, or while it runs."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from mcpwire.service.audit import AuditWriter
from mcpwire.service.events import EventHub
from mcpwire.service.store import AuditIn, Store, StoreError, open_store
from mcpwire.service.store.journal import FORMAT_LINE, Journal, claim_orphans, journal_folder, read_batches

REPO = Path(__file__).resolve().parents[2]


def _record(i: int, server: str = "everything") -> AuditIn:
    return AuditIn(time=1000.0 + i, server=server, tool="echo", outcome="ok", trace_id=f"t-{i}", record={"n": i})


def _db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(_db(tmp_path))
    yield opened
    await opened.aclose()


async def _traces(store: Store) -> list[str | None]:
    return sorted(r.trace_id for r in (await store.audit(limit=500)).items)


def _journals(tmp_path: Path) -> list[Path]:
    folder = journal_folder(tmp_path / "audit.db")
    return sorted(folder.glob("*.jsonl")) if folder.exists() else []


# -- the file ---------------------------------------------------------------------------------------


def test_a_journal_reads_back_whole_batches_and_skips_what_is_cut_short_or_unreadable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal.create(tmp_path / "j")
    row = (1.5, "srv", "tool", "echo", None, "ok", "t", None, "127.0.0.1", '{"a":"line\\nbreak"}')
    first = journal.append([row, row])
    assert first == journal.size and journal.path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "j").stat().st_mode & 0o777 == 0o700
    second = journal.append([row])
    journal.close()
    with journal.path.open("ab") as f:
        f.write(b'[[1.0,"x","tool","echo",null,"ok",null,null,null,"{}"]]\n')  # a good batch
        f.write(b'[[1.0,"x","tool"]]\n')  # a row the table would not take
        f.write(b'[[2.0,"y","tool","echo",null,"ok",null,null,null,"{}"]')  # cut short: no end of line
    fd = os.open(journal.path, os.O_RDONLY)
    try:
        with caplog.at_level(logging.ERROR, "mcpwire.service.store"):
            rows, end = read_batches(fd, 0)
        assert [r[1] for r in rows] == ["srv", "srv", "srv", "x"]
        assert rows[0] == row  # (the record's text, its newline escaped, comes back as it went)
        assert "unreadable batch" in caplog.text
        assert end == journal.path.stat().st_size - len(b'[[2.0,"y","tool","echo",null,"ok",null,null,null,"{}"]')
        rest, again = read_batches(fd, first)  # from a batch's end: the batches after it
        assert [r[1] for r in rest] == ["srv", "x"] and again == end
        assert read_batches(fd, second)[0][0][1] == "x"
    finally:
        os.close(fd)
    other = tmp_path / "other.jsonl"
    other.write_bytes(b'{"format":"something-else"}\n')
    fd = os.open(other, os.O_RDONLY)
    try:
        with pytest.raises(ValueError, match="not an audit journal"):
            read_batches(fd, 0)
    finally:
        os.close(fd)
    assert FORMAT_LINE.endswith(b"\n")
    for made in (b"", FORMAT_LINE[:10]):  # its process died as it made it: an empty journal
        other.write_bytes(made)
        fd = os.open(other, os.O_RDONLY)
        try:
            assert read_batches(fd, 0) == ([], 0)
        finally:
            os.close(fd)


def test_only_a_journal_whose_owner_is_gone_can_be_claimed(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    mine = Journal.create(folder)
    theirs = Journal.create(folder)
    assert claim_orphans(folder, own=mine.name) == []  # both open: both owners are alive
    theirs.close()
    claimed = claim_orphans(folder, own=mine.name)
    try:
        assert [p.name for p, _ in claimed] == [theirs.name]
        assert claim_orphans(folder, own=mine.name) == []  # claimed once: the claim holds the lock
    finally:
        for _, fd in claimed:
            os.close(fd)
    mine.close()
    assert claim_orphans(tmp_path / "nowhere") == []


# -- the writer -------------------------------------------------------------------------------------


async def test_a_barrier_journals_and_the_writer_moves_records_into_the_store_exactly_once(
    tmp_path: Path, store: Store
) -> None:
    hub = EventHub()
    sub, _ = hub.subscribe()
    writer = AuditWriter(store, hub, journal=True, linger=0.05)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        (journal,) = _journals(tmp_path)
        for i in range(3):
            writer.add(_record(i))
        with trio.fail_after(10):
            assert await writer.barrier() is True
        # durable in the journal, and not in the database yet
        assert writer.committed == 3 and writer.pending == 0 and writer.journaled == 3
        assert await _traces(store) == []
        fd = os.open(journal, os.O_RDONLY)
        try:
            assert [r[6] for r in read_batches(fd, 0)[0]] == ["t-0", "t-1", "t-2"]
        finally:
            os.close(fd)
        with trio.fail_after(10):  # moved within the writer's linger, then published with their ids
            events = [await sub.receive(10) for _ in range(3)]
        assert [e.data["trace_id"] for e in events if e] == ["t-0", "t-1", "t-2"]
        stored = (await store.audit()).items
        assert sorted(r.id for r in stored) == [e.data["id"] for e in events if e] and writer.journaled == 0
        assert stored[0].record == {"n": 2}
        writer.add(_record(3))
        assert await writer.barrier() is True
        assert await writer.flush() is True  # (a reader's: the journaled record is in the store now)
        assert await _traces(store) == ["t-0", "t-1", "t-2", "t-3"]
        nursery.cancel_scope.cancel()
    assert _journals(tmp_path) == []  # all moved: deleted at the end
    assert await _traces(store) == ["t-0", "t-1", "t-2", "t-3"]


async def test_barriers_hold_while_the_database_fails_and_nothing_is_lost_or_doubled(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = AuditWriter(store, journal=True, linger=0.01)
    real = store.append_journaled
    failing = True

    async def flaky(rows: list[tuple[object, ...]], end: int) -> list[int]:
        if failing:
            raise StoreError("the database sqlite:///audit.db failed: disk I/O error")
        return await real(rows, end)

    monkeypatch.setattr(store, "append_journaled", flaky)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        with trio.fail_after(10):
            for i in range(5):
                writer.add(_record(i))
                assert await writer.barrier() is True  # durable in the journal: answered
            await trio.sleep(0.2)
        assert writer.failures >= 1 and await _traces(store) == []
        failing = False
        with trio.fail_after(10):
            while await _traces(store) != [f"t-{i}" for i in range(5)]:  # noqa: ASYNC110 - the store, read as a reader would
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert await _traces(store) == [f"t-{i}" for i in range(5)]


async def test_a_journal_that_cannot_be_written_gives_way_to_the_database(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    writer = AuditWriter(store, journal=True)

    def full(self: Journal, rows: object) -> int:
        raise OSError(28, "No space left on device")

    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        writer.add(_record(1))
        assert await writer.barrier() is True
        monkeypatch.setattr(Journal, "append", full)
        with caplog.at_level(logging.ERROR, "mcpwire.service.store"):
            writer.add(_record(2))
            assert await writer.barrier() is True
        assert "No space left on device" in caplog.text
        assert await writer.flush() is True  # (the first, journaled, moved; the second committed itself)
        assert await _traces(store) == ["t-1", "t-2"]
        nursery.cancel_scope.cancel()
    assert _journals(tmp_path) == []


# -- what a process that is gone left -----------------------------------------------------------------

_DIES = textwrap.dedent(
    """
    import os, sys, trio
    from mcpwire.service.store import AuditIn, open_store
    from mcpwire.service.audit import AuditWriter

    async def main():
        store = await open_store(sys.argv[1])
        writer = AuditWriter(store, journal=True, linger=3600)
        async with trio.open_nursery() as nursery:
            await nursery.start(writer.run)
            for i in range(int(sys.argv[2])):
                writer.add(AuditIn(time=1.0, server="s", tool="echo", outcome="ok", trace_id=f"early-{i}"))
                assert await writer.barrier()
            assert await writer.flush()  # these are in the database, and the journal says so
            for i in range(int(sys.argv[3])):
                writer.add(AuditIn(time=2.0, server="s", tool="echo", outcome="ok", trace_id=f"late-{i}"))
                assert await writer.barrier()  # journaled only
            print("acknowledged", flush=True)
            await trio.sleep_forever()

    trio.run(main)
    """
)


def _acknowledge_then_die(tmp_path: Path, moved: int, journaled: int) -> None:
    """A process that journals records, moves some into the database, and is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _DIES, _db(tmp_path), str(moved), str(journaled)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"acknowledged\n"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


async def test_the_next_process_on_the_store_moves_what_a_killed_one_journaled(tmp_path: Path) -> None:
    first = await open_store(_db(tmp_path))  # (the schema, before the process that dies)
    await first.aclose()
    _acknowledge_then_die(tmp_path, moved=3, journaled=4)
    (left,) = _journals(tmp_path)
    store = await open_store(_db(tmp_path))
    try:
        traces = await _traces(store)
        assert traces == sorted([f"early-{i}" for i in range(3)] + [f"late-{i}" for i in range(4)])  # none twice
        assert not left.exists()
        assert await store.adopt_audit_journals() == 0  # nothing left to move
    finally:
        await store.aclose()


async def test_a_running_process_moves_what_another_left_and_never_a_live_journal(tmp_path: Path) -> None:
    store = await open_store(_db(tmp_path))
    try:
        writer = AuditWriter(store, journal=True, linger=3600)
        async with trio.open_nursery() as nursery:
            await nursery.start(writer.run)
            writer.add(_record(1, server="alive"))
            assert await writer.barrier() is True
            (own,) = _journals(tmp_path)
            assert await store.adopt_audit_journals() == 0  # its own journal is alive
            other = await open_store(_db(tmp_path))
            try:
                assert await other.adopt_audit_journals() == 0  # another process's: alive too
            finally:
                await other.aclose()
            _acknowledge_then_die(tmp_path, moved=0, journaled=2)
            nursery.start_soon(writer.adopt_orphans, 0.05)
            with trio.fail_after(10):  # moved, then deleted; this process's own journal stays open
                while await _traces(store) != ["late-0", "late-1"] or len(_journals(tmp_path)) > 1:  # noqa: ASYNC110 - files and the store
                    await trio.sleep(0.05)
            assert [p.name for p in _journals(tmp_path)] == [own.name]
            nursery.cancel_scope.cancel()
        assert await _traces(store) == ["late-0", "late-1", "t-1"]
        assert _journals(tmp_path) == []
    finally:
        await store.aclose()


async def test_no_journal_where_a_commit_is_synced_or_the_database_is_in_memory(tmp_path: Path) -> None:
    for url in (f"sqlite:///{tmp_path / 'synced.db'}?synchronous=full", "sqlite::memory:"):
        store = await open_store(url)
        try:
            writer = AuditWriter(store, journal=True)
            async with trio.open_nursery() as nursery:
                await nursery.start(writer.run)
                writer.add(_record(1))
                assert await writer.barrier() is True
                assert await _traces(store) == ["t-1"]  # committed to the database itself
                nursery.cancel_scope.cancel()
        finally:
            await store.aclose()
    assert not journal_folder(tmp_path / "synced.db").exists()


async def test_a_grown_journal_is_replaced_once_it_is_all_in_the_database(tmp_path: Path, store: Store) -> None:
    writer = AuditWriter(store, journal=True, linger=3600)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        writer.add(_record(1))
        assert await writer.barrier() is True
        (old,) = _journals(tmp_path)
        await store.renew_audit_journal(at=10**9)  # not grown: kept
        assert _journals(tmp_path) == [old]
        assert await writer.flush() is True
        await store.renew_audit_journal(at=1)
        (new,) = _journals(tmp_path)
        assert new != old and new.read_bytes() == FORMAT_LINE
        writer.add(_record(2))
        assert await writer.barrier() is True
        assert await writer.flush() is True
        assert await _traces(store) == ["t-1", "t-2"]
        nursery.cancel_scope.cancel()
    assert _journals(tmp_path) == []


async def test_a_commit_under_way_when_the_journal_opens_is_neither_doubled_nor_skipped(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = AuditWriter(store, journal=True, linger=3600)
    real = store.append_audit
    release = trio.Event()

    async def slow(records: list[AuditIn]) -> list[int]:
        await release.wait()
        return await real(records)

    monkeypatch.setattr(store, "append_audit", slow)
    monkeypatch.setattr(store, "append_audit_now", lambda records: None)  # (the direct commit takes its time)
    done: list[int] = []
    both = trio.Event()

    async def call(i: int) -> None:
        writer.add(_record(i))
        assert await writer.barrier() is True
        done.append(i)
        if len(done) == 2:
            both.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, 1)  # committed to the database directly: no journal yet
        await trio.testing.wait_all_tasks_blocked()
        await nursery.start(writer.run)
        nursery.start_soon(call, 2)  # journaled at once, but answered only after the first
        await trio.testing.wait_all_tasks_blocked()
        assert done == []
        release.set()
        with trio.fail_after(10):
            await both.wait()
        assert await writer.flush() is True
        nursery.cancel_scope.cancel()
    assert await _traces(store) == ["t-1", "t-2"]


async def test_a_journal_left_empty_or_of_another_format_is_deleted_or_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await (await open_store(_db(tmp_path))).aclose()  # (the schema first)
    folder = journal_folder(tmp_path / "audit.db")
    folder.mkdir(mode=0o700)
    (folder / "1-empty.jsonl").write_bytes(FORMAT_LINE[:5])  # its process died as it made it
    (folder / "2-other.jsonl").write_bytes(b'{"format":"something-else"}\n')
    with caplog.at_level(logging.ERROR, "mcpwire.service.store"):
        store = await open_store(_db(tmp_path))
    try:
        assert sorted(p.name for p in folder.iterdir()) == ["2-other.jsonl"]
        assert "cannot read the audit journal" in caplog.text and "2-other.jsonl" in caplog.text
        caplog.clear()
        with caplog.at_level(logging.ERROR, "mcpwire.service.store"):
            assert await store.adopt_audit_journals() == 0
        assert caplog.text == ""  # (reported once)
        assert await _traces(store) == []
    finally:
        await store.aclose()
