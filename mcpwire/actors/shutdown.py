"""Ending a server process: close stdin, then SIGTERM, then SIGKILL, each step bounded.

Theory of operation: 2025-11-25 basic/lifecycle §Shutdown (LC-50, ST-18): the client closes the
server's stdin and waits for it to exit, "sending SIGTERM if the server does not exit within a
reasonable time", then "SIGKILL if the server does not exit within a reasonable time after
SIGTERM". Signals go to the whole process group (the server is started in a session of its own),
so a server started through ``npx`` or a shell takes its children with it; once the leader is
gone, whatever it left in its group is killed too. Every wait is bounded and the process is
always reaped (or given up on after the last bounded wait).

One policy, two forms: :func:`end_process` for a ``trio.Process`` (the stdio actor, the
checker's harness) and :func:`end_process_sync` for a ``subprocess.Popen`` (the fuzzer's wires,
which are synchronous). Both return the :class:`ExitStep` that ended the process.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Final

import trio

__all__ = ["KILL_WAIT", "ExitStep", "end_process", "end_process_sync", "signal_group"]

log = logging.getLogger(__name__)

#: seconds to wait for the exit status after SIGKILL (the kernel ends the process; reaping it may lag)
KILL_WAIT: Final = 5.0


class ExitStep(enum.Enum):
    """What ended a server process."""

    #: it was already gone when shutdown began.
    GONE = "gone"
    #: it exited after its stdin closed (the orderly way).
    EOF = "eof"
    #: it exited after SIGTERM.
    SIGTERM = "sigterm"
    #: it was killed.
    SIGKILL = "sigkill"


def signal_group(pid: int, sig: int, *, fallback: Callable[[int], None] | None = None) -> None:
    """Sends ``sig`` to the process group led by ``pid`` (on Windows, to the process through
    ``fallback``); a group or process already gone is not an error."""
    try:
        if sys.platform != "win32":
            os.killpg(pid, sig)
            return
    except (ProcessLookupError, PermissionError):
        pass
    if fallback is not None:
        try:
            fallback(signal.SIGTERM if sys.platform == "win32" else sig)
        except (ProcessLookupError, PermissionError, OSError):
            pass


async def end_process(
    process: trio.Process,
    *,
    close_stdin: Callable[[], Awaitable[None]] | None,
    eof_grace: float,
    term_grace: float,
    label: str = "server",
) -> ExitStep:
    """Ends ``process``: ``close_stdin()`` and ``eof_grace`` seconds; SIGTERM to its group and
    ``term_grace`` seconds; SIGKILL and :data:`KILL_WAIT` seconds; then SIGKILL to what it left
    in its group. Returns what ended it.

    Cancellation: not shielded here; callers that must finish it (closing) shield it.
    """
    gone = process.returncode is not None
    if close_stdin is not None:  # even for a process already gone: the pipe is released
        with trio.move_on_after(eof_grace):
            await close_stdin()
    if gone:
        _kill_leftovers(process.pid)
        return ExitStep.GONE
    step = ExitStep.EOF
    with trio.move_on_after(eof_grace):
        await process.wait()
    if process.returncode is None:
        log.info("%s: did not exit %.1fs after stdin closed; sending SIGTERM", label, eof_grace)
        step = ExitStep.SIGTERM
        signal_group(process.pid, signal.SIGTERM, fallback=process.send_signal)
        with trio.move_on_after(term_grace):
            await process.wait()
    if process.returncode is None:
        log.warning("%s: did not exit %.1fs after SIGTERM; sending SIGKILL", label, term_grace)
        step = ExitStep.SIGKILL
        signal_group(process.pid, _KILL, fallback=process.send_signal)
        with trio.move_on_after(KILL_WAIT):
            await process.wait()
    else:
        _kill_leftovers(process.pid)  # the leader is gone; its children must not outlive it
    return step


def end_process_sync(
    process: subprocess.Popen[bytes],
    *,
    eof_grace: float | None,
    term_grace: float,
) -> ExitStep:
    """:func:`end_process` for a ``subprocess.Popen``: closes its stdin (when ``eof_grace`` is
    given) and waits, then SIGTERM, then SIGKILL to its group, each bounded; always reaps, or
    gives up after :data:`KILL_WAIT`."""
    if process.poll() is not None:
        _kill_leftovers(process.pid)
        return ExitStep.GONE
    steps: list[tuple[ExitStep, int | None, float]] = [(ExitStep.SIGTERM, signal.SIGTERM, term_grace)]
    if eof_grace is not None:
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        steps.insert(0, (ExitStep.EOF, None, eof_grace))
    steps.append((ExitStep.SIGKILL, _KILL, KILL_WAIT))
    for step, sig, grace in steps:
        if sig is not None:
            signal_group(process.pid, sig, fallback=process.send_signal)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            continue
        if step is not ExitStep.SIGKILL:
            _kill_leftovers(process.pid)
        return step
    return ExitStep.SIGKILL


_KILL: Final = signal.SIGKILL if sys.platform != "win32" else signal.SIGTERM


def _kill_leftovers(pid: int) -> None:
    if sys.platform != "win32":
        signal_group(pid, signal.SIGKILL)
