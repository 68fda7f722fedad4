"""Raw peers for the fuzzer: bytes in, lines out, every wait bounded, every process reaped.

Theory of operation: the fuzzer has to see the exact exchange (what it wrote, what came back,
in which order, and whether the process died), so it does not go through :class:`mcpwire.Client`
but drives the server's pipes itself, synchronously, with ``selectors``. A :class:`StdioPeer`
starts the command in its own process group, writes whole lines (non-blocking, bounded by a
deadline, so a server that stops reading cannot wedge the fuzzer), splits stdout with
mcpwire's :class:`~mcpwire.protocol.framing.LineBuffer` and drains stderr into a ring buffer
so a full pipe never blocks the server. Everything written and read is appended to a
:class:`Trace`. :meth:`StdioPeer.close` shuts down like the client does (ST-18): stdin closed,
then ``SIGTERM`` to the group, then ``SIGKILL``, each step bounded, and the child reaped.

A :class:`Target` is what the fuzzer points at; :meth:`Target.open` gives a fresh session on it
(for stdio a fresh process, so a :class:`StdioTarget` owns nothing between sessions). The HTTP
targets live in :mod:`fuzz.http_wire`; both kinds of peer offer the same :class:`Peer` surface,
so :func:`~fuzz.exchange.execute` and the oracles do not know which transport they judge.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mcpwire.actors.shutdown import end_process_sync
from mcpwire.errors import FrameTooLarge
from mcpwire.protocol.framing import LineBuffer
from mcpwire.redaction import redact_argv
from mcpwire.transports import DEFAULT_INHERITED_ENV

from .leaks import CANARY, CANARY_ENV

__all__ = [
    "Entry",
    "Peer",
    "StdioPeer",
    "StdioTarget",
    "Target",
    "Trace",
    "decode_line",
    "end_every_process",
    "server_environment",
    "spawn",
]

log = logging.getLogger("mcpwire.fuzz.wire")

#: The largest line the fuzzer accepts from a server (a bigger one is a finding, not a hang).
MAX_LINE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_BYTES = 8192
EXIT_GRACE_S = 0.5
TERM_GRACE_S = 0.5


@dataclass(slots=True)
class Entry:
    """One event of an exchange: a line sent or received, or the process exiting.

    ``data`` is the line as text when it is UTF-8, else ``None`` and ``data_hex`` holds it.
    """

    direction: Literal["send", "recv", "exit", "note"]
    t: float
    data: str | None = None
    data_hex: str | None = None
    status: int | None = None

    def raw(self) -> bytes:
        if self.data_hex is not None:
            return bytes.fromhex(self.data_hex)
        return (self.data or "").encode()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dir": self.direction, "t": round(self.t, 4)}
        if self.data is not None:
            out["line"] = self.data
        if self.data_hex is not None:
            out["line_hex"] = self.data_hex
        if self.status is not None:
            out["status"] = self.status
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Entry:
        return cls(obj["dir"], float(obj.get("t", 0.0)), obj.get("line"), obj.get("line_hex"), obj.get("status"))

    @classmethod
    def of_bytes(cls, direction: Literal["send", "recv", "exit", "note"], t: float, line: bytes) -> Entry:
        try:
            return cls(direction, t, data=line.decode("utf-8"))
        except UnicodeDecodeError:
            return cls(direction, t, data_hex=line.hex())


@dataclass(slots=True)
class Trace:
    """The ordered record of one exchange with one server process."""

    entries: list[Entry] = field(default_factory=list)
    stderr_tail: str = ""

    def record(self, direction: Literal["send", "recv", "exit", "note"], t: float, line: bytes) -> None:
        self.entries.append(Entry.of_bytes(direction, t, line))

    def sent(self) -> list[Entry]:
        return [e for e in self.entries if e.direction == "send"]

    def received(self) -> list[Entry]:
        return [e for e in self.entries if e.direction == "recv"]


def server_environment(extra: dict[str, str] | None) -> dict[str, str]:
    """The environment of a server the fuzzer starts: the library's minimal set
    (:data:`mcpwire.transports.DEFAULT_INHERITED_ENV`) taken from ours, the leak oracle's canary
    (:data:`~fuzz.leaks.CANARY_ENV`), plus ``extra`` (``--env``, ``--env-pass``). Nothing else of
    ours (tokens, CI secrets) reaches an untrusted server."""
    env = {k: v for k in DEFAULT_INHERITED_ENV if (v := os.environ.get(k)) is not None}
    env[CANARY_ENV] = CANARY  # a secret of our own: the leak oracle looks for it in every answer
    env.update(extra or {})
    return env


#: every server process the fuzzer started and has not reaped yet (see :func:`end_every_process`)
_LIVE: set[subprocess.Popen[bytes]] = set()


def spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Starts a server in its own process group (so signals reach its children too) and keeps it in
    the registry until :func:`end_process_group` reaps it."""
    proc: subprocess.Popen[bytes] = subprocess.Popen(list(argv), start_new_session=True, **kwargs)
    _LIVE.add(proc)
    return proc


def end_every_process() -> int:
    """Ends every server process still running (SIGTERM, a short grace, then SIGKILL to each group);
    for an interrupted run, whose ``finally`` blocks may not all have run. Returns how many there were."""
    procs = list(_LIVE)
    for proc in procs:
        end_process_group(proc, eof_grace=None, term_grace=TERM_GRACE_S)
    return len(procs)


def decode_line(line: bytes) -> Any:
    """The JSON value of a line, or ``None`` when it is not JSON (a noise line)."""
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


class Peer(Protocol):
    """One session with a server, as :func:`~fuzz.exchange.execute` drives it."""

    trace: Trace
    exit_status: int | None
    oversized: bool

    @property
    def cancel_by_closing(self) -> bool:
        """How the transport cancels a request: a ``notifications/cancelled`` line, or closing its stream."""

    @property
    def stream_framing(self) -> bool:
        """Whether bytes go down one stream (stdio: framing matters) or one body per message (HTTP)."""

    def alive(self) -> bool: ...
    def send(self, line: bytes, *, timeout: float, wait: bool = False) -> bool: ...
    def send_raw(self, chunk: bytes, *, timeout: float, record: bool = True, wait: bool = True) -> bool: ...
    def receive(self, timeout: float) -> bytes | None: ...
    def close_request(self, request_id: object) -> None: ...
    def now(self) -> float: ...
    def close(self) -> None: ...
    def __enter__(self) -> Peer: ...
    def __exit__(self, *exc: object) -> None: ...


class Target(Protocol):
    """What the fuzzer points at: it opens sessions and describes itself for traces."""

    #: "stdio", "streamable-http" or "sse"
    transport: str

    #: whether a session can be had again after the server died (False: a URL the fuzzer did not start)
    @property
    def restartable(self) -> bool: ...

    def open(self) -> Peer: ...
    def describe(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class StdioTarget:
    """A server command: every session is a fresh process (nothing is kept between sessions)."""

    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None
    transport: str = "stdio"
    restartable: bool = True

    def open(self) -> StdioPeer:
        return StdioPeer(self.argv, env=self.env, cwd=self.cwd)

    def describe(self) -> dict[str, Any]:
        # env *names* only: values may be secrets, and a replay takes them from its own environment;
        # the command with credentials (``--api-key X``, ``user:pass@``) redacted
        return {"transport": "stdio", "argv": redact_argv(self.argv), "env": sorted(self.env or {}), "cwd": self.cwd}

    def close(self) -> None:
        return None


class StdioPeer:
    """One server process and its pipes (use as a context manager: the process is always reaped).

    Args:
        argv: the server command.
        env: extra environment variables, added to the minimal inherited one (:func:`server_environment`).
        cwd: its working directory.
    """

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.argv = list(argv)
        self.trace = Trace()
        self._t0 = time.monotonic()
        self._lines = LineBuffer(MAX_LINE_BYTES)
        self._queue: deque[bytes] = deque()
        self._stderr = bytearray()
        self._eof = False
        self.exit_status: int | None = None
        self.oversized = False
        self.cancel_by_closing = False
        self.stream_framing = True
        self.proc = spawn(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_environment(env),
            cwd=cwd,
        )
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        self._sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        log.debug("started %s (pid %s)", self.argv[0], self.proc.pid)

    def __enter__(self) -> StdioPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def close_request(self, request_id: object) -> None:  # pragma: no cover - stdio cancels by notification
        raise NotImplementedError("stdio cancels with notifications/cancelled")

    # -- I/O --------------------------------------------------------------------------------------

    def alive(self) -> bool:
        if self.exit_status is None and self.proc.poll() is not None:
            self._exited()
        return self.exit_status is None

    def _exited(self) -> None:
        self.exit_status = self.proc.returncode
        self.trace.entries.append(Entry("exit", self.now(), status=self.exit_status))

    def send(self, line: bytes, *, timeout: float, wait: bool = False) -> bool:
        """Writes ``line`` plus a newline; ``False`` when the server is gone or stopped reading.

        ``wait`` matters only for HTTP (wait for the POST's own answer); a pipe has none."""
        self.trace.entries.append(Entry.of_bytes("send", self.now(), line))
        data = memoryview(line + b"\n")
        deadline = time.monotonic() + timeout
        stdin = self.proc.stdin
        assert stdin is not None
        while data:
            try:
                written = os.write(stdin.fileno(), data)
                data = data[written:]
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                self._pump(min(0.01, max(0.0, deadline - time.monotonic())))
            except (BrokenPipeError, OSError):
                return False
        return True

    def send_raw(self, chunk: bytes, *, timeout: float, record: bool = True, wait: bool = True) -> bool:
        """Writes bytes as they are, no newline added (for broken framing)."""
        if record:
            self.trace.entries.append(Entry.of_bytes("send", self.now(), chunk))
        stdin = self.proc.stdin
        assert stdin is not None
        deadline = time.monotonic() + timeout
        view = memoryview(chunk)
        while view:
            try:
                view = view[os.write(stdin.fileno(), view) :]
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                self._pump(0.01)
            except OSError:
                return False
        return True

    def _pump(self, timeout: float) -> None:
        """Reads whatever is ready within ``timeout`` seconds into the queue and the stderr tail."""
        if self._eof:
            if timeout > 0:
                time.sleep(min(timeout, 0.01))
            return
        for key, _ in self._sel.select(timeout):
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if key.data == "err":
                if not chunk:
                    self._sel.unregister(key.fileobj)
                    continue
                self._stderr += chunk
                del self._stderr[:-STDERR_TAIL_BYTES]
                continue
            if not chunk:
                self._eof = True
                self._sel.unregister(key.fileobj)
                try:
                    last = self._lines.close()
                except FrameTooLarge:
                    last, self.oversized = None, True
                if last is not None:
                    self._queue.append(last)
                continue
            try:
                self._queue.extend(self._lines.feed(chunk))
            except FrameTooLarge:
                self.oversized, self._eof = True, True
                self._sel.unregister(key.fileobj)

    def receive(self, timeout: float) -> bytes | None:
        """The next line within ``timeout`` seconds, or ``None`` (nothing came, or stdout closed)."""
        deadline = time.monotonic() + timeout
        while not self._queue:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.oversized:
                return None
            if self._eof:
                self.alive()
                if self.exit_status is not None:
                    return None
            self._pump(min(remaining, 0.05))
        line = self._queue.popleft()
        self.trace.entries.append(Entry.of_bytes("recv", self.now(), line))
        return line

    def drain(self, quiet: float) -> list[bytes]:
        """Every line that arrives until ``quiet`` seconds pass without one."""
        lines: list[bytes] = []
        while (line := self.receive(quiet)) is not None:
            lines.append(line)
        return lines

    # -- shutdown ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Ends the process: stdin closed, then SIGTERM, then SIGKILL to its group; always reaps."""
        proc = self.proc
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        end_process_group(proc, eof_grace=EXIT_GRACE_S, term_grace=TERM_GRACE_S)
        if self.exit_status is None and proc.returncode is not None and not self._eof:
            self._pump(0)
        self.trace.stderr_tail = self._stderr.decode("utf-8", "replace")
        self._sel.close()
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                assert pipe is not None
                pipe.close()


def end_process_group(proc: subprocess.Popen[bytes], *, eof_grace: float | None, term_grace: float) -> None:
    """Ends a server the fuzzer started as every mcpwire client does
    (:func:`mcpwire.actors.shutdown.end_process_sync`: stdin closed and ``eof_grace`` when given,
    then SIGTERM and ``term_grace``, then SIGKILL, to its process group; bounded, always reaped);
    then drops it from the registry."""
    try:
        end_process_sync(proc, eof_grace=eof_grace, term_grace=term_grace)
    finally:
        # children it left behind in its group; also when an interrupt cut the waits short
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is not None:
            _LIVE.discard(proc)
