"""The SQLite driver: the standard library's ``sqlite3``, off the trio thread, in WAL mode.

Theory of operation: one connection, used by one worker thread at a time (a capacity limiter of
one, which is fair, so calls run in arrival order). Write transactions start with ``BEGIN
IMMEDIATE`` so two processes sharing the file queue on the lock (``busy_timeout``) instead of
failing on upgrade. ``journal_mode=WAL`` lets readers in other processes run during a write;
``synchronous=NORMAL`` (the default) makes every commit durable before it returns against the
process dying (a crash, SIGKILL): in WAL mode a committed transaction is in the write-ahead log,
which the operating system keeps when the process is gone, and is synced at each checkpoint.
``synchronous=FULL`` (``?synchronous=full`` in the URL) also syncs the log at every commit, so a
commit survives the machine losing power, at the cost of one fsync per commit (the service
commits audit records in groups, so one per group of calls that finish together, not per
record).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import trio

from ..localfiles import data_folder, private_file, private_folder
from .base import Transaction
from .schema import Dialect
from .types import StoreError

__all__ = ["BUSY_TIMEOUT", "SqliteDriver", "SyncMode"]

#: how a commit is made durable: ``normal`` against the process dying, ``full`` also against power loss
SyncMode = Literal["normal", "full"]

log = logging.getLogger("mcpwire.service.store")
T = TypeVar("T")

#: seconds a write waits for another process's write lock before failing
BUSY_TIMEOUT: Final = 10.0


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
        self._limiter = trio.CapacityLimiter(1)
        self._closed = False
        self._guard = threading.Lock()

    async def open(self) -> None:
        await trio.to_thread.run_sync(self._connect, limiter=self._limiter)

    def _connect(self) -> None:
        try:
            if self.path != ":memory:":
                _private_database(Path(self.path))
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
            _set_wal(conn)
            if self.path != ":memory:":
                for suffix in ("-wal", "-shm"):  # SQLite makes them as open as the database; be sure
                    private_file(Path(self.path + suffix))
            conn.execute(f"PRAGMA synchronous={'FULL' if self.synchronous == 'full' else 'NORMAL'}")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the database {self.location}: {exc}") from exc
        self._conn = conn

    async def call(self, fn: Callable[[Transaction], T], *, write: bool) -> T:
        if self._closed or self._conn is None:
            raise StoreError(f"the database {self.location} is closed")
        return await trio.to_thread.run_sync(self._run, fn, write, limiter=self._limiter)

    def _run(self, fn: Callable[[Transaction], T], write: bool) -> T:
        conn = self._conn
        if conn is None:
            raise StoreError(f"the database {self.location} is closed")
        with self._guard:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = fn(_Tx(conn))
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"the database {self.location} failed: {exc}") from exc

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(conn.close, limiter=self._limiter)


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
