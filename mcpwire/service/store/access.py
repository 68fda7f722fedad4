"""Who may use the service: API tokens and console sessions, kept by the store.

Theory of operation: neither a token nor a session id is ever stored, only its SHA-256 (both are
random, 256 bits: a hash is enough, and a stolen database yields no credential). A token has a
name (unique, for ever: a revoked name is not given out again, so an audit record naming it keeps
one meaning) and a role. A console session belongs to one identity (a token's name or a signed-in
user) and ends when its owner logs out, when it has been idle too long, or when it is too old;
every replica on the store sees the end at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import msgspec

from .types import StoreError

__all__ = ["AccessStore", "SessionRow", "TokenRow"]

T = TypeVar("T")


class TokenRow(msgspec.Struct, frozen=True, kw_only=True):
    """An API token: its name, role and hash (never the token itself)."""

    name: str
    role: str
    hash: str
    created_at: float
    revoked_at: float | None = None


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """A console session, by the hash of its id: whose it is, and its times."""

    hash: str
    kind: str
    name: str
    role: str
    created_at: float
    seen_at: float
    ended_at: float | None = None


class _Tx(Protocol):
    def all(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]: ...

    def one(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None: ...

    def run(self, sql: str, params: Any = ()) -> int: ...


class _Driver(Protocol):
    async def call(self, fn: Callable[[Any], T], *, write: bool) -> T: ...


_TOKEN_COLUMNS = "name, role, hash, created_at, revoked_at"
_SESSION_COLUMNS = "hash, kind, name, role, created_at, seen_at, ended_at"


def _token(row: tuple[Any, ...]) -> TokenRow:
    name, role, hash_, created, revoked = row
    return TokenRow(name=name, role=role, hash=hash_, created_at=created, revoked_at=revoked)


def _session(row: tuple[Any, ...]) -> SessionRow:
    hash_, kind, name, role, created, seen, ended = row
    return SessionRow(hash=hash_, kind=kind, name=name, role=role, created_at=created, seen_at=seen, ended_at=ended)


class AccessStore:
    """The tokens and sessions of one store (``store.access``)."""

    def __init__(self, driver: _Driver) -> None:
        self._driver = driver

    # -- tokens -------------------------------------------------------------------------------

    async def create_token(self, name: str, role: str, hash_: str) -> TokenRow:
        """Stores a new token.

        Raises:
            StoreError: a token of that name exists (or existed: names are not reused).
        """
        row = TokenRow(name=name, role=role, hash=hash_, created_at=time.time())

        def create(tx: _Tx) -> bool:
            if tx.one("SELECT 1 FROM tokens WHERE name = ?", (name,)) is not None:
                return False
            tx.run(
                f"INSERT INTO tokens ({_TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                (row.name, row.role, row.hash, row.created_at, None),
            )
            return True

        if not await self._driver.call(create, write=True):
            raise StoreError(f"a token named {name!r} exists or existed; names are not reused: choose another")
        return row

    async def tokens(self) -> list[TokenRow]:
        """Every token, revoked ones too, by name."""
        rows = await self._driver.call(
            lambda tx: tx.all(f"SELECT {_TOKEN_COLUMNS} FROM tokens ORDER BY name"), write=False
        )
        return [_token(row) for row in rows]

    async def token_by_hash(self, hash_: str) -> TokenRow | None:
        """The token with this hash (revoked or not), or None."""
        row = await self._driver.call(
            lambda tx: tx.one(f"SELECT {_TOKEN_COLUMNS} FROM tokens WHERE hash = ?", (hash_,)), write=False
        )
        return None if row is None else _token(row)

    async def revoke_token(self, name: str) -> TokenRow | None:
        """Revokes a token (and ends the console sessions signed in with it); the row as it is
        now, or None when there is no token of that name."""
        now = time.time()

        def revoke(tx: _Tx) -> tuple[Any, ...] | None:
            tx.run("UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (now, name))
            tx.run(
                "UPDATE sessions SET ended_at = ? WHERE kind = 'token' AND name = ? AND ended_at IS NULL", (now, name)
            )
            return tx.one(f"SELECT {_TOKEN_COLUMNS} FROM tokens WHERE name = ?", (name,))

        row = await self._driver.call(revoke, write=True)
        return None if row is None else _token(row)

    # -- console sessions -----------------------------------------------------------------------

    async def start_session(self, hash_: str, *, kind: str, name: str, role: str) -> SessionRow:
        now = time.time()
        row = SessionRow(hash=hash_, kind=kind, name=name, role=role, created_at=now, seen_at=now)
        await self._driver.call(
            lambda tx: tx.run(
                f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (row.hash, row.kind, row.name, row.role, row.created_at, row.seen_at, None),
            ),
            write=True,
        )
        return row

    async def session(self, hash_: str) -> SessionRow | None:
        row = await self._driver.call(
            lambda tx: tx.one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE hash = ?", (hash_,)), write=False
        )
        return None if row is None else _session(row)

    async def touch_session(self, hash_: str, when: float) -> None:
        await self._driver.call(
            lambda tx: tx.run("UPDATE sessions SET seen_at = ? WHERE hash = ? AND ended_at IS NULL", (when, hash_)),
            write=True,
        )

    async def end_session(self, hash_: str) -> None:
        await self._driver.call(
            lambda tx: tx.run(
                "UPDATE sessions SET ended_at = ? WHERE hash = ? AND ended_at IS NULL", (time.time(), hash_)
            ),
            write=True,
        )

    async def forget_sessions(self, before: float) -> int:
        """Deletes sessions that ended or were last seen before ``before``; how many."""
        return await self._driver.call(
            lambda tx: tx.run("DELETE FROM sessions WHERE seen_at < ? OR ended_at < ?", (before, before)),
            write=True,
        )
