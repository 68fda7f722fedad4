"""The trio entry points awaited from asyncio fail at once, in one line naming mcpwire.aio."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import mcpwire
from mcpwire.client import require_trio


async def _enter_client() -> None:
    async with mcpwire.open_client(["true"]):
        pass


async def _connect_client() -> None:
    await mcpwire.connect_client(None, ["true"])  # type: ignore[arg-type]


async def _enter_host() -> None:
    async with mcpwire.Host():
        pass


def _in_asyncio(entry: Callable[[], Awaitable[Any]]) -> None:
    async def main() -> None:
        await asyncio.wait_for(entry(), timeout=10)

    asyncio.run(main())


_SAYS = r" runs under trio \(trio\.run\), not here; from asyncio use mcpwire\.aio\."


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (_enter_client, rf"^mcpwire\.open_client{_SAYS}open_client$"),
        (_connect_client, rf"^mcpwire\.connect_client{_SAYS}open_client$"),
        (_enter_host, rf"^mcpwire\.Host{_SAYS}Host$"),
    ],
    ids=["open_client", "connect_client", "Host"],
)
def test_a_trio_entry_point_under_asyncio_says_where_to_go(entry: Callable[[], Awaitable[Any]], message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        _in_asyncio(entry)


async def test_under_trio_the_check_passes() -> None:
    require_trio("mcpwire.open_client", "open_client")
