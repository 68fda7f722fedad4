"""Fixtures of the service tests: a real PostgreSQL cluster for the session, and a fresh store per
test on each backend (the same tests run on SQLite and on PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _pg import PostgresServer, running_postgres

from mcpwire.service.store import Store, open_store


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty database, on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database()


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    try:
        yield opened
    finally:
        await opened.aclose()
