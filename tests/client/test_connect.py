"""Connecting to a faulty real subprocess: era detection against odd servers, handshake timeouts
and bad versions, and servers that cannot be started at all.

Each test starts ``fixtures/faulty_server.py`` (or fails to start something) and asserts the exact
outcome: the era decided, the error type and message, how long connecting took, what the server
received and that no process is left behind. Every test bounds itself with ``trio.fail_after``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from _faulty import FAULTY, Record, open_faulty, process_gone

import mcpwire
from mcpwire import ConnectError, ServerNotFound, StdioServer, UnsupportedVersion
from mcpwire.protocol.versions import Era

DISCOVER_REJECTED = "server/discover answered error -32601: Method not found"


def methods(record: Record) -> list[str]:
    return [m.get("method", "<response>") for m in record.messages()]


def assert_all_gone(record: Record) -> None:
    pids = record.pids()
    assert pids, "the server never started"
    assert all(process_gone(pid) for pid in pids), pids


# -- LC-40, LC-41, LC-45: era detection ------------------------------------------------------------


async def test_a_legacy_server_rejecting_the_probe_is_legacy_without_waiting(record: Record) -> None:
    """LC-40, LC-41: -32601 for ``server/discover`` means legacy: ``initialize`` follows at once
    (no probe timeout is spent), then ``notifications/initialized``."""
    with trio.fail_after(10):
        start = trio.current_time()
        async with open_faulty(*record.flags, probe_timeout=5.0) as client:
            elapsed = trio.current_time() - start
            assert (client.era, client.protocol_version) == (Era.LEGACY, "2025-11-25")
            assert client.server_info is not None and client.server_info.name == "faulty"
            assert client.statistics().restarts == 0
    assert elapsed < 2.0, f"connecting took {elapsed:.2f}s"
    assert methods(record) == ["server/discover", "initialize", "notifications/initialized"]


async def test_a_silent_legacy_server_costs_only_the_probe_timeout(record: Record) -> None:
    """LC-40 ("no response within a reasonable timeout: the server is legacy"), LC-45 ("A
    server/discover probe stalls against silent legacy stdio servers"): the probe is never
    answered; connecting takes about the default 0.5 s probe timeout, not seconds, and the era is
    legacy."""
    with trio.fail_after(10):
        start = trio.current_time()
        async with open_faulty(*record.flags, "--discover", "silent") as client:
            elapsed = trio.current_time() - start
            assert client.era is Era.LEGACY
            assert (await client.call_tool("echo", {"text": "hi"})).text() == "hi"
            stats = client.statistics()
    assert 0.5 <= elapsed < 1.5, f"connecting took {elapsed:.2f}s"
    assert methods(record) == ["server/discover", "initialize", "notifications/initialized", "tools/call"]
    assert (stats.restarts, stats.pending, stats.unknown_responses) == (0, 0, 0)


async def test_a_legacy_server_exiting_on_the_probe_is_restarted(record: Record) -> None:
    """LC-45 ("handle a legacy server that exits on the unexpected request (restart it and go
    straight to initialize)"): the first process exits on ``server/discover``; a second one is
    started and gets ``initialize``; ``restarts`` is 1. (A long probe timeout keeps the exit,
    not the timeout, deciding.)"""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, "--discover", "exit", probe_timeout=5.0) as client:
            assert client.era is Era.LEGACY
            assert (await client.call_tool("echo", {"text": "again"})).text() == "again"
            pid = client.pid
            stats = client.statistics()
    first, second = record.pids()
    assert pid == second != first
    assert stats.restarts == 1
    assert methods(record) == ["server/discover", "initialize", "notifications/initialized", "tools/call"]
    assert_all_gone(record)


async def test_a_slow_legacy_server_exiting_on_the_probe_is_restarted(record: Record) -> None:
    """LC-45: like an ``npx -y`` launch, the server reads nothing for 1 s, so the 0.3 s probe
    timeout sends ``initialize`` too; then the server exits on the probe (before reading
    ``initialize``). It never answered anything: it should be restarted and get ``initialize``."""
    with trio.fail_after(15):
        async with open_faulty(
            *record.flags, "--discover", "exit", "--startup-delay", "1.0", probe_timeout=0.3
        ) as client:
            assert client.era is Era.LEGACY
            stats = client.statistics()
    assert stats.restarts == 1
    assert_all_gone(record)


async def test_a_modern_server_answering_the_probe_late_is_modern(record: Record) -> None:
    """LC-40, LC-45 (lifecycle: "A timed-out probe is not a verdict"): the discover answer comes
    1.5 s late while ``initialize``, sent at the probe timeout, is rejected with -32601 at once; the
    late DiscoverResult still decides: modern."""
    with trio.fail_after(10):
        start = trio.current_time()
        async with open_faulty(
            *record.flags, "--era", "modern", "--discover-delay", "1.5", probe_timeout=0.3
        ) as client:
            elapsed = trio.current_time() - start
            assert (client.era, client.protocol_version) == (Era.MODERN, "2026-07-28")
            assert client.server_info is not None and client.server_info.name == "faulty"
            assert (await client.call_tool("echo", {"text": "modern"})).text() == "modern"
    assert 1.5 <= elapsed < 3.0, f"connecting took {elapsed:.2f}s"
    messages = record.messages()
    assert [m.get("method") for m in messages] == ["server/discover", "initialize", "tools/call"]
    meta = messages[2]["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"  # LC-20


async def test_a_modern_server_slow_to_start_is_modern(record: Record) -> None:
    """LC-40, LC-45: the server reads nothing for 1.5 s (``npx -y`` downloading), then answers the
    probe and rejects the ``initialize`` queued behind it: modern, and nothing was restarted."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, "--era", "modern", "--startup-delay", "1.5", probe_timeout=0.3) as client:
            assert client.era is Era.MODERN
            assert client.statistics().restarts == 0
    assert methods(record) == ["server/discover", "initialize"]


# -- LC-09, LC-10: versions ----------------------------------------------------------------------


async def test_a_bogus_protocol_version_is_refused(record: Record) -> None:
    """LC-10 ("If the client does not support the version in the server's response, it SHOULD
    disconnect"; the schema says MUST): ``initialize`` answered with 1999-01-01 raises
    UnsupportedVersion naming it, and the server is shut down."""
    with trio.fail_after(10), pytest.raises(UnsupportedVersion) as info:
        async with open_faulty(*record.flags, "--protocol-version", "1999-01-01", probe_timeout=5.0):
            pytest.fail("connected")
    assert str(info.value) == (
        f"cannot connect to server 'faulty': {DISCOVER_REJECTED}; "
        "initialize answered protocolVersion '1999-01-01', which mcpwire does not offer"
    )
    assert info.value.offered == ("1999-01-01",)
    assert "notifications/initialized" not in methods(record)
    assert_all_gone(record)


async def test_an_older_legacy_version_is_accepted(record: Record) -> None:
    """LC-11: the server counter-offers an older revision it supports; the client speaks it."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, "--protocol-version", "2024-11-05") as client:
            assert (client.era, client.protocol_version) == (Era.LEGACY, "2024-11-05")


# -- LC-60: a slow handshake ----------------------------------------------------------------------


async def test_a_slow_initialize_hits_the_connect_timeout(record: Record) -> None:
    """LC-60, LC-06: ``initialize`` answered after 30 s with ``connect_timeout=3``: ConnectError after
    3 s saying what happened; ``initialize`` is not cancelled on the wire; the server is gone."""
    with trio.fail_after(15):
        start = trio.current_time()
        with pytest.raises(ConnectError) as info:
            async with open_faulty(*record.flags, "--initialize-delay", "30", connect_timeout=3, probe_timeout=3.0):
                pytest.fail("connected")
        elapsed = trio.current_time() - start
    assert type(info.value) is ConnectError
    assert str(info.value) == f"server 'faulty' did not complete the handshake within 3s ({DISCOVER_REJECTED})"
    assert 3.0 <= elapsed < 6.0, f"failing took {elapsed:.2f}s"
    assert methods(record) == ["server/discover", "initialize"]  # no notifications/cancelled (LC-06)
    assert_all_gone(record)


async def test_a_silent_server_fails_to_connect_within_the_connect_timeout(record: Record) -> None:
    """LC-60, LC-40: a server that answers neither the probe nor ``initialize``: ConnectError after
    ``connect_timeout``, listing what was tried."""
    with trio.fail_after(10):
        with pytest.raises(ConnectError) as info:
            async with open_faulty(
                *record.flags, "--discover", "silent", "--initialize-delay", "60", connect_timeout=1, probe_timeout=0.2
            ):
                pytest.fail("connected")
    assert str(info.value) == (
        "server 'faulty' did not complete the handshake within 1s "
        "(server/discover got no answer within the probe timeout)"
    )
    assert_all_gone(record)


# -- ST-01: servers that cannot be started ----------------------------------------------------------


async def test_a_missing_command_raises_server_not_found() -> None:
    """ST-01: a command that is not on PATH raises ServerNotFound naming it, with the fix."""
    with trio.fail_after(10), pytest.raises(ServerNotFound) as info:
        async with mcpwire.open_client(["mcpwire-no-such-server", "--stdio"]):
            pytest.fail("connected")
    assert str(info.value) == (
        "cannot start server 'mcpwire-no-such-server': command 'mcpwire-no-such-server' not found "
        "(is it installed and on PATH?)"
    )


async def test_server_not_found_keeps_its_cause() -> None:
    """STYLE ("Errors are mapped once, at the boundary, with ``from exc``"; TransportError: "details
    are in ``__cause__``"): ServerNotFound from ``open_client`` chains the OS error."""
    with trio.fail_after(10), pytest.raises(ServerNotFound) as info:
        async with mcpwire.open_client(["mcpwire-no-such-server"]):
            pytest.fail("connected")
    assert isinstance(info.value.__cause__, FileNotFoundError)


async def test_a_missing_working_directory_raises_connect_error(tmp_path: Path) -> None:
    """ST-01: a ``cwd`` that does not exist is a ConnectError naming the directory, not a
    misleading ServerNotFound for the (existing) command."""
    missing = tmp_path / "missing"
    spec = StdioServer(command=sys.executable, args=("-u", str(FAULTY)), cwd=str(missing), name="faulty")
    with trio.fail_after(10), pytest.raises(ConnectError) as info:
        async with mcpwire.open_client(spec):
            pytest.fail("connected")
    assert type(info.value) is ConnectError
    assert str(info.value) == f"cannot start server 'faulty': working directory {str(missing)!r} does not exist"


async def test_a_command_that_is_not_executable_raises_connect_error(tmp_path: Path) -> None:
    """ST-01: a command without the execute permission is a ConnectError with the OS reason."""
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    with trio.fail_after(10), pytest.raises(ConnectError) as info:
        async with mcpwire.open_client([str(script)]):
            pytest.fail("connected")
    assert type(info.value) is ConnectError
    assert (
        str(info.value)
        == f"cannot start server 'server.sh' ({str(script)!r}): [Errno 13] Permission denied: {str(script)!r}"
    )


async def test_a_server_exiting_at_once_fails_the_handshake_with_its_stderr() -> None:
    """LC-51, LC-54: a command that prints an error and exits before answering: ServerGone with
    the exit status and its stderr, after one restart attempt (LC-45), not a hang. It wrote
    nothing to stdout, so it crashed on start (whatever the probe did): the message says so."""
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('config missing\\n'); sys.exit(4)"]
    with trio.fail_after(10), pytest.raises(mcpwire.ServerGone) as info:
        async with mcpwire.open_client(argv, name="broken", era_cache=False):
            pytest.fail("connected")
    assert info.value.returncode == 4
    assert info.value.stderr_tail == ("config missing",)
    assert str(info.value) == (
        "server 'broken' crashed on start: it exited with status 4 before answering anything (started twice: "
        "a restart, in case the server/discover probe had made it exit, ended the same way)"
        "\nlast stderr lines:\n  config missing"
    )


async def test_a_server_exiting_after_answering_the_probe_is_not_said_to_crash() -> None:
    """A server that answered something and then exited is not a crash on start: the message
    says it exited during the handshake, with what detection saw."""
    answer = '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}'
    argv = [sys.executable, "-c", f"import sys; print({answer!r}, flush=True); sys.exit(3)"]
    with trio.fail_after(10), pytest.raises(mcpwire.ServerGone) as info:
        async with mcpwire.open_client(argv, name="short", era_cache=False):
            pytest.fail("connected")
    assert info.value.returncode == 3
    assert str(info.value) == "server 'short' exited during the handshake (server/discover answered error -32601: no)"
