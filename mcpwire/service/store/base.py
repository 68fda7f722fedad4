"""The one store interface, written once in SQL over a small driver per database.

Theory of operation: a :class:`Store` turns each operation into a function of a
:class:`Transaction` and hands it to its :class:`Driver`, which runs it in a worker thread (the
database libraries block) inside one transaction: commit when the function returns, rollback when
it raises. The SQL is shared; the drivers differ in connecting, placeholders and locking. Nothing is
acknowledged before its transaction has committed: a method returns after the commit.

Sequence numbers for approvals come from a row of ``counters`` bumped in the same transaction as
the change. The row lock serialises writers until commit, so sequence numbers become visible in
order, and a reader polling ``seq > cursor`` never skips a change committed late by another
process (which a plain identity column would allow on PostgreSQL).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import msgspec

from .access import AccessStore
from .journal import RENEW_BYTES, Journal, claim_orphans, read_batches
from .schema import JOURNALS_VERSION, MIGRATIONS, Dialect, Migration
from .types import (
    ApprovalRow,
    AuditIn,
    AuditPage,
    AuditRow,
    CheckRunRow,
    ConversationRow,
    JSONObject,
    MessageRow,
    PinRow,
    ServerRow,
    StoreError,
)

__all__ = ["CHANGES_CHANNEL", "MAX_PAGE", "Driver", "Store", "Transaction", "audit_rows"]

T = TypeVar("T")

log = logging.getLogger("mcpwire.service.store")

#: the PostgreSQL channel a change is announced on (its payload: the kind of change)
CHANGES_CHANNEL = "mcpwire_changes"
#: the most rows one page (audit, approvals, check runs...) returns
MAX_PAGE = 500
#: advisory lock id taken while migrating (PostgreSQL), so replicas starting together migrate once
_MIGRATION_LOCK = 0x6D6370_77  # "mcpw"

_encode = msgspec.json.Encoder().encode
_decode_object = msgspec.json.Decoder(dict[str, Any]).decode


#: the columns of an audit record, as appended
AUDIT_COLUMNS: Final = ("time", "server", "kind", "tool", "name", "outcome", "trace_id", "run_id", "caller", "record")


@functools.lru_cache(maxsize=64)
def insert_sql(table: str, columns: tuple[str, ...], count: int) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...), ...`` for ``count`` rows."""
    row = "(" + ", ".join("?" * len(columns)) + ")"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES " + ", ".join([row] * count)


def rows_per_insert(columns: Sequence[str]) -> int:
    """Rows per INSERT statement: within the 999 parameters of the oldest SQLite builds."""
    return max(1, 999 // len(columns))


def _json(value: JSONObject | None) -> str | None:
    return None if value is None else _encode(value).decode()


def _object(text: str | None) -> JSONObject:
    return {} if text is None else _decode_object(text)


class Transaction(Protocol):
    """One open transaction; statements use ``?`` placeholders in every dialect."""

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]: ...

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None: ...

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        """Executes one statement; returns the number of rows it changed."""
        ...

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int]:
        """Inserts ``rows`` into ``table`` (whose key is a serial ``id``) with as few statements as
        the dialect allows; returns their ids, in order."""
        ...


class Driver(Protocol):
    """Runs functions of a transaction in a worker thread, one transaction per call."""

    dialect: Dialect
    #: where the data is, with credentials redacted (for messages)
    location: str

    async def call(self, fn: Callable[[Transaction], T], *, write: bool, quick: bool = False) -> T:
        """Runs ``fn`` in a transaction; commits when it returns. ``quick``: ``fn`` is a few
        statements, which the driver may run on the calling thread when it can do so without
        waiting (no lock to wait for, no sync to the disk), sparing two thread switches.

        Raises:
            StoreError: the database failed (the message names it and the cause).

        Cancellation: a function already running finishes (and commits) before the cancellation
        is delivered, so a cancelled caller never leaves a write half done.
        """
        ...

    def insert_now(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int] | None:
        """Appends ``rows`` (values in the order of ``columns``) to ``table`` as one statement on
        the calling thread, committed before it returns, when that needs no wait (see ``quick``
        above); their ids, in order, or None when it would wait, and then nothing was written.

        Raises:
            StoreError: the database failed.
        """
        ...

    async def aclose(self) -> None: ...


class Store:
    """Servers, approvals, audit records, tool pins, check runs and conversations.

    Open one with :func:`~mcpwire.service.store.open_store`; the same methods work on SQLite and
    PostgreSQL. Every method is async (it waits for a worker thread) and raises
    :class:`StoreError` when the database fails.
    """

    def __init__(self, driver: Driver, *, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        self._driver = driver
        self._migrations = tuple(sorted(migrations, key=lambda m: m.version))
        #: API tokens and console sessions
        self.access = AccessStore(driver)
        #: where audit journals live (a SQLite file committed with ``synchronous=NORMAL``), or None
        self.journal_folder: Path | None = (
            getattr(driver, "journal_folder", None) if self.latest_version >= JOURNALS_VERSION else None
        )
        #: this process's audit journal, while open
        self._journal: Journal | None = None
        #: journals of another format, reported once
        self._foreign_journals: set[str] = set()

    @property
    def dialect(self) -> Dialect:
        return self._driver.dialect

    @property
    def location(self) -> str:
        return self._driver.location

    @property
    def latest_version(self) -> int:
        return self._migrations[-1].version if self._migrations else 0

    async def aclose(self) -> None:
        await self._driver.aclose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- schema ---------------------------------------------------------------------------------------

    async def migrate(self) -> int:
        """Applies every migration after the database's version; returns the version reached.

        Raises:
            StoreError: the database is newer than this code, or a migration failed (the
                database stays at the version before it).
        """
        version = await self.schema_version()
        for migration in self._migrations:
            if migration.version > version:
                version = await self._driver.call(functools.partial(self._apply, migration=migration), write=True)
        if version > self.latest_version:
            raise StoreError(
                f"the database {self.location} has schema version {version}, newer than this mcpwire knows "
                f"({self.latest_version}); upgrade mcpwire, or use another --db"
            )
        return version

    def _lock_schema(self, tx: Transaction) -> None:
        if self.dialect == "postgresql":
            tx.one("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
        tx.run("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def _apply(self, tx: Transaction, migration: Migration) -> int:
        self._lock_schema(tx)
        row = tx.one("SELECT value FROM meta WHERE key = 'schema_version'")
        current = int(row[0]) if row else 0
        if current >= migration.version:  # another process got there first
            return current
        if current != migration.version - 1:
            raise StoreError(
                f"cannot migrate {self.location} from schema version {current} to {migration.version}: "
                f"migration {current + 1} is unknown"
            )
        for statement in migration.statements_for(self.dialect):
            tx.run(statement)
        if current == 0:
            tx.run("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(migration.version),))
        else:
            tx.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(migration.version),))
        return migration.version

    async def schema_version(self) -> int:
        """The database's schema version (0 for an empty database)."""

        def read(tx: Transaction) -> int:
            self._lock_schema(tx)
            row = tx.one("SELECT value FROM meta WHERE key = 'schema_version'")
            return int(row[0]) if row else 0

        return await self._driver.call(read, write=True)

    # -- changes ----------------------------------------------------------------------------------

    def _changed(self, tx: Transaction, kind: str) -> None:
        """Counts a change of ``kind`` (``servers``, ``pins``...) in the writing transaction, so
        that every process on the store learns of it (:meth:`changes`; PostgreSQL also notifies
        its listeners when the transaction commits)."""
        tx.run(
            "INSERT INTO counters (name, value) VALUES (?, 1)"
            " ON CONFLICT (name) DO UPDATE SET value = counters.value + 1",
            (f"changes:{kind}",),
        )
        if self.dialect == "postgresql":
            tx.one("SELECT pg_notify(?, ?)", (CHANGES_CHANNEL, kind))

    async def changes(self) -> dict[str, int]:
        """How many changes of each kind the store has seen (a cheap read, to poll)."""
        rows = await self._driver.call(
            lambda tx: tx.all("SELECT name, value FROM counters WHERE name LIKE ?", ("changes:%",)), write=False
        )
        return {str(name).removeprefix("changes:"): int(value) for name, value in rows}

    async def listen_changes(self, wake: Callable[[], None], ready: Callable[[], None] | None = None) -> None:
        """Calls ``wake`` on every change another process announces, until cancelled (``ready``
        once it listens); returns at once on a database that cannot announce (SQLite: the
        counters are polled instead).

        Raises:
            StoreError: the listening connection failed.
        """
        listen = getattr(self._driver, "listen", None)
        if listen is not None:
            await listen(CHANGES_CHANNEL, wake, ready)

    async def ping(self) -> None:
        """A round trip to the database (for readiness)."""
        await self._driver.call(lambda tx: tx.one("SELECT 1"), write=False)

    # -- servers ----------------------------------------------------------------------------------------

    async def servers(self) -> list[ServerRow]:
        """Every server registered, edited or removed through the API, by name."""
        rows = await self._driver.call(
            lambda tx: tx.all("SELECT name, entry, patch, removed, updated_at FROM servers ORDER BY name"), write=False
        )
        return [
            ServerRow(
                name=n,
                entry=None if e is None else _object(e),
                patch=None if p is None else _object(p),
                removed=bool(r),
                updated_at=u,
            )
            for n, e, p, r, u in rows
        ]

    async def put_server(
        self, name: str, entry: JSONObject | None = None, *, patch: JSONObject | None = None, removed: bool = False
    ) -> ServerRow:
        """Stores what the API knows of a server, replacing what was stored before: the entry of
        a server added through the API, the edits of one from the config file, or a tombstone."""
        row = ServerRow(name=name, entry=entry, patch=patch, removed=removed, updated_at=time.time())

        def put(tx: Transaction) -> None:
            self._upsert_server(tx, row)
            self._changed(tx, "servers")

        await self._driver.call(put, write=True)
        return row

    async def remove_server(self, name: str) -> ServerRow:
        """Marks a server removed: one of the config file stays hidden after a restart."""
        return await self.put_server(name, removed=True)

    async def forget_server(self, name: str) -> bool:
        """Drops what the API stored about a server (the config file's entry applies again)."""

        def forget(tx: Transaction) -> int:
            changed = tx.run("DELETE FROM servers WHERE name = ?", (name,))
            if changed:
                self._changed(tx, "servers")
            return changed

        return await self._driver.call(forget, write=True) > 0

    def _upsert_server(self, tx: Transaction, row: ServerRow) -> None:
        tx.run(
            "INSERT INTO servers (name, entry, patch, removed, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET entry = excluded.entry, patch = excluded.patch,"
            " removed = excluded.removed, updated_at = excluded.updated_at",
            (row.name, _json(row.entry), _json(row.patch), int(row.removed), row.updated_at),
        )

    # -- audit ------------------------------------------------------------------------------------------

    async def append_audit(self, records: Sequence[AuditIn]) -> list[int]:
        """Appends records in one transaction; returns their ids (in order)."""
        if not records:
            return []
        return await self._driver.call(_appending(records), write=True, quick=True)

    async def append_journaled(self, rows: Sequence[Sequence[object]], end: int) -> list[int]:
        """Moves audit ``rows`` (:func:`audit_rows`) from this process's audit journal into the
        audit table: every row journaled up to offset ``end`` (what :meth:`journal_audit` returned
        for the last of them), in one transaction that also records how far the journal is in the
        database; their ids."""
        journal = self._journal
        if journal is None:
            raise StoreError("no audit journal is open")
        if not rows:
            return []

        def move(tx: Transaction) -> list[int]:
            ids = tx.insert("audit", AUDIT_COLUMNS, rows)
            _mark_drained(tx, journal.name, end)
            return ids

        return await self._driver.call(move, write=True, quick=True)

    def append_audit_now(self, records: Sequence[AuditIn]) -> list[int] | None:
        """:meth:`append_audit` on this thread, when the store can do it without waiting (a local
        database whose lock is free); None when it cannot, and then nothing was appended."""
        if not records:
            return []
        return self._driver.insert_now("audit", AUDIT_COLUMNS, audit_rows(records))

    # -- audit journals (see journal.py) ----------------------------------------------------------------

    def open_audit_journal(self) -> bool:
        """Starts this process's audit journal, where the database allows one; whether it is open."""
        if self._journal is None and self.journal_folder is not None:
            try:
                self._journal = Journal.create(self.journal_folder)
            except OSError as exc:
                log.error("cannot make an audit journal in %s: %s", self.journal_folder, exc)
        return self._journal is not None

    def journal_audit(self, rows: Sequence[Sequence[object]]) -> int | None:
        """Appends audit ``rows`` (:func:`audit_rows`) to this process's audit journal: durable,
        when this returns, as a commit is. The journal's size after them (pass it to
        :meth:`append_journaled`), or None when there is no journal to write to, and then nothing
        was written. A journal that fails to take a batch takes no more (what it holds can still
        be moved)."""
        journal = self._journal
        if journal is None or journal.broken:
            return None
        try:
            return journal.append(rows)
        except OSError as exc:
            journal.broken = True
            log.error("cannot write the audit journal %s (records go to the database directly): %s", journal.path, exc)
            return None

    async def close_audit_journal(self, *, drained: bool) -> None:
        """Closes this process's audit journal; ``drained``: everything in it is in the database,
        so it is deleted (else it stays for the next process on the store to move)."""
        journal, self._journal = self._journal, None
        if journal is None:
            return
        journal.close()
        if drained:
            await self._forget_journal(journal.path)

    async def renew_audit_journal(self, *, at: int = RENEW_BYTES) -> None:
        """Replaces this process's audit journal by a new one when it has grown to ``at`` bytes:
        call it only when everything in it is in the database (the old one is deleted)."""
        journal = self._journal
        if journal is None or journal.size < at or self.journal_folder is None:
            return
        try:
            self._journal = Journal.create(self.journal_folder)
        except OSError as exc:
            log.error("cannot make a new audit journal in %s (the old one goes on): %s", self.journal_folder, exc)
            return
        journal.close()
        await self._forget_journal(journal.path)

    async def adopt_audit_journals(self) -> int:
        """Moves into the audit table what the journals of processes that are gone hold, then
        deletes them; the number of records moved.

        Raises:
            StoreError: the database failed (the journal stays, for the next try).
        """
        folder = self.journal_folder
        if folder is None:
            return 0
        moved = 0
        own = self._journal.name if self._journal is not None else None
        for path, fd in claim_orphans(folder, own):
            try:
                moved += await self._adopt(path, fd)
            finally:
                os.close(fd)
        return moved

    async def _adopt(self, path: Path, fd: int) -> int:
        """Moves one claimed journal's records (see :meth:`adopt_audit_journals`)."""
        name = path.name

        def move(tx: Transaction) -> int:
            row = tx.one("SELECT drained FROM audit_journals WHERE name = ?", (name,))
            rows, end = read_batches(fd, int(row[0]) if row else 0)
            if rows:
                tx.insert("audit", AUDIT_COLUMNS, rows)
            _mark_drained(tx, name, end)
            return len(rows)

        try:
            moved = await self._driver.call(move, write=True)
        except (ValueError, OSError) as exc:
            if name not in self._foreign_journals:
                self._foreign_journals.add(name)
                log.error("cannot read the audit journal %s (left as it is): %s", path, exc)
            return 0
        if moved:
            log.warning("moved %d audit records from %s, whose process is gone, into the store", moved, path)
        await self._forget_journal(path)
        return moved

    async def _forget_journal(self, path: Path) -> None:
        """Deletes a journal that is all in the database, then its row (a row whose file is gone
        is never read again; a file whose row is gone would be read from its start)."""

        def forget(tx: Transaction) -> None:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.error("cannot delete the audit journal %s: %s", path, exc)
                return
            tx.run("DELETE FROM audit_journals WHERE name = ?", (path.name,))

        await self._driver.call(forget, write=True)

    async def audit(
        self,
        *,
        server: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        trace_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
        since: float | None = None,
        until: float | None = None,
        cursor: int | None = None,
        limit: int = 50,
    ) -> AuditPage:
        """A page of records, newest first. ``tool`` matches the tool's own or namespaced name;
        ``since`` and ``until`` bound the record's time (Unix seconds, ``since`` included,
        ``until`` not); ``cursor`` is a page's ``next_cursor``."""
        where: list[str] = []
        params: list[object] = []
        equal = (("server", server), ("outcome", outcome), ("trace_id", trace_id), ("run_id", run_id), ("kind", kind))
        for column, value in equal:
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        for condition, bound in (("time >= ?", since), ("time < ?", until)):
            if bound is not None:
                where.append(condition)
                params.append(bound)
        if tool is not None:
            where.append("(tool = ? OR name = ?)")
            params += [tool, tool]
        if cursor is not None:
            where.append("id < ?")
            params.append(cursor)
        limit = max(1, min(limit, MAX_PAGE))
        sql = (
            "SELECT id, time, server, kind, tool, name, outcome, trace_id, run_id, caller, record FROM audit"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY id DESC LIMIT ?"
        )
        params.append(limit + 1)
        rows = await self._driver.call(lambda tx: tx.all(sql, params), write=False)
        items = [
            AuditRow(
                id=int(r[0]), time=r[1], server=r[2], kind=r[3], tool=r[4], name=r[5], outcome=r[6],
                trace_id=r[7], run_id=r[8], caller=r[9], record=_object(r[10]),
            )
            for r in rows[:limit]
        ]  # fmt: skip
        return AuditPage(items=items, next_cursor=items[-1].id if len(rows) > limit else None)

    # -- approvals ----------------------------------------------------------------------------------------

    async def save_approval(
        self, row: ApprovalRow, *, expect_state: str | None = None, expect_version: int | None = None
    ) -> ApprovalRow | None:
        """Inserts or replaces an approval; returns it with its new ``seq``.

        With ``expect_state``, an existing approval is replaced only while its stored state is
        that one; with ``expect_version``, only while the ``version`` in its stored data is that
        one (0: it must not exist yet). So two processes cannot both decide it: ``None`` is
        returned, and nothing written, when the stored approval is not as expected.
        """

        def save(tx: Transaction) -> ApprovalRow | None:
            if expect_state is not None or expect_version is not None:
                current = tx.one("SELECT state, data FROM approvals WHERE id = ?", (row.id,))
                if expect_state is not None and current is not None and current[0] != expect_state:
                    return None
                if expect_version is not None:
                    version = None if current is None else _object(current[1]).get("version")
                    stored = version if isinstance(version, int) else 0
                    if stored != expect_version:
                        return None
            seq_row = tx.one("UPDATE counters SET value = value + 1 WHERE name = 'approvals' RETURNING value")
            assert seq_row is not None
            seq = int(seq_row[0])
            tx.run(
                "INSERT INTO approvals (id, state, server, tool, created_at, expires_at, decided_at, seq, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
                " server = excluded.server, tool = excluded.tool, created_at = excluded.created_at,"
                " expires_at = excluded.expires_at, decided_at = excluded.decided_at, seq = excluded.seq,"
                " data = excluded.data",
                (
                    row.id, row.state, row.server, row.tool, row.created_at, row.expires_at, row.decided_at, seq,
                    _json(row.data),
                ),
            )  # fmt: skip
            return msgspec.structs.replace(row, seq=seq)

        return await self._driver.call(save, write=True)

    _APPROVAL_COLUMNS = "id, state, server, tool, created_at, expires_at, decided_at, seq, data"

    @staticmethod
    def _approval(r: tuple[Any, ...]) -> ApprovalRow:
        return ApprovalRow(
            id=r[0], state=r[1], server=r[2], tool=r[3], created_at=r[4], expires_at=r[5], decided_at=r[6],
            seq=int(r[7]), data=_object(r[8]),
        )  # fmt: skip

    async def approval(self, approval_id: str) -> ApprovalRow | None:
        row = await self._driver.call(
            lambda tx: tx.one(f"SELECT {self._APPROVAL_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)),
            write=False,
        )
        return None if row is None else self._approval(row)

    async def approvals(self, *, state: str | None = None, limit: int = 100) -> list[ApprovalRow]:
        """Approvals, newest first (``state``: only those in it)."""
        where, params = ("WHERE state = ? ", (state,)) if state is not None else ("", ())
        sql = f"SELECT {self._APPROVAL_COLUMNS} FROM approvals {where}ORDER BY created_at DESC, id"
        return [self._approval(r) for r in await self._page(sql, limit, params)]

    async def _page(self, sql: str, limit: int, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """The first ``limit`` rows (1 to ``MAX_PAGE``) of ``sql``, a query that ends with its
        ``ORDER BY``."""
        page = (*params, max(1, min(limit, MAX_PAGE)))
        return await self._driver.call(lambda tx: tx.all(sql + " LIMIT ?", page), write=False)

    async def approvals_cursor(self) -> int:
        """The sequence number of the last change saved (a cursor that skips everything so far)."""
        row = await self._driver.call(
            lambda tx: tx.one("SELECT value FROM counters WHERE name = 'approvals'"), write=False
        )
        return int(row[0]) if row else 0

    async def approvals_changed_since(self, cursor: int, *, limit: int = MAX_PAGE) -> tuple[list[ApprovalRow], int]:
        """Approvals saved after ``cursor`` (0: all), in order, and the cursor to poll with next."""
        rows = await self._driver.call(
            lambda tx: tx.all(
                f"SELECT {self._APPROVAL_COLUMNS} FROM approvals WHERE seq > ? ORDER BY seq LIMIT ?", (cursor, limit)
            ),
            write=False,
        )
        items = [self._approval(r) for r in rows]
        return items, items[-1].seq if items else cursor

    # -- pins --------------------------------------------------------------------------------------------------

    @staticmethod
    def _pin(r: tuple[Any, ...]) -> PinRow:
        return PinRow(server=r[0], tool=r[1], hash=r[2], state=r[3], changed_at=r[4], data=_object(r[5]))

    async def pin(self, server: str, tool: str) -> PinRow | None:
        row = await self._driver.call(
            lambda tx: tx.one(
                "SELECT server, tool, hash, state, changed_at, data FROM pins WHERE server = ? AND tool = ?",
                (server, tool),
            ),
            write=False,
        )
        return None if row is None else self._pin(row)

    async def put_pin(self, row: PinRow) -> None:
        def put(tx: Transaction) -> None:
            tx.run(
                "INSERT INTO pins (server, tool, hash, state, changed_at, data) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, state = excluded.state,"
                " changed_at = excluded.changed_at, data = excluded.data",
                (row.server, row.tool, row.hash, row.state, row.changed_at, _json(row.data)),
            )
            self._changed(tx, "pins")

        await self._driver.call(put, write=True)

    async def pins(self, *, server: str | None = None) -> list[PinRow]:
        where, params = ("WHERE server = ? ", [server]) if server is not None else ("", [])
        rows = await self._driver.call(
            lambda tx: tx.all(
                f"SELECT server, tool, hash, state, changed_at, data FROM pins {where}ORDER BY server, tool", params
            ),
            write=False,
        )
        return [self._pin(r) for r in rows]

    async def delete_pins(self, server: str) -> int:
        return await self._driver.call(lambda tx: tx.run("DELETE FROM pins WHERE server = ?", (server,)), write=True)

    # -- check runs ----------------------------------------------------------------------------------------------

    async def put_check_run(self, row: CheckRunRow) -> None:
        await self._driver.call(
            lambda tx: tx.run(
                "INSERT INTO check_runs (id, target, started_at, finished_at, status, summary, report)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET target = excluded.target,"
                " started_at = excluded.started_at, finished_at = excluded.finished_at, status = excluded.status,"
                " summary = excluded.summary, report = excluded.report",
                (
                    row.id,
                    row.target,
                    row.started_at,
                    row.finished_at,
                    row.status,
                    _json(row.summary),
                    _json(row.report),
                ),
            ),
            write=True,
        )

    @staticmethod
    def _check_run(r: tuple[Any, ...], *, report: bool) -> CheckRunRow:
        return CheckRunRow(
            id=r[0], target=r[1], started_at=r[2], finished_at=r[3], status=r[4], summary=_object(r[5]),
            report=_object(r[6]) if report and r[6] is not None else None,
        )  # fmt: skip

    async def check_run(self, run_id: str) -> CheckRunRow | None:
        row = await self._driver.call(
            lambda tx: tx.one(
                "SELECT id, target, started_at, finished_at, status, summary, report FROM check_runs WHERE id = ?",
                (run_id,),
            ),
            write=False,
        )
        return None if row is None else self._check_run(row, report=True)

    async def check_runs(self, *, limit: int = 50) -> list[CheckRunRow]:
        """Runs, newest first, without their reports."""
        rows = await self._page(
            "SELECT id, target, started_at, finished_at, status, summary, NULL FROM check_runs"
            " ORDER BY started_at DESC, id",
            limit,
        )
        return [self._check_run(r, report=False) for r in rows]

    # -- conversations ----------------------------------------------------------------------------------------------

    async def put_conversation(self, row: ConversationRow) -> None:
        await self._driver.call(
            lambda tx: tx.run(
                "INSERT INTO conversations (id, title, created_at, updated_at, data) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET title = excluded.title, updated_at = excluded.updated_at,"
                " data = excluded.data",
                (row.id, row.title, row.created_at, row.updated_at, _json(row.data)),
            ),
            write=True,
        )

    async def conversation(self, conversation_id: str) -> ConversationRow | None:
        row = await self._driver.call(
            lambda tx: tx.one(
                "SELECT id, title, created_at, updated_at, data FROM conversations WHERE id = ?", (conversation_id,)
            ),
            write=False,
        )
        if row is None:
            return None
        return ConversationRow(id=row[0], title=row[1], created_at=row[2], updated_at=row[3], data=_object(row[4]))

    async def conversations(self, *, limit: int = 50) -> list[ConversationRow]:
        """Conversations, most recently updated first."""
        rows = await self._page(
            "SELECT id, title, created_at, updated_at, data FROM conversations ORDER BY updated_at DESC, id", limit
        )
        return [
            ConversationRow(id=r[0], title=r[1], created_at=r[2], updated_at=r[3], data=_object(r[4])) for r in rows
        ]

    async def append_message(self, conversation_id: str, role: str, content: JSONObject) -> MessageRow:
        """Appends a message (numbered after the last one) and touches the conversation.

        Raises:
            StoreError: there is no such conversation.
        """

        def append(tx: Transaction) -> MessageRow:
            now = time.time()
            if tx.run("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id)) == 0:
                raise StoreError(f"no conversation {conversation_id!r} in {self.location}")
            last = tx.one("SELECT MAX(seq) FROM messages WHERE conversation_id = ?", (conversation_id,))
            seq = (int(last[0]) if last and last[0] is not None else 0) + 1
            tx.run(
                "INSERT INTO messages (conversation_id, seq, role, created_at, content) VALUES (?, ?, ?, ?, ?)",
                (conversation_id, seq, role, now, _json(content)),
            )
            return MessageRow(conversation_id=conversation_id, seq=seq, role=role, created_at=now, content=content)

        return await self._driver.call(append, write=True)

    async def messages(self, conversation_id: str) -> list[MessageRow]:
        rows = await self._driver.call(
            lambda tx: tx.all(
                "SELECT conversation_id, seq, role, created_at, content FROM messages WHERE conversation_id = ?"
                " ORDER BY seq",
                (conversation_id,),
            ),
            write=False,
        )
        return [
            MessageRow(conversation_id=r[0], seq=int(r[1]), role=r[2], created_at=r[3], content=_object(r[4]))
            for r in rows
        ]

    async def delete_conversation(self, conversation_id: str) -> bool:
        def delete(tx: Transaction) -> bool:
            tx.run("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
            return tx.run("DELETE FROM conversations WHERE id = ?", (conversation_id,)) > 0

        return await self._driver.call(delete, write=True)


def audit_rows(records: Sequence[AuditIn]) -> list[tuple[object, ...]]:
    """The audit table's rows of ``records`` (in the order of :data:`AUDIT_COLUMNS`)."""
    return [
        (r.time, r.server, r.kind, r.tool, r.name, r.outcome, r.trace_id, r.run_id, r.caller, _json(r.record))
        for r in records
    ]


def _mark_drained(tx: Transaction, name: str, end: int) -> None:
    """Records that the audit journal ``name`` is in the database up to offset ``end``."""
    tx.run(
        "INSERT INTO audit_journals (name, drained) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET drained = excluded.drained",
        (name, end),
    )


def _appending(records: Sequence[AuditIn]) -> Callable[[Transaction], list[int]]:
    """The transaction's work that appends ``records`` to the audit table."""
    rows = audit_rows(records)

    def append(tx: Transaction) -> list[int]:
        return tx.insert("audit", AUDIT_COLUMNS, rows)

    return append
