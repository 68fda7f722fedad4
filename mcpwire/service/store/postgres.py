"""The PostgreSQL driver: psycopg 3's blocking connections, each used by one worker thread.

Theory of operation: a small pool of connections (made on demand, up to ``pool_size``) in
autocommit mode; each call takes a free connection, runs its function inside ``conn.transaction()``
in a worker thread and gives the connection back. A connection that broke (the server restarted,
the network dropped) is closed and the call fails with :class:`StoreError`; the next call connects
again. Every statement is bounded by ``statement_timeout`` and every connection attempt by
``connect_timeout``. The shared SQL uses ``?`` placeholders; they become psycopg's ``%s`` here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from ..._version import install_hint
from ...redaction import redact_url
from .base import Transaction, insert_sql, rows_per_insert
from .schema import Dialect
from .types import StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresDriver"]

log = logging.getLogger("mcpwire.service.store")
T = TypeVar("T")

CONNECT_TIMEOUT: Final = 10
STATEMENT_TIMEOUT: Final = 30.0


class _Tx:
    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        self._cur.execute(sql.replace("?", "%s"), params)
        return self._cur.fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        self._cur.execute(sql.replace("?", "%s"), params)
        return self._cur.fetchone()

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        self._cur.execute(sql.replace("?", "%s"), params)
        return self._cur.rowcount

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int]:
        # one round trip per chunk; identity values are drawn in the rows' order, so the ids
        # returned, sorted, are the rows' ids in order
        ids: list[int] = []
        step = rows_per_insert(columns)
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            sql = insert_sql(table, tuple(columns), len(chunk)).replace("?", "%s") + " RETURNING id"
            self._cur.execute(sql, [v for r in chunk for v in r])
            ids.extend(sorted(int(row[0]) for row in self._cur.fetchall()))
        return ids


class PostgresDriver:
    """A PostgreSQL database at ``url`` (``postgresql://user:pass@host:port/db``).

    Raises:
        StoreError: (from :meth:`open`) psycopg is missing or the server cannot be reached.
    """

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 4) -> None:
        self._url = url
        self.location = redact_url(url)
        self._limiter = trio.CapacityLimiter(pool_size)
        self._free: list[psycopg.Connection[Any]] = []
        self._all: set[psycopg.Connection[Any]] = set()
        self._closed = False

    async def open(self) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise StoreError(f"PostgreSQL needs psycopg: {install_hint('postgres')} ({exc})") from None
        await self.call(lambda tx: tx.one("SELECT 1"), write=False)

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        try:
            conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                application_name="mcpwire-serve",
                options=f"-c statement_timeout={int(STATEMENT_TIMEOUT * 1000)}",
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the database {self.location}: {_first_line(exc)}") from None
        self._all.add(conn)
        return conn

    def _run(self, conn: psycopg.Connection[Any], fn: Callable[[Transaction], T]) -> T:
        import psycopg

        try:
            with conn.transaction(), conn.cursor() as cur:
                return fn(_Tx(cur))
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                self._discard(conn)
            raise StoreError(f"the database {self.location} failed: {_first_line(exc)}") from exc

    def _discard(self, conn: psycopg.Connection[Any]) -> None:
        self._all.discard(conn)
        try:
            conn.close()
        except Exception:  # pragma: no cover - closing a broken connection
            pass

    def insert_now(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int] | None:
        return None  # every statement is a round trip to the server: never without a wait

    async def call(self, fn: Callable[[Transaction], T], *, write: bool, quick: bool = False) -> T:
        # (``quick`` changes nothing here: every statement is a round trip to the server)
        if self._closed:
            raise StoreError(f"the database {self.location} is closed")
        async with self._limiter:
            conn = self._free.pop() if self._free else None
            if conn is None or conn.closed:
                conn = await trio.to_thread.run_sync(self._connect)
            try:
                return await trio.to_thread.run_sync(self._run, conn, fn)
            finally:
                if conn.broken or conn.closed or self._closed:
                    self._discard(conn)
                else:
                    self._free.append(conn)

    async def listen(self, channel: str, wake: Callable[[], None], ready: Callable[[], None] | None = None) -> None:
        """Calls ``wake`` (in trio) for every notification on ``channel``, on a connection of its
        own, until cancelled; ``ready`` once it listens.

        Raises:
            StoreError: the connection could not be made or broke.

        Cancellation: returns at once; the listening thread ends within a second.
        """
        import psycopg

        token = trio.lowlevel.current_trio_token()
        stop = threading.Event()

        def loop() -> None:
            conn = self._connect()
            self._all.discard(conn)  # not one of the pool's
            try:
                conn.execute(f"LISTEN {channel}")
                if ready is not None:
                    trio.from_thread.run_sync(ready, trio_token=token)
                while not stop.is_set():
                    for _ in conn.notifies(timeout=1.0, stop_after=1):
                        if stop.is_set():
                            return
                        try:
                            trio.from_thread.run_sync(wake, trio_token=token)
                        except trio.RunFinishedError:
                            return
            except psycopg.Error as exc:
                raise StoreError(f"listening on the database {self.location} failed: {_first_line(exc)}") from None
            finally:
                conn.close()

        try:
            await trio.to_thread.run_sync(loop, abandon_on_cancel=True)
        finally:
            stop.set()

    async def aclose(self) -> None:
        self._closed = True
        conns, self._free = list(self._all), []
        self._all.clear()
        with trio.CancelScope(shield=True):
            for conn in conns:
                await trio.to_thread.run_sync(conn.close)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
