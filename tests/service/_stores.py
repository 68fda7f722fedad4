"""The database fixtures the service's tests and the agent's share: a real PostgreSQL cluster for
the session, and the URL of an empty database on each backend (the same tests run on SQLite and
on PostgreSQL). A conftest imports them to offer them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _pg import PostgresServer, running_postgres


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
