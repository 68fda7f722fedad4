"""The raw stdio wire under the checks (the HTTP one is :mod:`conformance.http_harness`).

:class:`WireBase` is what every check talks to, whatever the transport: ``send``, ``request``,
``recv`` with a deadline, ``drain``, the recorded ``exchanges`` and ``frames``, and a
``responder`` that answers the server's own requests while a check waits for a response.

Theory of operation: :func:`open_wire` spawns a fresh server process in its own process group and
gives the check a :class:`Wire`: it writes raw bytes or JSON lines to the server's stdin and reads
stdout lines with a deadline each. Every line in either direction is recorded as an
:class:`Exchange` (the evidence in reports), and stdout lines that are not JSON are kept as they
are, so a check sees exactly what came back. Leaving the block shuts the server down in order
(stdin closed, then SIGTERM, then SIGKILL to the group), each step bounded, and records which step
was needed; the process is always reaped. Nothing here parses MCP beyond JSON.

Memory is bounded whatever the server sends: frames wait for the check in a channel of
:data:`MAX_QUEUED_FRAMES` (when it is full the reader stops reading, so a flooding server blocks
on its own stdout, as it would with any client), and the records (``exchanges``, ``frames``,
``sent``) are :class:`~.bounded.BoundedLog` objects that keep the first and the last items and
count the rest. A recorded exchange keeps at most :data:`MAX_RECORDED_CHARS` of its text; the
frame handed to the check keeps the whole message.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from mcpwire.actors.shutdown import ExitStep, end_process, signal_group

from .bounded import BoundedLog
from .pace import FIRST_ANSWER_FACTOR, Pace

__all__ = [
    "EOF_GRACE_S",
    "FIRST_ANSWER_FACTOR",
    "MAX_QUEUED_FRAMES",
    "MAX_RECORDED_CHARS",
    "Exchange",
    "Frame",
    "NoAnswer",
    "Wire",
    "WireBase",
    "canned_answer",
    "leaves",
    "lone_errors",
    "open_wire",
    "shutdown",
]

_log = logging.getLogger("mcpwire.check.harness")

#: How long the server gets to exit after stdin EOF before SIGTERM, then after SIGTERM.
EOF_GRACE_S: Final = 2.0
TERM_GRACE_S: Final = 1.0
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
MAX_STDERR_BYTES: Final = 64 * 1024
#: frames received and not yet read by the check; when full, reading from the server pauses
MAX_QUEUED_FRAMES: Final = 1024
#: characters of one message kept in the recorded exchange (the evidence); the frame keeps it all
MAX_RECORDED_CHARS: Final = 8 * 1024
#: what a wire keeps of its records: the first and the last items of each, and bytes of frames
KEEP_FRAMES: Final = 2000
KEEP_EXCHANGES: Final = 200
MAX_FRAME_BYTES_KEPT: Final = 64 * 1024 * 1024


def _undecodable_head(rid: Any) -> str:
    """How a compact response to ``rid`` starts (a line kept as text, too deep to decode, that
    starts so is that response)."""
    return '{"jsonrpc":"2.0","id":' + json.dumps(rid, separators=(",", ":")) + ","


class NoAnswer(Exception):
    """The server sent no answer to a request before its deadline.

    ``timed_out`` is true when only the window ended (the server may just be slow), false when
    something else ended the wait: the wire closed, or an HTTP answer came without a JSON-RPC one.
    """

    def __init__(self, message: str, *, timed_out: bool = True) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def canned_answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """A harmless answer to a server request: decline, a short text, no roots, an empty ping; an
    error for any other method (the checker serves none)."""
    method = request.get("method")
    result: dict[str, Any]
    if method == "elicitation/create":
        result = {"action": "decline"}
    elif method == "sampling/createMessage":
        result = {
            "role": "assistant",
            "content": {"type": "text", "text": "mcpwire check"},
            "model": "mcpwire-check",
            "stopReason": "endTurn",
        }
    elif method == "roots/list":
        result = {"roots": []}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}


@dataclass(slots=True, frozen=True)
class Exchange:
    """One line on the wire: ``">"`` client to server, ``"<"`` server to client, ``"!"`` event.

    ``headers`` (HTTP) are the headers that matter for the line, as sent or received: the
    evidence collector shows them, redacted (:mod:`.evidence`); ``text`` never carries them.
    """

    direction: str
    text: str
    at: float
    headers: Mapping[str, str] | None = None


def recorded(text: str) -> str:
    """``text`` as a recorded exchange keeps it: whole up to :data:`MAX_RECORDED_CHARS`."""
    if len(text) <= MAX_RECORDED_CHARS:
        return text
    return text[:MAX_RECORDED_CHARS] + f"… ({len(text) - MAX_RECORDED_CHARS} more characters)"


def new_frames() -> BoundedLog[Frame]:
    return BoundedLog(head=KEEP_FRAMES, tail=KEEP_FRAMES, max_bytes=MAX_FRAME_BYTES_KEPT, size=_frame_size)


def new_exchanges() -> BoundedLog[Exchange]:
    return BoundedLog(head=KEEP_EXCHANGES, tail=KEEP_EXCHANGES)


def new_sent() -> BoundedLog[Any]:
    return BoundedLog(head=KEEP_EXCHANGES, tail=KEEP_EXCHANGES)


@dataclass(slots=True)
class Frame:
    """One message as it came back: its text and, when it is JSON, the decoded value.

    On stdio a frame is one stdout line; over HTTP it is a JSON body or one SSE event, and
    ``via`` names the HTTP exchange that carried it (``"POST#3"``, ``"GET#1"``). ``ended`` marks
    the internal signal that a POST ended without an answer (request id, HTTP summary); such a
    frame is never recorded in ``frames``.
    """

    text: str
    value: Any = None
    is_json: bool = False
    via: str = ""
    ended: tuple[Any, str] | None = None

    @property
    def is_response(self) -> bool:
        v = self.value
        return isinstance(v, dict) and "method" not in v and ("result" in v or "error" in v)

    @property
    def is_request(self) -> bool:
        v = self.value
        return isinstance(v, dict) and "method" in v and "id" in v

    @property
    def is_notification(self) -> bool:
        v = self.value
        return isinstance(v, dict) and "method" in v and "id" not in v


def _frame_size(frame: Frame) -> int:
    return len(frame.text) + 64


class WireBase:
    """What every wire offers a check: send JSON-RPC, read frames with deadlines, keep evidence.

    Subclasses provide :meth:`send_bytes` and :meth:`send` and feed ``_receive``.
    """

    started: float
    exchanges: BoundedLog[Exchange]
    frames: BoundedLog[Frame]
    #: every JSON value sent (raw bytes that are not JSON are left out), batches as lists
    sent: BoundedLog[Any]
    _receive: trio.MemoryReceiveChannel[Frame] | None
    _next_id: int
    #: "stdio", "http" (Streamable HTTP) or "sse" (2024-11-05 HTTP+SSE)
    transport: str = "stdio"
    #: answers server requests met while waiting for a response (legacy sampling, elicitation,
    #: roots, ping): called with the request, returns the JSON-RPC response to send, or None
    responder: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    #: something came from the server on this wire (see :data:`FIRST_ANSWER_FACTOR`)
    heard: bool = False
    #: the run's observed latencies, which size every wait for an answer (see :mod:`.pace`)
    pace: Pace | None = None
    #: seconds from the wire's start (a process's spawn) to its first answer, once answered
    startup_s: float | None = None
    #: given every response matched to a request, with the request's method and params (the
    #: schema audit; params None when the wait did not send the request itself)
    on_answer: Callable[[str, dict[str, Any] | None, dict[str, Any]], None] | None = None

    def answer_window(self, timeout: float) -> float:
        """How long to wait for the next answer when ``timeout`` was asked for: the first answer of
        a wire includes the server's start-up (:data:`FIRST_ANSWER_FACTOR`), and both grow with the
        latencies the run observed (:class:`~.pace.Pace`)."""
        first = not self.heard
        if self.pace is None:
            return timeout * FIRST_ANSWER_FACTOR if first else timeout
        return self.pace.first_window(timeout) if first else self.pace.answer_window(timeout)

    def observed(self, began: float, *, first: bool) -> None:
        """An answer arrived for a request sent at ``began`` (``trio.current_time()``): tell the pace."""
        if first and self.startup_s is None:
            self.startup_s = time.monotonic() - self.started
        if self.pace is None:
            return
        if first:
            self.pace.observe_startup(self.startup_s or 0.0)
        else:
            self.pace.observe_answer(trio.current_time() - began)

    def note(self, text: str) -> None:
        self.exchanges.append(Exchange("!", text, time.monotonic() - self.started))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    @property
    def last_id(self) -> int:
        """The last id :meth:`new_id` gave (0 before the first)."""
        return self._next_id

    def skip_ids(self, floor: int) -> None:
        """Give ids above ``floor`` from now on (a reused session never repeats an id)."""
        self._next_id = max(self._next_id, floor)

    async def send_bytes(self, data: bytes) -> None:
        raise NotImplementedError

    async def send(self, message: Any) -> None:
        raise NotImplementedError

    async def recv(self, timeout: float) -> Frame | None:
        """The next frame, or None at the deadline or end of output."""
        assert self._receive is not None
        # a frame already queued needs no timer and no trip through the scheduler: a flood is read
        # in bursts (cancellation is still honoured at each frame)
        try:
            frame = self._receive.receive_nowait()
        except trio.WouldBlock:
            pass
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
            return frame
        with trio.move_on_after(timeout):
            try:
                return await self._receive.receive()
            except trio.EndOfChannel:
                return None
        return None

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, request_id: Any = None, timeout: float = 5.0
    ) -> dict[str, Any]:
        """Send a request and return its response; other frames in between stay in ``frames``.

        Raises:
            NoAnswer: no response with this id before ``timeout``.
        """
        rid = self.new_id() if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.wait_response(rid, timeout=timeout, what=method, params=params)

    def _closed_reason(self) -> str | None:
        return None

    def sent_messages(self) -> list[Any]:
        """Every JSON value this wire sent, in order (batches as lists; the first and last kept)."""
        return list(self.sent)

    def discard_queued(self) -> int:
        """Drop the frames received but not read yet; returns how many."""
        count = 0
        while self._receive is not None:
            try:
                self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            count += 1
        return count

    async def wait_response(
        self, rid: Any, *, timeout: float = 5.0, what: str = "request", params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The response to ``rid`` within ``timeout`` (the first answer of a wire: see
        :data:`FIRST_ANSWER_FACTOR`); server requests met on the way go to :attr:`responder`.

        Raises:
            NoAnswer: no response before the deadline, or the wire closed.
        """
        first = not self.heard
        began = trio.current_time()
        timeout = self.answer_window(timeout)
        deadline = began + timeout
        while True:
            frame = await self.recv(max(0.0, deadline - trio.current_time()))
            if frame is None:
                closed = self._closed_reason()
                if closed is not None:
                    raise NoAnswer(f"{closed} without answering {what} (id {rid!r})", timed_out=False)
                raise NoAnswer(f"no answer to {what} (id {rid!r}) within {timeout:g} s")
            if frame.ended is not None and frame.ended[0] == rid and type(frame.ended[0]) is type(rid):
                raise NoAnswer(f"{frame.ended[1]}: no JSON-RPC answer to {what} (id {rid!r})", timed_out=False)
            if not frame.is_json and frame.text.startswith(_undecodable_head(rid)):
                raise NoAnswer(
                    f"{what} (id {rid!r}) was answered with a message too deeply nested to decode", timed_out=False
                )
            v = frame.value
            if frame.is_response and v.get("id") == rid and type(v.get("id")) is type(rid):
                self.observed(began, first=first)
                if self.on_answer is not None:
                    self.on_answer(what, params, v)
                return dict(v)
            if frame.is_request and self.responder is not None:
                answer = self.responder(dict(v))
                if answer is not None:
                    await self.send(answer)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def watch(self, seconds: float) -> list[Frame]:
        """Every frame that arrives in the next ``seconds`` (whatever the gaps between them)."""
        got: list[Frame] = []
        deadline = trio.current_time() + seconds
        while (left := deadline - trio.current_time()) > 0:
            frame = await self.recv(left)
            if frame is None:
                if self._closed_reason() is not None:
                    break
                continue
            if frame.ended is None:
                got.append(frame)
        return got

    async def drain(self, quiet: float) -> list[Frame]:
        """Every frame that arrives until ``quiet`` seconds pass without one (bounded by 10 s)."""
        got: list[Frame] = []
        deadline = trio.current_time() + 10
        while trio.current_time() < deadline:
            frame = await self.recv(quiet)
            if frame is None:
                break
            if frame.ended is None:
                got.append(frame)
        return got

    def _now(self) -> float:
        return time.monotonic() - self.started

    def _record(self, text: str, via: str = "") -> Frame:
        self.exchanges.append(Exchange("<", recorded(f"{via} {text}" if via else text), self._now()))
        try:
            value = json.loads(text)
        except ValueError:
            frame = Frame(text, via=via)
        except RecursionError:  # hostile depth: kept as text, never decoded
            self.note("a message nested too deeply to decode was kept as text")
            frame = Frame(text, via=via)
        else:
            frame = Frame(text, value, True, via=via)
        self.frames.append(frame)
        self.heard = True
        return frame


@dataclass(slots=True)
class Wire(WireBase):
    """A live raw connection to one server process."""

    process: trio.Process
    started: float
    exchanges: BoundedLog[Exchange] = field(default_factory=new_exchanges)
    frames: BoundedLog[Frame] = field(default_factory=new_frames)
    sent: BoundedLog[Any] = field(default_factory=new_sent)
    stderr: bytearray = field(default_factory=bytearray)
    exit_step: str | None = None
    stdout_closed: bool = False
    exit_after_s: float | None = None
    #: set when the shutdown begins: frames are recorded but no longer queued for the check
    closing: bool = False
    #: bytes sent that were not JSON (a framing check): the process is never reused
    tainted: bool = False
    #: stderr bytes received in all (``stderr`` keeps the last MAX_STDERR_BYTES of them)
    stderr_total: int = 0
    #: frames received while closing, or for no reader, and so never queued
    unqueued: int = 0
    _receive: trio.MemoryReceiveChannel[Frame] | None = None
    _next_id: int = 0

    async def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the server's stdin (no newline added)."""
        assert self.process.stdin is not None
        text = data.decode("utf-8", "replace").rstrip("\n")
        self.exchanges.append(Exchange(">", recorded(text), self._now()))
        for line in text.split("\n"):
            try:
                self.sent.append(json.loads(line))
            except ValueError:
                self.tainted = True
        try:
            with trio.fail_after(5):
                await self.process.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as exc:
            self.note(f"write failed: {exc!r}")

    async def send(self, message: Any) -> None:
        """Write one JSON value as one line."""
        await self.send_bytes(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")

    def _closed_reason(self) -> str | None:
        return "the server closed its stdout" if self.stdout_closed else None

    async def close_stdin(self) -> None:
        if self.process.stdin is not None:
            self.note("stdin closed")
            with trio.move_on_after(1):
                await self.process.stdin.aclose()

    def begin_closing(self) -> None:
        """From now on nothing is queued for the check, so a server still writing is never blocked
        by a full queue while it is asked to exit (SV-08 would blame it)."""
        self.closing = True
        self.unqueued += self.discard_queued()


async def _deliver(wire: Wire, send: trio.MemorySendChannel[Frame], frame: Frame) -> None:
    """Queue ``frame`` for the check; waits while the queue is full, unless the wire is closing."""
    if wire.closing:
        wire.unqueued += 1
        return
    try:
        send.send_nowait(frame)
    except trio.WouldBlock:
        await send.send(frame)  # backpressure: the server waits for the check, as for any client
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        wire.unqueued += 1


async def _read_stdout(wire: Wire, send: trio.MemorySendChannel[Frame]) -> None:
    stream = wire.process.stdout
    assert stream is not None
    buffer = bytearray()
    async with send:
        try:
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                buffer += chunk
                while (cut := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:cut]).rstrip(b"\r")
                    del buffer[: cut + 1]
                    if line.strip():
                        await _deliver(wire, send, wire._record(line.decode("utf-8", "replace")))
                if len(buffer) > MAX_LINE_BYTES:
                    text = bytes(buffer[:200]).decode("utf-8", "replace") + "...(truncated)"
                    await _deliver(wire, send, wire._record(text))
                    buffer.clear()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        if buffer.strip():
            await _deliver(wire, send, wire._record(bytes(buffer).decode("utf-8", "replace")))
    wire.stdout_closed = True
    wire.note("stdout closed")


async def _read_stderr(wire: Wire) -> None:
    stream = wire.process.stderr
    assert stream is not None
    try:
        while chunk := await stream.receive_some(65536):
            wire.stderr += chunk
            wire.stderr_total += len(chunk)
            if len(wire.stderr) > MAX_STDERR_BYTES:
                del wire.stderr[: len(wire.stderr) - MAX_STDERR_BYTES]
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    signal_group(process.pid, sig, fallback=process.send_signal)


async def shutdown(wire: Wire, *, eof_grace: float = EOF_GRACE_S) -> None:
    """Close stdin, then SIGTERM, then SIGKILL, each bounded (the client's own escalation);
    records the step that ended it."""
    if wire.exit_step is not None:
        return
    process = wire.process
    begin = time.monotonic()
    wire.begin_closing()
    step = await end_process(
        process, close_stdin=wire.close_stdin, eof_grace=eof_grace, term_grace=TERM_GRACE_S, label="check"
    )
    # a process already gone when shutdown began left by itself, as one that exits on EOF does
    wire.exit_step = ExitStep.EOF.value if step is ExitStep.GONE else step.value
    wire.exit_after_s = time.monotonic() - begin
    wire.note(f"process ended after {wire.exit_step} ({wire.exit_after_s:.2f} s, status {process.returncode})")


def leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """Every exception in ``group``, nested groups flattened."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


@contextmanager
def lone_errors() -> Iterator[None]:
    """A lone exception out of the nurseries inside comes out as itself, not wrapped in a group
    (the caller's own exception, or the run's, as callers expect it)."""
    try:
        yield
    except BaseExceptionGroup as group:
        found = leaves(group)
        if len(found) == 1:
            raise found[0] from None
        raise


@asynccontextmanager
async def open_wire(
    argv: Sequence[str], *, env: dict[str, str] | None = None, eof_grace: float = EOF_GRACE_S, cwd: str | None = None
) -> AsyncIterator[Wire]:
    """Spawn ``argv`` with piped stdio and yield its :class:`Wire`; the process is always reaped.

    Cancellation: the shutdown runs shielded and bounded (at most about 8 s).
    """
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    wire = Wire(process, time.monotonic())
    send, receive = trio.open_memory_channel[Frame](MAX_QUEUED_FRAMES)
    wire._receive = receive
    _log.debug("spawned %s (pid %d)", argv[0], process.pid)
    try:
        with lone_errors():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_read_stdout, wire, send)
                nursery.start_soon(_read_stderr, wire)
                try:
                    yield wire
                finally:
                    with trio.CancelScope(shield=True):
                        await shutdown(wire, eof_grace=eof_grace)
                    nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                _signal_group(process, signal.SIGKILL)
                with trio.move_on_after(5):
                    await process.wait()
