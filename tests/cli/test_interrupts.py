"""A Ctrl+C that arrives as a ``KeyboardInterrupt`` inside exception groups (trio wraps what its
tasks raise, nested) ends every command as a bare one does: its usual message and exit status, no
traceback; a real error that came with it is logged, not lost. And ``mcpwire serve``, sent SIGINT
while it closes a stdio server that is slow to exit, still closes it (bounded) and exits 130."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from mcpwire.conformance import cli as check_cli
from mcpwire.fuzz import cli as fuzz_cli

from mcpwire import cli
from mcpwire.cliargs import EXIT_SIGINT, interruption, run_cli
from mcpwire.host import cli as host_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from _process import READY_LINE, clean_env, processes_with, start_serve


@pytest.fixture(autouse=True)
def _logs_reach_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Some commands' logging setup (run in-process by other tests) stops mcpwire's records at its
    own handler; here they must reach the root, where caplog reads them."""
    monkeypatch.setattr(logging.getLogger("mcpwire"), "propagate", True)


class _Stop(BaseException):
    """An interrupt of another kind (the fuzzer has its own, carrying the signal)."""


def _cancelled() -> trio.Cancelled:
    async def main() -> trio.Cancelled:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                return exc
        raise AssertionError("not cancelled")  # pragma: no cover

    return trio.run(main)


def _group(*members: BaseException) -> BaseExceptionGroup[BaseException]:
    return BaseExceptionGroup("from a nursery", list(members))


# -- the helper -------------------------------------------------------------------------------------


def test_a_bare_interrupt_is_itself() -> None:
    ki = KeyboardInterrupt()
    assert interruption(ki) is ki


@pytest.mark.parametrize(
    "wrap",
    [
        lambda ki: _group(ki),
        lambda ki: _group(_group(_group(ki))),
        lambda ki: _group(_cancelled(), _group(_cancelled(), ki)),
        lambda ki: _group(_group(_cancelled()), _group(ki, KeyboardInterrupt())),
    ],
    ids=["one-group", "nested", "beside-cancelled", "the-first-of-two"],
)
def test_an_interrupt_inside_groups_is_found(
    wrap: Callable[[KeyboardInterrupt], BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    ki = KeyboardInterrupt()
    assert interruption(wrap(ki)) is ki
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []  # Cancelled is no error


@pytest.mark.parametrize(
    "exc",
    [ValueError("bug"), ExceptionGroup("g", [ValueError("bug"), OSError("gone")]), _group(_cancelled()), SystemExit(3)],
    ids=["error", "errors", "cancelled", "exit"],
)
def test_without_an_interrupt_there_is_none(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    assert interruption(exc) is None
    assert caplog.records == []  # the caller re-raises it; nothing is logged twice


def test_an_interrupt_with_a_real_error_wins_and_the_error_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ki = KeyboardInterrupt()
    bug = RuntimeError("a bug on the way out")
    with caplog.at_level(logging.ERROR, logger="mcpwire.cli"):
        assert interruption(_group(_cancelled(), _group(bug, _group(ki)))) is ki
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.name == "mcpwire.cli"
    assert "unexpected RuntimeError" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[1] is bug


def test_other_kinds_of_interrupt() -> None:
    stop = _Stop()
    assert interruption(_group(_group(stop)), (_Stop, KeyboardInterrupt)) is stop
    assert interruption(_group(_group(stop))) is None  # KeyboardInterrupt only, by default
    assert interruption(_group(KeyboardInterrupt()), (_Stop,)) is None


# -- the shared runner ------------------------------------------------------------------------------


def test_run_cli_an_interrupt_from_a_task_is_130() -> None:
    """trio hands a task's KeyboardInterrupt over inside a group: the status, not a traceback."""

    async def interrupted() -> None:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupted)
            await trio.sleep_forever()
        return 0  # pragma: no cover - interrupted before

    assert run_cli(main) == EXIT_SIGINT


def test_run_cli_an_interrupt_with_a_bug_is_130_and_the_bug_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> int:
        raise _group(ValueError("a bug"), _group(KeyboardInterrupt()))

    with caplog.at_level(logging.ERROR, logger="mcpwire.cli"):
        assert run_cli(main) == EXIT_SIGINT
    assert [(r.getMessage(), type(r.exc_info[1])) for r in caplog.records if r.exc_info] == [
        ("while interrupted: unexpected ValueError", ValueError)
    ]


def test_run_cli_an_error_after_a_signal_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> int:
        try:
            signal.raise_signal(signal.SIGINT)
            await trio.sleep_forever()
        finally:
            raise LookupError("a bug while closing")

    with caplog.at_level(logging.ERROR, logger="mcpwire.cli"):
        assert run_cli(main) == EXIT_SIGINT
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        "after the signal: unexpected LookupError"
    ]


# -- the entry points -------------------------------------------------------------------------------


def test_the_dispatcher_turns_an_escaped_interrupt_into_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What no command caught (a Ctrl+C at a question, before its trio run): one line, 130."""

    def interrupted(argv: list[str]) -> int:
        raise _group(_group(KeyboardInterrupt()))

    monkeypatch.setattr(cli, "_main", interrupted)
    assert cli.main(["login", "http://127.0.0.1:1/mcp"]) == EXIT_SIGINT
    assert capsys.readouterr().err == "mcpwire login: interrupted\n"
    assert cli.main(["-v", "tools"]) == EXIT_SIGINT
    assert capsys.readouterr().err == "mcpwire tools: interrupted\n"

    def failing(argv: list[str]) -> int:
        raise ExceptionGroup("g", [ValueError("a bug")])

    monkeypatch.setattr(cli, "_main", failing)
    with pytest.raises(ExceptionGroup):  # a real error is not hidden
        cli.main(["tools"])


def test_the_host_commands_say_interrupted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"d": {"command": "unused"}}}))
    raised = [_group(_cancelled(), _group(KeyboardInterrupt())), _group(KeyboardInterrupt(), OSError("a bug"))]

    async def interrupted(*args: object, **kwargs: object) -> int:
        await trio.lowlevel.checkpoint()
        raise raised.pop(0)

    monkeypatch.setattr(host_cli, "run", interrupted)
    assert host_cli.main("tools", ["--config", str(config)]) == 130
    assert capsys.readouterr().err == "mcpwire tools: interrupted\n"
    with caplog.at_level(logging.ERROR):  # the command's quiet logging does not hide it
        assert host_cli.main("call", ["--config", str(config), "d__echo"]) == 130
    assert capsys.readouterr().err == "mcpwire call: interrupted\n"
    assert [r.getMessage() for r in caplog.records] == ["while interrupted: unexpected OSError"]


def test_the_checker_says_interrupted(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl+C outside its runs (at the question whether to trust a project's mcp.json)."""

    def interrupted(*args: object) -> object:
        raise _group(_group(KeyboardInterrupt()))

    monkeypatch.setattr(check_cli, "_targets", interrupted)
    assert check_cli.main([]) == 130
    assert capsys.readouterr().err == "mcpwire check: interrupted; every server process was shut down\n"


@pytest.mark.parametrize(
    ("raised", "status", "name"),
    [
        (lambda: _group(_group(KeyboardInterrupt())), 130, "SIGINT"),
        (lambda: _group(fuzz_cli._Interrupted(signal.SIGTERM)), 143, "SIGTERM"),
    ],
    ids=["keyboard-interrupt", "sigterm"],
)
def test_the_fuzzer_says_interrupted(
    raised: Callable[[], BaseException],
    status: int,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def fuzz(*args: object) -> int:
        raise raised()

    monkeypatch.setattr(fuzz_cli, "_fuzz", fuzz)
    monkeypatch.setattr(fuzz_cli, "_logging", lambda *args: None)  # it would keep a handler on this stderr
    assert fuzz_cli.main(["--", sys.executable, "-c", "pass"]) == status
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"mcpwire fuzz: interrupted ({name}); stopped 0 server process(es) still running"
    )


# -- mcpwire serve, for real ------------------------------------------------------------------------

#: A stdio server that is slow to close: it ignores SIGTERM and SIGINT, and after its stdin closes it
#: leaves a file saying so and lingers (until SIGKILL).
SLOW_TO_CLOSE = """\
import json, pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        continue
    results = {
        "initialize": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "slow-to-close", "version": "1"}},
        "tools/list": {"tools": []},
        "ping": {},
    }
    if message["method"] in results:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": results[message["method"]]}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
    print(json.dumps(reply), flush=True)
pathlib.Path(sys.argv[1]).write_text("closing")
time.sleep(120)
"""

#: seconds the whole shutdown may take: the server gets 2 s after its stdin closes and 2 s after
#: SIGTERM before SIGKILL; the rest is slack for a loaded machine
SHUTDOWN_BOUND_S = 30.0


@pytest.mark.slow
def test_serve_a_second_sigint_while_closing_a_slow_server(tmp_path: Path) -> None:
    marker = f"MCPWIRE_TEST_MARKER={uuid.uuid4().hex}"
    key, value = marker.split("=")
    script, closing = tmp_path / "slow_server.py", tmp_path / "closing"
    script.write_text(SLOW_TO_CLOSE)
    entry = {"command": sys.executable, "args": [str(script), str(closing)], "env": {key: value}}
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"slow": entry}}))
    serve = start_serve(
        ["--config", str(config), "--port", "0", "--db", f"sqlite:///{tmp_path / 's.db'}"],
        cwd=tmp_path,
        env=clean_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "config")),
    )
    try:
        lines = serve.read_until(READY_LINE)
        assert "  slow             stdio  legacy 2025-06-18  0 tools" in lines
        assert processes_with(marker)
        started = time.monotonic()
        serve.proc.send_signal(signal.SIGINT)  # drain, then close the server
        while not closing.exists():  # its stdin is closed: the shutdown is under way
            assert serve.proc.poll() is None, "serve ended before closing the server"
            assert time.monotonic() - started < SHUTDOWN_BOUND_S, "the server's stdin was never closed"
            time.sleep(0.05)
        status = serve.stop(signal.SIGINT, timeout=SHUTDOWN_BOUND_S)
        elapsed = time.monotonic() - started
        assert serve.proc.stderr is not None
        err = serve.proc.stderr.read().decode(errors="replace")
        assert status == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err and "TrioInternalError" not in err, err
        assert elapsed < SHUTDOWN_BOUND_S
        assert err.splitlines()[-1] == "mcpwire serve: interrupted"
        assert "Traceback" not in serve.rest()
        assert processes_with(marker) == []  # the slow server was still shut down (SIGKILL)
    finally:
        serve.kill()
        for pid in processes_with(marker):  # pragma: no cover - only when the test fails
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
