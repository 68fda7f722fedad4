"""Fixtures of the service tests: a real PostgreSQL cluster for the session, and a fresh store per
test on each backend (the same tests run on SQLite and on PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _stores import db_url, postgres

__all__ = ["db_url", "postgres", "store"]  # the shared fixtures are offered here

from mcpwire.service.store import Store, open_store


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    try:
        yield opened
    finally:
        await opened.aclose()
