"""Where the service keeps what must outlive it: one :class:`Store` interface, two databases.

``async with await open_store(url) as store:`` opens and migrates the database named by ``url``:

- ``None``: SQLite at the per-user data path (:func:`default_database_path`);
- ``sqlite:///absolute/path.db``, ``sqlite:relative.db`` or a plain file path: SQLite;
- ``sqlite::memory:``: a private in-memory SQLite database (tests);
- ``postgresql://user:pass@host:port/db`` (or ``postgres://``): PostgreSQL, shared by replicas.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from ...redaction import redact_url
from ..localfiles import data_folder
from .access import SessionRow, TokenRow
from .base import MAX_PAGE, Store
from .schema import MIGRATIONS, Migration
from .types import (
    ApprovalRow,
    AuditIn,
    AuditPage,
    AuditRow,
    CheckRunRow,
    ConversationRow,
    MessageRow,
    PinRow,
    ServerRow,
    StoreError,
)

if TYPE_CHECKING:
    from .sqlite import SyncMode

__all__ = [
    "MAX_PAGE",
    "MIGRATIONS",
    "ApprovalRow",
    "AuditIn",
    "AuditPage",
    "AuditRow",
    "CheckRunRow",
    "ConversationRow",
    "MessageRow",
    "Migration",
    "PinRow",
    "ServerRow",
    "SessionRow",
    "Store",
    "StoreError",
    "TokenRow",
    "default_database_path",
    "describe_url",
    "open_store",
]


def default_database_path() -> Path:
    """``$XDG_DATA_HOME/mcpwire/service.db`` (``~/.local/share/mcpwire/service.db`` by default)."""
    return data_folder() / "service.db"


def _sqlite_path(url: str) -> str:
    if url in ("sqlite::memory:", "sqlite:///:memory:"):
        return ":memory:"
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        if not rest.startswith("/"):
            raise StoreError(f"--db {url!r}: expected sqlite:///PATH (three slashes, then the path)")
        return rest
    if url.startswith("sqlite:"):
        return url[len("sqlite:") :]
    return url


def _sqlite_options(url: str, query: str) -> SyncMode:
    """The options a SQLite URL may take: ``synchronous=normal`` (the default: a commit survives
    the process dying) or ``synchronous=full`` (it survives the machine losing power too, at an
    fsync per commit)."""
    options = urllib.parse.parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"synchronous"})
    if unknown:
        raise StoreError(f"--db {url!r}: unknown option {unknown[0]!r} (a SQLite URL takes ?synchronous=normal|full)")
    value = options.get("synchronous", ["normal"])[-1].lower()
    if value not in ("normal", "full"):
        raise StoreError(f"--db {url!r}: synchronous={value!r}: expected normal or full")
    return "full" if value == "full" else "normal"


def describe_url(url: str | None) -> str:
    """The database ``url`` names, fit to show (credentials redacted)."""
    if url is None:
        return f"sqlite:///{default_database_path()}"
    return redact_url(url)


async def open_store(url: str | None = None, *, migrations: tuple[Migration, ...] = tuple(MIGRATIONS)) -> Store:
    """Opens the database ``url`` names and brings its schema up to date.

    Raises:
        StoreError: the URL is not understood, the database cannot be reached, or its schema is
            newer than this code.

    Cancellation: a migration step already running completes first.
    """
    from .base import Driver

    driver: Driver
    if url is not None and url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresDriver

        pg = PostgresDriver(url)
        await pg.open()
        driver = pg
    elif url is None or url.startswith("sqlite:") or "://" not in url:
        from .sqlite import SqliteDriver

        synchronous: SyncMode = "normal"
        if url is not None and "?" in url:
            url, _, query = url.partition("?")
            synchronous = _sqlite_options(url, query)
        path = str(default_database_path()) if url is None else _sqlite_path(url)
        if not path:
            raise StoreError(f"--db {url!r}: no path after 'sqlite:'")
        lite = SqliteDriver(path, synchronous=synchronous)
        await lite.open()
        driver = lite
    else:
        raise StoreError(f"--db {redact_url(url)!r}: expected sqlite:///PATH or postgresql://USER@HOST/DB")
    store = Store(driver, migrations=migrations)
    try:
        await store.migrate()
        if store.journal_folder is not None:
            await store.adopt_audit_journals()  # (what processes that are gone left journaled)
    except BaseException:
        await store.aclose()
        raise
    return store
