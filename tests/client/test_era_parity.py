"""Era parity: a server that answers ``server/discover`` but lists nothing in 2026-07-28 while
its legacy era serves tools (FastMCP 4.1's proxy does exactly this) is used in the legacy era,
so auto mode lists the same tools as a legacy pin. The faulty server plays it with ``--era both
--hollow-modern``; its record says what each process received.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
import trio.testing
from _demo import per_process
from _faulty import TOOLS_LISTED, Record, faulty_argv

import mcpwire
from mcpwire.client import DEFAULT_ERA_CACHE
from mcpwire.protocol.versions import Era

#: long enough that a loaded machine never sends initialize beside a slow probe answer
PROBE = 10.0


@pytest.fixture(autouse=True)
def empty_caches() -> Iterator[None]:
    DEFAULT_ERA_CACHE.clear()
    yield
    DEFAULT_ERA_CACHE.clear()


async def test_a_hollow_modern_server_is_used_in_the_legacy_era(record: Record) -> None:
    """The first listing comes back empty while the server declares tools: the server is
    restarted (a stdio server may refuse a handshake after 2026-07-28 traffic) and accepts
    ``initialize``, so the connection goes on in the legacy era and lists every tool. The verdict
    is cached: the next connection starts in the legacy era, with no probe."""
    argv = faulty_argv(*record.flags, "--era", "both", "--hollow-modern")
    with trio.fail_after(15):
        async with mcpwire.open_client(argv, name="faulty", probe_timeout=PROBE) as client:
            assert client.era is Era.MODERN
            tools = await client.list_tools()
            assert (client.era, client.protocol_version) == (Era.LEGACY, "2025-11-25")
            assert (await client.call_tool("echo", {"text": "hi"})).text() == "hi"
            assert client.statistics().restarts == 1
        async with mcpwire.open_client(argv, name="faulty", probe_timeout=PROBE) as again:
            assert again.era is Era.LEGACY
            assert len(await again.list_tools()) == TOOLS_LISTED
    assert len(tools) == TOOLS_LISTED
    assert per_process(record) == [
        ["server/discover", "tools/list"],
        ["initialize", "notifications/initialized", "tools/list", "tools/call"],
        ["initialize", "notifications/initialized", "tools/list"],
    ]


async def test_a_dual_era_server_listing_tools_stays_modern(record: Record) -> None:
    """A server that lists its tools in 2026-07-28 is never cross-checked."""
    argv = faulty_argv(*record.flags, "--era", "both")
    with trio.fail_after(15):
        async with mcpwire.open_client(argv, name="faulty", probe_timeout=PROBE) as client:
            assert len(await client.list_tools()) == TOOLS_LISTED
            assert client.era is Era.MODERN
    assert per_process(record) == [["server/discover", "tools/list"]]


async def test_an_empty_modern_only_server_stays_modern_and_is_checked_once(record: Record) -> None:
    """A 2026-07-28-only server with no tools refuses ``initialize``: it stays in the 2026-07-28
    era with its empty list, and neither a second listing nor a second connection asks again."""
    argv = faulty_argv(*record.flags, "--era", "modern", "--hollow-modern")
    with trio.fail_after(15):
        for _ in range(2):
            async with mcpwire.open_client(argv, name="faulty", probe_timeout=PROBE) as client:
                assert await client.list_tools() == []
                assert await client.list_tools() == []
                assert client.era is Era.MODERN
                assert client.protocol_version == "2026-07-28"
    assert per_process(record) == [
        ["server/discover", "tools/list"],
        ["initialize", "tools/list"],
        ["server/discover", "tools/list", "tools/list"],
    ]


@pytest.mark.parametrize("pin", [{"era": "modern"}, {"protocol_version": "2026-07-28"}])
async def test_a_pinned_era_is_never_cross_checked(record: Record, pin: dict[str, str]) -> None:
    """The era override stays available: pinned to 2026-07-28, the empty list is the answer."""
    argv = faulty_argv(*record.flags, "--era", "both", "--hollow-modern")
    with trio.fail_after(15):
        async with mcpwire.open_client(argv, name="faulty", probe_timeout=PROBE, **pin) as client:
            assert await client.list_tools() == []
            assert client.era is Era.MODERN
    assert per_process(record) == [["server/discover", "tools/list"]]


async def test_the_check_waits_while_other_calls_are_in_flight(record: Record) -> None:
    """Switching eras under a call in flight would lose it: while one is pending, an empty listing
    is returned as it is, and the check happens on a later, quieter listing."""
    argv = faulty_argv(*record.flags, "--era", "both", "--hollow-modern")
    with trio.fail_after(15):
        async with mcpwire.open_client(argv, name="faulty", probe_timeout=PROBE) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "hold", {"n": 2, "tag": "a"})
                await trio.testing.wait_all_tasks_blocked()
                assert await client.list_tools() == []
                assert client.era is Era.MODERN
                await client.call_tool("hold", {"n": 2, "tag": "b"})
            assert len(await client.list_tools()) == TOOLS_LISTED
            assert client.era is Era.LEGACY
