"""The SQLite driver: the standard library's ``sqlite3``, off the trio thread, in WAL mode.

Theory of operation: one connection, used by one worker thread at a time (a capacity limiter of
one, which is fair, so calls run in arrival order). Quick transactions run on the event loop's
thread instead, on a second connection that never waits for a lock, so a long read on the worker
thread does not hold them back: when another writer (the worker thread, another process) holds the
lock, they go to the worker thread like the rest. An audit commit there is one ``INSERT``
statement, which is its own transaction (:meth:`SqliteDriver.insert_now`). Write transactions start with ``BEGIN
IMMEDIATE`` so two processes sharing the file queue on the lock (``busy_timeout``) instead of
failing on upgrade. ``journal_mode=WAL`` lets readers in other processes run during a write;
``synchronous=NORMAL`` (the default) makes every commit durable before it returns against the
process dying (a crash, SIGKILL): in WAL mode a committed transaction is in the write-ahead log,
which the operating system keeps when the process is gone, and is synced at each checkpoint.
``synchronous=FULL`` (``?synchronous=full`` in the URL) also syncs the log at every commit, so a
commit survives the machine losing power, at the cost of one fsync per commit (the service commits
audit records in groups, so one per group of calls that finish together, not per record).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import trio

from ..localfiles import data_folder, private_file, private_folder
from .base import Transaction, insert_sql, rows_per_insert
from .journal import JOURNALS_WORK, journal_folder
from .schema import Dialect
from .types import StoreError

__all__ = ["BUSY_TIMEOUT", "SqliteDriver", "SyncMode"]

#: how a commit is made durable: ``normal`` against the process dying, ``full`` also against power loss
SyncMode = Literal["normal", "full"]

log = logging.getLogger("mcpwire.service.store")
T = TypeVar("T")

#: seconds a write waits for another process's write lock before failing
BUSY_TIMEOUT: Final = 10.0
#: commits after which the next write goes to a worker thread and checkpoints the log (the
#: connection's own automatic checkpoint is off: it would sync the file during a quick commit)
CHECKPOINT_EVERY: Final = 200


class _Busy(Exception):
    """A quick transaction would have to wait for another process's lock."""


class _Tx:
    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._conn.execute(sql, params).fetchone()
        return row

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int]:
        # One statement per chunk and no RETURNING: each step of a statement gives up the GIL and
        # has to win it back from the event loop's thread, so a row per step is slow under load.
        # Rows inserted by one statement while this transaction holds the write lock get
        # consecutive ids, the last of which is the cursor's lastrowid.
        ids: list[int] = []
        step = rows_per_insert(columns)
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            cursor = self._conn.execute(insert_sql(table, tuple(columns), len(chunk)), [v for r in chunk for v in r])
            last = cursor.lastrowid
            if last is None or cursor.rowcount != len(chunk):
                raise sqlite3.OperationalError(f"inserted {cursor.rowcount} of {len(chunk)} rows into {table}")
            ids.extend(range(last - len(chunk) + 1, last + 1))
        return ids


def _private_database(path: Path) -> None:
    """The database file and its folder readable by this user only: the folder made 0700 when
    it is made (the data folder is tightened if it was more open), the file made 0600, and a
    file found more open tightened, with a log line."""
    folder = path.parent
    if folder == data_folder():
        private_folder(folder)
    else:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        private_file(path)


class SqliteDriver:
    """A SQLite database file (``":memory:"`` for a private in-memory one).

    Raises:
        StoreError: (from :meth:`open`) the file cannot be created or opened.
    """

    dialect: Dialect = "sqlite"

    def __init__(self, path: str | Path, *, synchronous: SyncMode = "normal") -> None:
        self.path = str(path)
        self.synchronous = synchronous
        self.location = f"sqlite:///{self.path}" if self.path != ":memory:" else "sqlite::memory:"
        self._conn: sqlite3.Connection | None = None
        #: a second connection to the same file for quick transactions, used on the event loop's
        #: thread only: it never waits for a lock (``busy_timeout`` 0), and a worker thread's
        #: transaction on the other connection does not hold it back
        self._quick: sqlite3.Connection | None = None
        self._limiter = trio.CapacityLimiter(1)
        self._closed = False
        #: commits since the log was last checkpointed
        self._since_checkpoint = 0
        #: where audit journals go: beside a file committed without a sync, whose durability they
        #: match (a synced commit is no faster journaled)
        journaled = JOURNALS_WORK and self.path != ":memory:" and synchronous == "normal"
        self.journal_folder = journal_folder(self.path) if journaled else None

    async def open(self) -> None:
        await trio.to_thread.run_sync(self._connect, limiter=self._limiter)

    def _connect(self) -> None:
        opened: list[sqlite3.Connection] = []
        try:
            if self.path != ":memory:":
                _private_database(Path(self.path))
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
            opened.append(conn)
            _set_wal(conn)
            if self.path != ":memory:":
                for suffix in ("-wal", "-shm"):  # SQLite makes them as open as the database; be sure
                    private_file(Path(self.path + suffix))
            self._configure(conn, BUSY_TIMEOUT)
            quick = None
            if self.path != ":memory:" and self.synchronous == "normal":
                # (a private in-memory database is one connection's own; a full sync is never quick)
                quick = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
                opened.append(quick)
                self._configure(quick, 0)
        except (sqlite3.Error, OSError) as exc:
            for each in opened:  # nothing half-open is left behind
                each.close()
            raise StoreError(f"cannot open the database {self.location}: {exc}") from exc
        self._conn = conn
        self._quick = quick

    def _configure(self, conn: sqlite3.Connection, busy_timeout: float) -> None:
        conn.execute(f"PRAGMA synchronous={'FULL' if self.synchronous == 'full' else 'NORMAL'}")
        conn.execute("PRAGMA foreign_keys=ON")
        # checkpoints (which sync the file) run on a worker thread, never at a quick commit
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")

    async def call(self, fn: Callable[[Transaction], T], *, write: bool, quick: bool = False) -> T:
        if self._closed or self._conn is None:
            raise StoreError(f"the database {self.location} is closed")
        if quick and self._quick_ready():
            # (on its own connection: a worker thread's transaction on the other one, however
            # long, does not hold it back unless it writes)
            try:
                return self._run_now(fn, write)
            except _Busy:
                pass  # another writer holds the lock: wait for it on a worker thread
        return await trio.to_thread.run_sync(self._run, fn, write, limiter=self._limiter)

    def insert_now(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int] | None:
        if self._closed or self._conn is None:
            raise StoreError(f"the database {self.location} is closed")
        conn = self._quick
        if conn is None or not self._quick_ready() or len(rows) > rows_per_insert(columns):
            return None
        # one statement, committed as it ends (no BEGIN and COMMIT of its own): it takes the write
        # lock at once or fails at once (busy_timeout 0), and then it wrote nothing
        try:
            cursor = conn.execute(insert_sql(table, tuple(columns), len(rows)), [v for r in rows for v in r])
        except sqlite3.Error as exc:
            if isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                return None  # another writer holds the lock: the caller waits for it elsewhere
            raise StoreError(f"the database {self.location} failed: {exc}") from exc
        self._since_checkpoint += 1
        last = cursor.lastrowid
        if last is None or cursor.rowcount != len(rows):
            raise StoreError(f"the database {self.location} took {cursor.rowcount} of {len(rows)} rows into {table}")
        return list(range(last - len(rows) + 1, last + 1))

    def _quick_ready(self) -> bool:
        """Whether a quick transaction may run on the calling thread: the quick connection is
        open and no checkpoint is due (a worker thread's transaction makes it)."""
        return self._quick is not None and self._since_checkpoint < CHECKPOINT_EVERY

    def _run_now(self, fn: Callable[[Transaction], T], write: bool) -> T:
        """Runs a quick transaction on this thread, on the quick connection (``busy_timeout`` 0),
        unless that would mean waiting for another writer's lock (this process's worker thread or
        another process: :class:`_Busy` then, and nothing was done). A commit in WAL mode with
        ``synchronous=NORMAL`` writes to the log without syncing it, so nothing here waits for the
        disk; the log is checkpointed (which syncs) by a worker thread (:meth:`_run`)."""
        conn = self._quick
        if conn is None:
            raise _Busy
        try:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.OperationalError as exc:
                raise _Busy from exc
            result = self._finish(conn, fn)
            self._since_checkpoint += write
            return result
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"the database {self.location} failed: {exc}") from exc

    def _run(self, fn: Callable[[Transaction], T], write: bool) -> T:
        conn = self._conn
        if conn is None:
            raise StoreError(f"the database {self.location} is closed")
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            result = self._finish(conn, fn)
            self._since_checkpoint += write
            if self._since_checkpoint >= CHECKPOINT_EVERY:
                self._since_checkpoint = 0
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return result
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"the database {self.location} failed: {exc}") from exc

    @staticmethod
    def _finish(conn: sqlite3.Connection, fn: Callable[[Transaction], T]) -> T:
        """Runs ``fn`` in the transaction just begun and commits; rolls back when it fails."""
        try:
            result = fn(_Tx(conn))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn, self._conn = self._conn, None
        quick, self._quick = self._quick, None
        with trio.CancelScope(shield=True):
            for each in (quick, conn):
                if each is not None:
                    await trio.to_thread.run_sync(each.close, limiter=self._limiter)


def _set_wal(conn: sqlite3.Connection) -> None:
    """WAL mode, waiting (bounded) for other openers: switching a new file's journal mode takes a
    lock that SQLite refuses at once, without its busy handler, while another connection does the
    same (several processes or stores opening one new database together)."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
