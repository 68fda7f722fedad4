"""The store, the same tests on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import msgspec
import pytest
import trio

from mcpwire.service.store import (
    MIGRATIONS,
    ApprovalRow,
    AuditIn,
    CheckRunRow,
    ConversationRow,
    PinRow,
    Store,
    StoreError,
    default_database_path,
    describe_url,
    open_store,
)
from mcpwire.service.store.base import Transaction


async def test_a_new_database_is_at_the_latest_version(store: Store) -> None:
    assert await store.schema_version() == MIGRATIONS[-1].version == store.latest_version
    assert await store.migrate() == store.latest_version  # idempotent
    await store.ping()


async def test_servers_put_replace_remove_forget(store: Store) -> None:
    assert await store.servers() == []
    await store.put_server("time", {"command": "uvx", "args": ["mcp-server-time"]})
    await store.put_server("mem", {"command": "npx", "env": {"K": "${env:K}"}})
    await store.put_server("time", {"url": "http://127.0.0.1:9/mcp"})
    await store.remove_server("from-config")
    await store.put_server("edited", patch={"enabled": False, "timeout_seconds": 5})
    rows = await store.servers()
    assert [(r.name, r.entry, r.patch, r.removed) for r in rows] == [
        ("edited", None, {"enabled": False, "timeout_seconds": 5}, False),
        ("from-config", None, None, True),
        ("mem", {"command": "npx", "env": {"K": "${env:K}"}}, None, False),
        ("time", {"url": "http://127.0.0.1:9/mcp"}, None, False),
    ]
    assert all(r.updated_at > 0 for r in rows)
    assert await store.forget_server("from-config") is True
    assert await store.forget_server("from-config") is False
    assert [r.name for r in await store.servers()] == ["edited", "mem", "time"]


def _audit(i: int, **kw: object) -> AuditIn:
    fields: dict[str, object] = {
        "time": 1000.0 + i,
        "server": "everything" if i % 2 else "time",
        "tool": "echo" if i % 3 else "add",
        "name": ("everything__echo" if i % 3 else "everything__add"),
        "outcome": "ok" if i % 4 else "error",
        "trace_id": f"trace-{i}",
        "record": {"arguments": {"i": i, "text": "héllo \u202e"}, "latency_ms": 1.5},
    }
    fields.update(kw)
    return msgspec.convert(fields, AuditIn)


async def test_audit_append_and_page_newest_first_by_cursor(store: Store) -> None:
    ids = await store.append_audit([_audit(i) for i in range(1, 26)])
    assert ids == sorted(ids) and len(set(ids)) == 25
    assert await store.append_audit([]) == []
    page = await store.audit(limit=10)
    assert [r.id for r in page.items] == ids[::-1][:10]
    seen = [r.id for r in page.items]
    while page.next_cursor is not None:
        page = await store.audit(limit=10, cursor=page.next_cursor)
        seen += [r.id for r in page.items]
    assert seen == ids[::-1]
    first = (await store.audit(limit=1)).items[0]
    assert first.record == {"arguments": {"i": 25, "text": "héllo \u202e"}, "latency_ms": 1.5}
    assert (first.server, first.tool, first.name, first.trace_id) == (
        "everything",
        "echo",
        "everything__echo",
        "trace-25",
    )


async def test_audit_filters_combine(store: Store) -> None:
    await store.append_audit([_audit(i) for i in range(1, 25)])
    errors = await store.audit(outcome="error", limit=100)
    assert {r.record["arguments"]["i"] for r in errors.items} == {4, 8, 12, 16, 20, 24}  # type: ignore[index]
    both = await store.audit(server="time", tool="add", limit=100)
    assert {r.record["arguments"]["i"] for r in both.items} == {6, 12, 18, 24}  # type: ignore[index]
    namespaced = await store.audit(tool="everything__add", limit=100)
    assert len(namespaced.items) == 8
    traced = await store.audit(trace_id="trace-7")
    assert [r.record["arguments"]["i"] for r in traced.items] == [7]  # type: ignore[index]
    assert (await store.audit(server="nobody")).items == []


async def test_audit_limit_is_bounded(store: Store) -> None:
    await store.append_audit([_audit(i) for i in range(1, 4)])
    assert len((await store.audit(limit=0)).items) == 1
    assert len((await store.audit(limit=10**9)).items) == 3


def _approval(i: str, state: str = "pending", created: float = 1.0) -> ApprovalRow:
    return ApprovalRow(
        id=i, state=state, server="fs", tool="delete_file", created_at=created, expires_at=created + 300,
        data={"id": i, "arguments": {"path": "/tmp/x"}, "risk": "CRITICAL"},
    )  # fmt: skip


async def test_approvals_save_load_and_poll_changes(store: Store) -> None:
    items, cursor = await store.approvals_changed_since(0)
    assert (items, cursor) == ([], 0)
    a = await store.save_approval(_approval("a", created=1.0))
    b = await store.save_approval(_approval("b", created=2.0))
    assert a is not None and b is not None and 0 < a.seq < b.seq
    items, cursor = await store.approvals_changed_since(0)
    assert [r.id for r in items] == ["a", "b"] and cursor == b.seq
    decided = msgspec.structs.replace(a, state="approved", decided_at=5.0, data={**a.data, "reason": "ok"})
    saved = await store.save_approval(decided, expect_state="pending")
    assert saved is not None and saved.seq > b.seq
    items, cursor2 = await store.approvals_changed_since(cursor)
    assert [(r.id, r.state, r.decided_at) for r in items] == [("a", "approved", 5.0)]
    assert (await store.approvals_changed_since(cursor2)) == ([], cursor2)
    # a second decision of the same approval is refused
    assert await store.save_approval(msgspec.structs.replace(a, state="denied"), expect_state="pending") is None
    loaded = await store.approval("a")
    assert loaded is not None and loaded.state == "approved" and loaded.data["reason"] == "ok"
    assert await store.approval("nope") is None
    assert [r.id for r in await store.approvals(state="pending")] == ["b"]
    assert [r.id for r in await store.approvals()] == ["b", "a"]


async def test_approval_changes_are_seen_in_commit_order_by_concurrent_writers(store: Store) -> None:
    """Many concurrent saves: polling with the cursor sees each exactly once."""
    seen: list[str] = []
    cursor = 0

    async def write(i: int) -> None:
        await store.save_approval(_approval(f"x{i}", created=float(i)))

    async with trio.open_nursery() as nursery:
        for i in range(40):
            nursery.start_soon(write, i)
        for _ in range(10):
            items, cursor = await store.approvals_changed_since(cursor)
            seen += [r.id for r in items]
    items, cursor = await store.approvals_changed_since(cursor)
    seen += [r.id for r in items]
    assert sorted(seen) == sorted(f"x{i}" for i in range(40))


async def test_pins(store: Store) -> None:
    assert await store.pin("time", "now") is None
    pin = PinRow(server="time", tool="now", hash="sha256:aa", state="pinned", changed_at=None,
                 data={"definition": {"description": "The time"}})  # fmt: skip
    await store.put_pin(pin)
    assert await store.pin("time", "now") == pin
    quarantined = msgspec.structs.replace(pin, state="quarantined", changed_at=9.0,
                                          data={**pin.data, "pending_hash": "sha256:bb"})  # fmt: skip
    await store.put_pin(quarantined)
    await store.put_pin(PinRow(server="mem", tool="add", hash="sha256:cc", state="pinned"))
    assert await store.pins() == [PinRow(server="mem", tool="add", hash="sha256:cc", state="pinned"), quarantined]
    assert await store.pins(server="time") == [quarantined]
    assert await store.delete_pins("time") == 1
    assert await store.pins(server="time") == []


async def test_check_runs(store: Store) -> None:
    run = CheckRunRow(id="r1", target="http://x/mcp", started_at=10.0)
    await store.put_check_run(run)
    done = msgspec.structs.replace(run, finished_at=12.0, status="passed", summary={"passed": 75},
                                   report={"checks": [{"id": "SV-01"}]})  # fmt: skip
    await store.put_check_run(done)
    await store.put_check_run(CheckRunRow(id="r2", target="-- cmd", started_at=20.0))
    assert await store.check_run("r1") == done
    listed = await store.check_runs()
    assert [r.id for r in listed] == ["r2", "r1"] and listed[1].report is None
    assert await store.check_run("zz") is None


async def test_conversations_and_messages(store: Store) -> None:
    conv = ConversationRow(id="c1", title="hello", created_at=1.0, updated_at=1.0, data={"model": "m"})
    await store.put_conversation(conv)
    m1 = await store.append_message("c1", "user", {"text": "hi"})
    m2 = await store.append_message("c1", "assistant", {"text": "hello"})
    assert (m1.seq, m2.seq) == (1, 2)
    assert [m.content for m in await store.messages("c1")] == [{"text": "hi"}, {"text": "hello"}]
    got = await store.conversation("c1")
    assert got is not None and got.updated_at >= m2.created_at and got.data == {"model": "m"}
    with pytest.raises(StoreError, match=r"^no conversation 'c9' in "):
        await store.append_message("c9", "user", {})
    assert [c.id for c in await store.conversations()] == ["c1"]
    assert await store.delete_conversation("c1") is True
    assert await store.messages("c1") == [] and await store.conversation("c1") is None


async def test_data_survives_reopening(db_url: str) -> None:
    store = await open_store(db_url)
    await store.put_server("s", {"command": "x"})
    await store.append_audit([_audit(1)])
    await store.aclose()
    again = await open_store(db_url)
    try:
        assert [r.name for r in await again.servers()] == ["s"]
        assert len((await again.audit()).items) == 1
    finally:
        await again.aclose()


async def test_forward_migration_keeps_data(db_url: str) -> None:
    """A database made by the first migration only is brought forward, keeping its rows."""
    old = await open_store(db_url, migrations=(MIGRATIONS[0],))
    assert await old.schema_version() == 1
    await old.append_audit([_audit(1)])
    await old.aclose()
    new = await open_store(db_url)
    try:
        assert await new.schema_version() == new.latest_version > 1
        assert [r.trace_id for r in (await new.audit()).items] == ["trace-1"]
        await new.put_server("s", patch={"enabled": False})
        assert [r.patch for r in await new.servers()] == [{"enabled": False}]
        await new.put_check_run(CheckRunRow(id="r", target="t", started_at=1.0))
    finally:
        await new.aclose()


async def test_the_audit_moves_to_one_index_keeping_its_ids(db_url: str) -> None:
    """Migration 5 leaves the audit one index (by server) and, on SQLite, no AUTOINCREMENT: the
    records and their ids stay, new ids follow the largest, and every filter still finds its
    records (reading newest first where no index serves it)."""
    old = await open_store(db_url, migrations=tuple(MIGRATIONS[:4]))
    ids = await old.append_audit([_audit(i) for i in range(1, 9)])
    await old.aclose()
    new = await open_store(db_url, migrations=tuple(MIGRATIONS[:5]))
    try:
        assert await new.schema_version() == 5
        assert [r.id for r in (await new.audit(limit=100)).items] == ids[::-1]
        (later,) = await new.append_audit([_audit(9)])
        assert later == max(ids) + 1
        assert [r.id for r in (await new.audit(trace_id="trace-2")).items] == [ids[1]]
        assert [r.id for r in (await new.audit(outcome="error")).items] == [later - 1, ids[3]]
        assert {r.tool for r in (await new.audit(tool="add")).items} == {"add"}
        if new.dialect == "sqlite":
            indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit'"
            sequences = await new._driver.call(lambda tx: tx.all("SELECT name FROM sqlite_sequence"), write=False)
            assert ("audit",) not in sequences
        else:
            indexes = "SELECT indexname FROM pg_indexes WHERE tablename = 'audit' AND indexname <> 'audit_pkey'"
        found = await new._driver.call(lambda tx: tx.all(indexes), write=False)
        assert [name for (name,) in found] == ["audit_by_server"]
    finally:
        await new.aclose()


async def test_a_newer_database_is_refused(db_url: str) -> None:
    await (await open_store(db_url)).aclose()
    newest = MIGRATIONS[-1].version
    expected = rf"^the database .* has schema version {newest}, newer than this mcpwire knows \(1\)"
    with pytest.raises(StoreError, match=expected):
        await open_store(db_url, migrations=(MIGRATIONS[0],))


async def test_concurrent_openers_migrate_once(db_url: str) -> None:
    stores: list[Store] = []

    async def opener() -> None:
        stores.append(await open_store(db_url))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(opener)
    try:
        assert [await s.schema_version() for s in stores] == [stores[0].latest_version] * 3
    finally:
        for s in stores:
            await s.aclose()


async def test_bad_urls_are_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(
        StoreError, match=r"^--db 'mysql://\*\*\*@h/d': expected sqlite:///PATH or postgresql://USER@HOST/DB$"
    ):
        await open_store("mysql://u:secret@h/d")
    with pytest.raises(
        StoreError, match=r"^--db 'sqlite://x.db': expected sqlite:///PATH \(three slashes, then the path\)$"
    ):
        await open_store("sqlite://x.db")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match=r"^cannot open the database sqlite:///.*/file/db.sqlite: "):
        await open_store(f"sqlite:///{blocker}/db.sqlite")


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"^(cannot open the database|the database) sqlite:///.*bogus.db"):
        await open_store(f"sqlite:///{bogus}")


async def test_unreachable_postgresql_names_the_server_without_its_password() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError, match=rf"^cannot connect to the database postgresql://\*\*\*@127.0.0.1:{port}/d: "):
        await open_store(f"postgresql://u:hunter2@127.0.0.1:{port}/d")


async def test_default_path_and_description(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_database_path() == tmp_path / "mcpwire" / "service.db"
    assert describe_url(None) == f"sqlite:///{tmp_path}/mcpwire/service.db"
    assert describe_url("postgresql://me:pw@db/x") == "postgresql://***@db/x"
    store = await open_store(None)
    await store.aclose()
    assert (tmp_path / "mcpwire" / "service.db").exists()
    with sqlite3.connect(tmp_path / "mcpwire" / "service.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_memory_database(tmp_path: Path) -> None:
    store = await open_store("sqlite::memory:")
    await store.put_server("a", {"command": "b"})
    assert [r.name for r in await store.servers()] == ["a"]
    await store.aclose()
    with pytest.raises(StoreError, match=r"^the database sqlite::memory: is closed$"):
        await store.servers()


async def test_approval_versions_refuse_a_stale_save(store: Store) -> None:
    first = _approval("v", created=1.0)
    first = msgspec.structs.replace(first, data={**first.data, "version": 1})
    assert await store.save_approval(first, expect_version=0) is not None
    assert await store.save_approval(first, expect_version=0) is None  # it exists now
    second = msgspec.structs.replace(first, state="approved", data={**first.data, "version": 2})
    saved = await store.save_approval(second, expect_version=1)
    assert saved is not None and saved.seq == await store.approvals_cursor()
    assert await store.save_approval(second, expect_version=1) is None  # stale
    loaded = await store.approval("v")
    assert loaded is not None and loaded.state == "approved" and loaded.data["version"] == 2


async def test_a_sqlite_store_commits_as_asked(tmp_path: Path) -> None:
    # normal (the default): durable when the process dies; full: synced at every commit too
    for query, expected in (("", 1), ("?synchronous=full", 2), ("?synchronous=NORMAL", 1)):
        store = await open_store(f"sqlite:///{tmp_path / 'modes.db'}{query}")
        try:
            level = await store._driver.call(lambda tx: tx.one("PRAGMA synchronous"), write=False)
            assert level is not None and level[0] == expected, query
        finally:
            await store.aclose()
    with pytest.raises(StoreError, match=r"^--db 'sqlite:///.*': unknown option 'sync' \(a SQLite URL takes"):
        await open_store(f"sqlite:///{tmp_path / 'x.db'}?sync=full")
    with pytest.raises(StoreError, match=r"^--db 'sqlite:///.*': synchronous='off': expected normal or full$"):
        await open_store(f"sqlite:///{tmp_path / 'x.db'}?synchronous=off")


async def test_audit_ids_are_their_records_ids_across_statements_and_writers(db_url: str) -> None:
    """A batch longer than one INSERT statement takes, appended while another store on the same
    database appends too: every id returned is the id its own record was stored under."""
    one, two = await open_store(db_url), await open_store(db_url)
    try:
        got: dict[str, list[int]] = {}

        async def append(store: Store, tag: str) -> None:
            ids: list[int] = []
            for round_ in range(3):
                batch = [_audit(i, trace_id=f"{tag}-{round_}-{i}") for i in range(250)]
                ids += await store.append_audit(batch)
            got[tag] = ids

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, one, "a")
            nursery.start_soon(append, two, "b")
        for tag, ids in got.items():
            assert len(set(ids)) == 750
            for position in (0, 98, 99, 100, 249, 250, 500, 749):
                round_, i = divmod(position, 250)
                found = (await one.audit(trace_id=f"{tag}-{round_}-{i}")).items
                assert [r.id for r in found] == [ids[position]], (tag, position)
        assert not set(got["a"]) & set(got["b"])
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_quick_sqlite_commit_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    """An audit append finds the file locked by another process's write: it waits for the lock
    on a worker thread (the event loop is not blocked meanwhile) and commits once it is free."""
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    store = await open_store(url)
    other = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO counters (name, value) VALUES ('held', 1)")
        done = trio.Event()
        ids: list[int] = []

        async def append() -> None:
            ids.extend(await store.append_audit([_audit(1)]))
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append)
            ticks = 0
            with trio.move_on_after(0.5):
                while True:  # the loop keeps running while the append waits for the lock
                    await trio.sleep(0.01)
                    ticks += 1
            assert not done.is_set() and ticks >= 10
            other.execute("COMMIT")
            with trio.fail_after(10):
                await done.wait()
        assert len(ids) == 1 and [r.id for r in (await store.audit()).items] == ids
    finally:
        other.close()
        await store.aclose()


async def test_a_long_read_does_not_hold_back_a_quick_commit(tmp_path: Path) -> None:
    """An audit append (a call's answer waits for it) is not queued behind a slow read of the
    store (a page of the audit that scans the table): it commits on its own connection."""
    store = await open_store(f"sqlite:///{tmp_path / 'reads.db'}")
    read_done = trio.Event()

    def slow_read(tx: Transaction) -> list[tuple[object, ...]]:
        rows = tx.all("SELECT id FROM audit")
        time.sleep(1.5)  # a scan of a long log
        return rows

    async def read() -> None:
        await store._driver.call(slow_read, write=False)
        read_done.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.sleep(0.2)  # the read is under way on the worker thread
            began = trio.current_time()
            (record_id,) = await store.append_audit([_audit(1)])
            assert trio.current_time() - began < 1.0 and not read_done.is_set()
        assert [r.id for r in (await store.audit()).items] == [record_id]
    finally:
        await store.aclose()


async def test_the_sqlite_log_is_checkpointed_while_quick_commits_go_on(tmp_path: Path) -> None:
    """Quick commits never checkpoint themselves (that syncs the file); the log is checkpointed
    on a worker thread often enough that it does not grow with the number of commits."""
    path = tmp_path / "wal.db"
    store = await open_store(f"sqlite:///{path}")
    try:
        for i in range(2000):
            await store.append_audit([_audit(i)])
        wal = (await trio.Path(f"{path}-wal").stat()).st_size
        # about 6 pages a commit: 2000 commits without a checkpoint would leave ~48 MB
        assert wal < 8 * 1024 * 1024, wal
        assert len((await store.audit(limit=10**9)).items) >= 1
    finally:
        await store.aclose()
