"""The era remembered per stdio server command (LC-44): a second connection to the same command
skips the detection it no longer needs, and a cached era that turns out wrong is probed again.

LC-44: "Clients SHOULD cache the result for the lifetime of the server process (stdio) or origin
(HTTP), and MAY persist it across restarts of the same server configuration", re-probing "if the
cached assumption later fails". Each test gets an empty process-wide cache and connects twice or
three times with the same argv; the recording servers say what each process received.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from _demo import demo_spec, per_process
from _faulty import Record, faulty_argv

import mcpwire
from mcpwire.client import DEFAULT_ERA_CACHE
from mcpwire.protocol.versions import Era

LEGACY_HANDSHAKE = ["initialize", "notifications/initialized"]
#: long enough that a loaded machine never sends initialize beside a slow probe answer (the
#: records below are exact)
PROBE = 10.0


@pytest.fixture(autouse=True)
def empty_era_cache() -> Iterator[None]:
    DEFAULT_ERA_CACHE.clear()
    yield
    DEFAULT_ERA_CACHE.clear()


async def test_a_cached_legacy_era_skips_the_probe(record: Record) -> None:
    """The first connection probes ``server/discover`` (rejected) and falls back; the second sends
    ``initialize`` straight away."""
    spec = demo_spec(record, "--era", "legacy")
    with trio.fail_after(10):
        for _ in range(2):
            async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
                assert client.era is Era.LEGACY
                assert client.statistics().restarts == 0
    assert per_process(record) == [["server/discover", *LEGACY_HANDSHAKE], LEGACY_HANDSHAKE]


async def test_a_cached_modern_era_waits_for_a_slow_discover_without_initialize(record: Record) -> None:
    """A modern server answering ``server/discover`` after 1 s: the first connection sends
    ``initialize`` too when the 0.3 s probe timeout passes (in case the server is legacy); the
    second knows it is modern and only waits for the answer."""
    argv = faulty_argv(*record.flags, "--era", "modern", "--discover-delay", "1.0")
    with trio.fail_after(15):
        for _ in range(2):
            async with mcpwire.open_client(argv, name="faulty", probe_timeout=0.3) as client:
                assert client.era is Era.MODERN
    assert per_process(record) == [["server/discover", "initialize"], ["server/discover"]]


async def test_a_cached_legacy_era_that_fails_is_probed_again(record: Record, tmp_path: Path) -> None:
    """LC-44: the same command now starts a modern-only server; ``initialize`` (from the cached
    era) is rejected, so the server is restarted and probed: modern. The cache now says modern, so a
    third connection goes straight to ``server/discover``."""
    era_file = tmp_path / "era"
    era_file.write_text("legacy")
    spec = demo_spec(record, "--era-file", str(era_file))
    with trio.fail_after(15):
        async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
            assert client.era is Era.LEGACY
        era_file.write_text("modern")
        async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
            assert (client.era, client.protocol_version) == (Era.MODERN, "2026-07-28")
            assert client.statistics().restarts == 1
            assert (await client.call_tool("echo", {"text": "re-probed"})).text() == "re-probed"
        async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
            assert client.era is Era.MODERN
            assert client.statistics().restarts == 0
    assert per_process(record) == [
        ["server/discover", *LEGACY_HANDSHAKE],
        ["initialize"],
        ["server/discover", "tools/call"],
        ["server/discover"],
    ]


async def test_a_cached_modern_era_that_fails_is_probed_again(record: Record, tmp_path: Path) -> None:
    """LC-44 the other way: the command now starts a legacy-only server; the cached era's
    ``server/discover`` is rejected, so the server is restarted and detection runs in full: legacy."""
    era_file = tmp_path / "era"
    era_file.write_text("modern")
    spec = demo_spec(record, "--era-file", str(era_file))
    with trio.fail_after(15):
        async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
            assert client.era is Era.MODERN
        era_file.write_text("legacy")
        async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
            assert (client.era, client.protocol_version) == (Era.LEGACY, "2025-11-25")
            assert client.statistics().restarts == 1
        async with mcpwire.open_client(spec, probe_timeout=PROBE) as client:
            assert client.era is Era.LEGACY
    assert per_process(record) == [
        ["server/discover"],
        ["server/discover"],
        ["server/discover", *LEGACY_HANDSHAKE],
        LEGACY_HANDSHAKE,
    ]


async def test_without_the_cache_every_connection_probes(record: Record) -> None:
    """``era_cache=False``: nothing is remembered, each connection detects the era again."""
    spec = demo_spec(record, "--era", "legacy")
    with trio.fail_after(10):
        for _ in range(2):
            async with mcpwire.open_client(spec, era_cache=False) as client:
                assert client.era is Era.LEGACY
    assert per_process(record) == [["server/discover", *LEGACY_HANDSHAKE]] * 2
