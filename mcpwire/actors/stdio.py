"""The stdio actor: one server subprocess, its pipes, and their tasks.

Theory of operation: :meth:`StdioTransport.run` spawns the process in its own process group and,
inside its own nursery, runs two readers: stdout is split into lines and each line classified
and handed synchronously to the *sink* (the client's dispatcher, which never awaits: the reader
must never wait on user code, or a slow consumer would stall every answer); stderr is drained
continuously into the ``mcpwire.server.<name>`` logger and a ring buffer of the last lines, so a
server writing megabytes of diagnostics never blocks on a full pipe (ST-07) and its last words
are attached to :class:`~mcpwire.errors.ServerGone`.

Writes never wait on the pipe in the caller's task. A message is written at once with one
non-blocking ``write`` when nothing is queued; whatever the pipe does not take (a full pipe, a
large message) goes to a backlog that a writer task flushes in order. Messages sent after a
direct write and before the next read from stdout (or the writer's next flush) are queued too,
so that many calls in flight, woken together by one read, share one ``writev`` instead of a
system call each. So concurrent calls need no
lock, a caller's cancellation can never cut a line in half (the backlog is the actor's, not the
caller's), and a server that stops reading stdin stalls only the writer, while the callers' own
timeouts stay in force. The backlog is bounded (``MAX_BACKLOG_BYTES``): past it, senders wait,
cancellably, before anything of theirs is queued. Closing gives the backlog the shutdown grace
time to reach the pipe (a notification sent just before leaving the block is not lost); what a
server that stopped reading has still not taken then is abandoned, and pending calls fail with
ClientClosed.

Shutdown follows 2025-11-25 basic/lifecycle §Shutdown (LC-50, ST-18) through the shared
:mod:`mcpwire.actors.shutdown`: close stdin, wait for the process to exit, then SIGTERM, then
SIGKILL, to the whole process group (a server started through ``npx`` or a shell takes its
children with it). Every step is bounded, and the process is always reaped.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Final

import trio

from ..errors import ConnectError, FrameTooLarge, ServerGone, ServerNotFound
from ..protocol.framing import DEFAULT_MAX_MESSAGE_BYTES, LineBuffer
from ..protocol.jsonrpc import RequestId
from ..transports import StdioServer
from .base import MessageSink
from .shutdown import end_process

__all__ = ["StdioTransport"]

log = logging.getLogger(__name__)

READ_CHUNK_BYTES: Final = 256 * 1024
STDERR_LINE_BYTES: Final = 8 * 1024  # longer stderr lines are truncated in the ring and logs
EXIT_WAIT_AFTER_EOF: Final = 1.0  # seconds to wait for an exit status once stdout closed
MAX_BACKLOG_BYTES: Final = 8 * 1024 * 1024  # queued past what the pipe took; then senders wait
WRITEV_MAX_BUFFERS: Final = 512  # messages per writev (POSIX guarantees IOV_MAX >= 16; Linux 1024)


class StdioTransport:
    """A server subprocess speaking newline-delimited JSON-RPC.

    Args:
        spec: what to start.
        sink: receives every message read from stdout, and the end of the connection.
        max_message_bytes: the largest line accepted from stdout.
        stderr_lines: how many stderr lines to keep for error reports.
    """

    def __init__(
        self,
        spec: StdioServer,
        sink: MessageSink,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        stderr_lines: int = 50,
        label: str | None = None,
    ) -> None:
        self.spec = spec
        self.label = label or spec.label
        self._sink = sink
        self._max = max_message_bytes
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_lines)
        self._stderr_log = logging.getLogger(f"mcpwire.server.{self.label}")
        self._proc: trio.Process | None = None
        self._send_lock = trio.Lock()  # only where stdin has no file descriptor (not POSIX)
        self._stdin_fd = -1
        self._backlog: collections.deque[bytes | memoryview] = collections.deque()
        self._coalescing = False  # a message went out since the last read: queue the next ones
        self._backlog_bytes = 0
        self._backlog_wake = trio.Event()  # set when the backlog gets its first item
        self._backlog_room = trio.Event()  # set when the backlog drops below its bound
        self._drained: trio.Event | None = None  # shutdown waits on it for the backlog to go out
        self._writer_running = False
        self._write_error: BaseException | None = None
        self._stdin_closed = False  # never write to the fd number once it is closed: it may be reused
        self._closing = False
        self._lost = False
        self._stdout_done = trio.Event()
        self._exited = trio.Event()
        self.bytes_received = 0
        self.bytes_sent = 0
        self.wants_headers = False
        self.atomic_send = True  # queued whole or not at all (a wait for room comes first)

    # -- introspection ----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc else None

    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr, oldest first."""
        return list(self._stderr_tail)

    # -- lifetime -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[StdioTransport] = trio.TASK_STATUS_IGNORED) -> None:
        """Spawns the server and runs its readers until the process is gone.

        Raises:
            ServerNotFound: the command does not exist.
            ConnectError: it could not be started (permissions, bad cwd).
        """
        spec = self.spec
        try:
            self._proc = await trio.lowlevel.open_process(
                spec.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=spec.environment(),
                cwd=spec.cwd,
                start_new_session=sys.platform != "win32",
            )
        except FileNotFoundError as exc:
            missing = spec.command if exc.filename in (None, spec.command) else exc.filename
            if spec.cwd is not None and not os.path.isdir(spec.cwd):  # noqa: ASYNC240 - error path
                raise ConnectError(
                    f"cannot start server '{self.label}': working directory {spec.cwd!r} does not exist"
                ) from exc
            raise ServerNotFound(
                f"cannot start server '{self.label}': command {missing!r} not found (is it installed and on PATH?)"
            ) from exc
        except OSError as exc:
            raise ConnectError(f"cannot start server '{self.label}' ({spec.command!r}): {exc}") from exc
        log.debug("%s: started pid %s", self.label, self._proc.pid)
        fileno = getattr(self._proc.stdin, "fileno", None)
        if fileno is not None:
            self._stdin_fd = fileno()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_stdout)
                nursery.start_soon(self._drain_stderr)
                nursery.start_soon(self._watch_exit)
                if self._stdin_fd >= 0:
                    nursery.start_soon(self._flush_backlog)
                task_status.started(self)
        finally:
            with trio.CancelScope(shield=True):
                await self._terminate()

    def negotiated(self, version: str, modern: bool) -> None:
        """Nothing to do on stdio: no headers."""

    async def cancel(self, request_id: RequestId) -> bool:
        """On stdio a request is cancelled with ``notifications/cancelled`` (ST-12): not here."""
        return False

    async def send(
        self,
        data: bytes,
        *,
        request_id: RequestId | None = None,
        headers: Mapping[str, str] | None = None,
        opens_session: bool = False,
        deadline: float | None = None,
    ) -> None:
        """Writes one encoded message (a newline is appended); nothing waits on ``deadline`` here.

        Raises:
            ServerGone: the server's stdin is closed (it exited or is exiting).
        """
        proc = self._proc
        if proc is None or proc.stdin is None or self._lost or self._stdin_closed or self._write_error is not None:
            raise self._gone("cannot send: the server is not running", self._write_error)
        line = data + b"\n"
        if self._stdin_fd < 0:
            try:
                async with self._send_lock:
                    await proc.stdin.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise self._gone("the server closed its stdin") from exc
            self.bytes_sent += len(line)
            return
        while self._backlog_bytes >= MAX_BACKLOG_BYTES:
            # Back-pressure: nothing of ours is queued yet, so a cancellation here loses nothing.
            self._backlog_room = trio.Event()
            await self._backlog_room.wait()
            if self._write_error is not None or self._lost or self._stdin_closed:
                raise self._gone("cannot send: the server is not running", self._write_error)
        self.bytes_sent += len(line)
        if self._coalescing or self._backlog:
            # Behind what is already queued (order is kept); the writer is woken if need be.
            self._queue(line)
            return
        try:
            written = os.write(self._stdin_fd, line)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._write_failed(exc)
            raise self._gone("the server closed its stdin", exc) from exc
        if written < len(line):
            self._queue(memoryview(line)[written:])
        else:
            # Written at once. Until the next read from stdout (or the writer's next flush),
            # later messages are queued, so the tasks woken together by one read (many calls in
            # flight) share a single write. Nothing wakes the writer for this: one call at a
            # time costs one system call and no task switch.
            self._coalescing = True

    def _queue(self, rest: bytes | memoryview) -> None:
        self._backlog.append(rest)
        self._backlog_bytes += len(rest)
        self._backlog_wake.set()  # (a no-op when the writer is already awake)

    def _write_failed(self, exc: OSError) -> None:
        """stdin is broken: every later send fails at once, with this as the cause."""
        if self._write_error is None:
            self._write_error = exc
        self._backlog.clear()
        self._backlog_bytes = 0
        self._backlog_room.set()
        if self._drained is not None:
            self._drained.set()  # nothing more will go out

    def _write_backlog(self) -> bool:
        """Writes as much of the backlog as the pipe takes, with one ``writev`` per round;
        False when the pipe is full. Raises OSError when stdin is broken."""
        backlog = self._backlog
        while backlog:
            count = min(len(backlog), WRITEV_MAX_BUFFERS)
            try:
                written = os.writev(self._stdin_fd, [backlog[i] for i in range(count)])
            except BlockingIOError:
                return False
            self._backlog_bytes -= written
            while written:
                head = backlog[0]
                if written < len(head):
                    backlog[0] = memoryview(head)[written:]
                    return False  # a short write: the pipe is full
                written -= len(head)
                backlog.popleft()
        return True

    async def _flush_backlog(self) -> None:
        """The writer task: writes what was queued, in order, whenever the pipe takes more."""
        self._writer_running = True
        try:
            await self._write_forever()
        finally:
            self._writer_running = False

    async def _write_forever(self) -> None:
        while True:
            await self._backlog_wake.wait()
            self._backlog_wake = trio.Event()
            while self._backlog:
                if self._stdin_closed:  # closed by shutdown: nothing more goes out
                    self._write_failed(BrokenPipeError(errno.EPIPE, "stdin was closed"))
                    return
                try:
                    flushed = self._write_backlog()
                except OSError as exc:
                    log.debug("%s: writing to stdin failed: %s", self.label, exc)
                    self._write_failed(exc)
                    return
                if self._backlog_bytes < MAX_BACKLOG_BYTES:
                    self._backlog_room.set()
                if not flushed:
                    try:
                        await trio.lowlevel.wait_writable(self._stdin_fd)
                    except trio.ClosedResourceError:
                        pass
            self._coalescing = False
            if self._drained is not None:
                self._drained.set()
            if self._stdin_closed:
                return  # shut down: nothing more is queued, and the caller's nursery may end

    async def aclose(self) -> None:
        """Shuts the server down in order; idempotent. Shielded, and bounded by the grace times."""
        self._closing = True
        with trio.CancelScope(shield=True):
            await self._terminate()

    async def wait_closed(self) -> None:
        await self._exited.wait()

    # -- tasks ----------------------------------------------------------------------------------

    async def _receive_fd(self, max_bytes: int) -> bytes:
        """What :meth:`trio.lowlevel.FdStream.receive_some` returns, without its checkpoint
        before a read that has to wait anyway: a message that wakes the reader costs one task
        step, not two. A read that does not wait is a checkpoint, as there."""
        assert self._proc is not None and isinstance(self._proc.stdout, trio.lowlevel.FdStream)
        stream = self._proc.stdout
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            fd = stream.fileno()  # -1 once closed (never a number reused since)
            try:
                data = os.read(fd, max_bytes) if fd >= 0 else b""
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                waited = True
                continue
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("file was already closed") from None
                raise trio.BrokenResourceError from exc
            if fd < 0:
                raise trio.ClosedResourceError("file was already closed")
            if not waited:
                await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        buffer = LineBuffer(self._max)
        sink = self._sink
        error: BaseException | None = None
        receive = self._receive_fd if isinstance(stream, trio.lowlevel.FdStream) else stream.receive_some
        try:
            while True:
                try:
                    data = await receive(READ_CHUNK_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                # a new batch of answers: what their callers send next shares one write
                self._coalescing = False
                if not data:
                    last = buffer.close()
                    if last is not None:
                        sink.message_received(sink.classify(last))
                    break
                self.bytes_received += len(data)
                classify = sink.classify
                for line in buffer.feed(data):
                    sink.message_received(classify(line))
        except FrameTooLarge as exc:
            error = exc
            log.warning("%s: %s; closing the connection", self.label, exc)
        self._stdout_done.set()
        if error is None and not self._closing:
            with trio.move_on_after(EXIT_WAIT_AFTER_EOF):
                await self._exited.wait()
        self._lose(error)
        if error is not None:
            await self._terminate()

    async def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        stream = self._proc.stderr
        pending = bytearray()
        emit = self._stderr_line
        while True:
            try:
                data = await stream.receive_some(READ_CHUNK_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                break
            if not data:
                break
            pending += data
            start = 0
            pos = pending.find(b"\n")
            while pos != -1:
                emit(pending[start:pos])
                start = pos + 1
                pos = pending.find(b"\n", start)
            del pending[:start]
            if len(pending) > 8 * STDERR_LINE_BYTES:  # a never-ending line: cut it
                emit(pending)
                pending.clear()
        if pending:
            emit(pending)

    def _stderr_line(self, raw: bytes | bytearray) -> None:
        text = bytes(raw[:STDERR_LINE_BYTES]).decode("utf-8", "replace").rstrip("\r")
        if len(raw) > STDERR_LINE_BYTES:
            text += f"... [{len(raw) - STDERR_LINE_BYTES} more bytes]"
        self._stderr_tail.append(text)
        self._stderr_log.info("%s", text)

    async def _watch_exit(self) -> None:
        assert self._proc is not None
        await self._proc.wait()
        self._exited.set()
        if not self._closing:
            # stdout may stay open in a grandchild; the exit itself ends the connection, but let
            # the reader deliver what was already written first.
            with trio.move_on_after(EXIT_WAIT_AFTER_EOF):
                await self._stdout_done.wait()
            self._lose(None)

    # -- helpers -------------------------------------------------------------------------------

    def _gone(self, what: str, cause: BaseException | None = None) -> ServerGone:
        code = self.returncode
        status = f"exited with status {code}" if code is not None else "is no longer reachable"
        gone = ServerGone(
            f"server '{self.label}' {status}: {what}",
            server=self.label,
            returncode=code,
            stderr_tail=self.stderr_tail(),
        )
        if cause is not None:
            gone.__cause__ = cause
        return gone

    def _lose(self, error: BaseException | None) -> None:
        if self._lost:
            return
        self._lost = True
        if self._closing and error is None:
            exc: BaseException = self._gone("the connection was closed")
        else:
            exc = self._gone(str(error) if error else "it closed its output")
            if error is not None:
                exc.__cause__ = error
        self._sink.connection_lost(exc)

    async def _terminate(self) -> None:
        """Queued writes out (within the grace time), then close stdin, wait; SIGTERM, wait;
        SIGKILL; reap (:func:`~mcpwire.actors.shutdown.end_process`). Every step bounded."""
        proc = self._proc
        if proc is None:
            return
        grace = self.spec.shutdown_grace
        if self._backlog and self._write_error is None and not self._stdin_closed and proc.returncode is None:
            # What callers sent before closing goes out first: the writer task may not have run yet
            # (or may be gone, when the actor's nursery is being cancelled): what the pipe takes now,
            # then, while the writer runs, the rest within the grace time.
            try:
                self._write_backlog()
            except OSError as exc:
                self._write_failed(exc)
            if self._backlog and self._writer_running:
                self._drained = trio.Event()
                self._backlog_wake.set()
                with trio.move_on_after(grace):
                    await self._drained.wait()

        async def close_stdin() -> None:
            if proc.stdin is not None and not self._stdin_closed:
                self._stdin_closed = True  # never written to again: the fd number may be reused
                self._backlog_wake.set()  # the writer task sees it and ends
                await proc.stdin.aclose()

        await end_process(proc, close_stdin=close_stdin, eof_grace=grace, term_grace=grace, label=self.label)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                with trio.move_on_after(grace):
                    await stream.aclose()
