"""Server processes for one run: started on demand, shut down in the background, reused when safe.

Theory of operation: starting a server process is most of what a stdio check costs (an
interpreter or a runtime starting, imports, the handshake), and most checks only list or read.
A :class:`WirePool` owns every process of a run in its own nursery; a check borrows one as a
:class:`Lease` and gives it back, and the process is shut down (stdin closed, SIGTERM, SIGKILL,
each bounded, as :func:`.harness.open_wire` does) in the background, so the next check need not
wait for it.

A *session* lease (``Context.session()`` with no special capabilities) may get a process that
served earlier checks of the same revision. A process goes back to the pool only when what the
check did cannot have changed it, judged from the record, never from the check's name:

- the check ended normally or with its verdict (a failure changes nothing in the process; a check
  that could not judge may leave a server busy with its request, so its process is not reused),
  and the process is alive, its stdout open;
- everything sent was a single JSON-RPC request (no batch, no raw bytes) for a method that only
  reads (:data:`READ_ONLY`), one the server refused before doing anything ("method not found",
  "invalid params"), or one in the checker's own namespace (a method ``mcpwire/...``, a
  ``tools/call`` of a tool ``mcpwire-check...``: no server defines one, so nothing ran, whatever
  the answer), each with an id never sent before in the process's session (the pool's, or a
  check's own: SV-02 sends ids of every JSON type, SV-05 a string); the only notifications sent
  were the handshake's ``notifications/initialized``, ``notifications/cancelled`` (every request
  was answered by then, so it cancels nothing) and ``notifications/mcpwire/...`` (SV-04);
- everything received was the response to one of those requests, exactly one each (a server that
  sends an unasked notification or a stray line is never reused), except:

  - JSON-RPC notifications the server sent during its handshake (server-everything announces
    ``notifications/tools/list_changed`` before answering ``initialize``): a later lease finds them
    in its wire's ``frames`` as a fresh process's handshake would have left them, so a check that
    judges what came during the handshake sees the same;
  - at any time, a ``notifications/{tools,prompts,resources}/list_changed`` of a kind whose
    ``listChanged`` the server advertised (a server may send one whenever it likes, and no check
    judges an advertised one; server-everything sends one just after its handshake);
  - at any time, a JSON-RPC request the check left unanswered (FastMCP's proxy relays its
    backend's ``roots/list`` a moment after every handshake): before the process is lent again
    the pool answers it as the checks answer the server's requests (:func:`.harness.canned_answer`:
    no roots, decline, a short text; -32601 for anything else), and every later lease finds the
    request in its ``frames``, after the handshake's notifications, as a fresh process would have
    sent it to that lease; its evidence shows the request and the answer after the handshake. A
    check that judges what the server asks unasked (SV-11) thus judges a reused process as a fresh
    one, and the server is never left waiting for an answer it would time out;

- nothing else arrived while the process waited in the pool (but the same two kinds).

A reused process gets request ids far above those it has seen; a check's own ids are its own
(each check runs once per revision on a pooled process: one that could not judge runs again, but
its process was not reused), and a lease that sends an id the session saw before ends the
process's reuse. Its lease's evidence starts with the process's handshake, so a report shows the
same story as for a fresh process. ``reuse=False`` gives every lease a new process.

A server that is a Python module run as ``python ... -m MODULE`` (``fork_module``, the bundled
reference server; ``fork_preload``: what it imports once it runs) is started as forks of one
process that imported it (:mod:`.forkserver`): each new process is then ready in milliseconds
instead of an interpreter's start-up, and is still a process of its own with its own pipes, exit
status and signals. If that process cannot be started, the pool runs the command as given.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from . import forkserver
from .evidence import WireRecord
from .harness import (
    Exchange,
    Frame,
    Wire,
    canned_answer,
    new_exchanges,
    new_frames,
    new_sent,
    open_wire,
    recorded,
)

__all__ = ["READ_ONLY", "Lease", "WirePool"]

_log = logging.getLogger("mcpwire.check.pool")

#: methods that only read: a session that served nothing else is as good as new
READ_ONLY: Final = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    }
)
#: error codes that say a request was refused before anything was done
REFUSED: Final = frozenset({-32601, -32602})
#: notifications a check may send without changing the session (see the module docstring)
HARMLESS_NOTIFICATIONS: Final = frozenset({"notifications/cancelled"})
#: the checker's own namespace: no server defines a method, notification or tool named so, so a
#: request for one runs nothing, whatever the answer (SV-03, SV-04, SV-05 and SV-31 ask for them)
OWN_METHOD_PREFIXES: Final = ("mcpwire/", "notifications/mcpwire/")
OWN_TOOL_PREFIXES: Final = ("mcpwire-check", "mcpwire_check")
#: request ids of the n-th reuse of a process start at n times this
ID_STRIDE: Final = 1_000_000
#: seconds the fork server gets to import the server's module and listen
ZYGOTE_START_S: Final = 30.0
#: seconds the fork server outlives the end of the run while its last processes shut down
ZYGOTE_LINGER_S: Final = 20.0


@dataclass(slots=True, eq=False)
class _Process:
    wire: Wire
    revision: str | None
    close: trio.Event
    #: the exchanges of the handshake, then the server's unasked requests and the pool's answers:
    #: shown first in the evidence of later leases (None: the process is never lent again)
    history: tuple[Exchange, ...] | None = None
    #: the notifications the server sent during the handshake, then its unasked requests: in the
    #: frames of every later lease
    announced: tuple[Frame, ...] = ()
    #: unasked requests the pool answers before it lends the process again, and their exchanges
    unanswered: tuple[Frame, ...] = ()
    unanswered_exchanges: tuple[Exchange, ...] = ()
    #: the list_changed notifications the server may send at any time (it advertised them)
    may_announce: frozenset[str] = frozenset()
    #: leases served so far
    uses: int = 0
    #: every request id the leases given back sent (with its JSON type): none is sent again
    ids: set[tuple[type, Any]] = field(default_factory=set)


@dataclass(slots=True, eq=False)
class Lease:
    """A process lent to one check. ``fresh``: no check used it before (no handshake yet)."""

    wire: Wire
    fresh: bool
    _process: _Process
    _stderr_mark: int = 0
    _first_id: int = 0
    _given_back: bool = False
    _record: WireRecord | None = field(default=None)

    def record(self) -> WireRecord:
        """What this lease recorded (its evidence); fixed once the lease is given back."""
        if self._record is not None:
            return self._record
        wire, process = self.wire, self._process
        new_stderr = wire.stderr_total - self._stderr_mark
        stderr = bytes(wire.stderr[-new_stderr:]) if new_stderr > 0 else b""
        exchanges: Sequence[Exchange] = wire.exchanges
        preface = None
        if not self.fresh and process.history is not None:
            exchanges = [*process.history, *wire.exchanges]
            preface = (
                f"this server process was used {process.uses - 1} time(s) before (by the probe, or by checks that "
                "only listed or read); its handshake is shown first, then any request the server sent unasked since "
                "and the answer it was given"
            )
        return WireRecord(exchanges, dropped=wire.exchanges.dropped, stderr=stderr, preface=preface)


class WirePool:
    """Every stdio server process of one run (see the module docstring).

    Cancellation: processes are shut down shielded and bounded when the pool's nursery is
    cancelled, as :func:`.harness.open_wire` does.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None,
        eof_grace: float,
        cwd: str | None,
        reuse: bool = True,
        fork_module: str | None = None,
        fork_preload: Sequence[str] = (),
    ) -> None:
        self._nursery = nursery
        self._argv = tuple(argv)
        self._env = env
        self._eof_grace = eof_grace
        self._cwd = cwd
        self.reuse = reuse
        self._idle: dict[str, list[_Process]] = {}
        self._all: set[_Process] = set()
        #: processes started and leases served by reusing one, for the run's statistics
        self.started = 0
        self.reused = 0
        self._fork_prefix = _fork_prefix(self._argv, fork_module)
        self._fork_module = fork_module
        self._fork_preload = tuple(fork_preload)
        #: a Python console script is forked too: (interpreter, script, its arguments, its imports)
        self._script = None if self._fork_prefix is not None or not reuse else python_script(self._argv)
        if self._script is not None:
            self._fork_prefix = (self._script[0],)
        self._zygote_lock = trio.Lock()
        self._zygote_socket: str | None = None
        self._closed = trio.Event()
        self._all_gone = trio.Event()

    @property
    def forking(self) -> bool:
        """Whether new processes are forks of a fork server (see the module docstring)."""
        return self._zygote_socket is not None and self._fork_prefix is not None

    async def _command(self) -> tuple[str, ...]:
        """What starts one server process: a fork of the fork server when there is one."""
        if self._fork_prefix is None:
            return self._argv
        async with self._zygote_lock:
            if self._zygote_socket is None and self._fork_prefix is not None:
                try:
                    self._zygote_socket = await self._nursery.start(self._zygote)
                except (OSError, trio.TooSlowError, EOFError) as exc:
                    _log.info("no fork server (%s); starting %s for every process", exc, self._argv[0])
                    self._fork_prefix = None
                    return self._argv
        return tuple(forkserver.shim_argv(self._zygote_socket))

    async def _zygote(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the fork server until the run is over and its processes have ended."""
        assert self._fork_prefix is not None
        home = tempfile.mkdtemp(prefix="mcpwire-fork-")
        try:
            path = f"{home}/socket"
            if self._script is not None:
                # the server's own interpreter runs the fork server's file: it imports what the
                # script imports, once, then forks a child per process that runs the script
                interpreter, script, args, imports = self._script
                module = forkserver.script_module(script)
                command = [interpreter, forkserver.__file__, "zygote", module, path, *imports, "--", *args]
            else:
                assert self._fork_module is not None
                zygote = ("-m", f"{__package__}.forkserver", "zygote", self._fork_module, path, *self._fork_preload)
                command = [*self._fork_prefix, *zygote]
            process = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
            )
            try:
                assert process.stdout is not None and process.stdin is not None
                with trio.fail_after(ZYGOTE_START_S):
                    said = b""
                    while not said.endswith(b"\n"):
                        chunk = await process.stdout.receive_some(64)
                        if not chunk:
                            raise EOFError("the fork server ended before it listened")
                        said += chunk
                if said != forkserver.READY:
                    raise EOFError(f"the fork server said {said[:60]!r}")
                task_status.started(path)
                await self._closed.wait()
                with trio.move_on_after(ZYGOTE_LINGER_S):
                    await self._all_gone.wait()
            finally:
                with trio.CancelScope(shield=True):
                    if process.stdin is not None:
                        await process.stdin.aclose()
                    with trio.move_on_after(2):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        with trio.move_on_after(5):
                            await process.wait()
        finally:
            shutil.rmtree(home, ignore_errors=True)

    async def _keep(self, revision: str | None, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        close = trio.Event()
        argv = await self._command()
        async with open_wire(argv, env=self._env, eof_grace=self._eof_grace, cwd=self._cwd) as wire:
            process = _Process(wire, revision, close)
            self._all.add(process)
            task_status.started(process)
            try:
                await close.wait()
            finally:
                self._all.discard(process)
                if self._closed.is_set() and not self._all:
                    self._all_gone.set()

    async def _start(self, revision: str | None) -> _Process:
        process: _Process = await self._nursery.start(self._keep, revision)
        self.started += 1
        return process

    async def fresh(self) -> Lease:
        """A new process that no other check will use.

        Raises:
            OSError: the command cannot be started.
        """
        process = await self._start(None)
        return self._lend(process, fresh=True)

    async def session(self, revision: str) -> Lease:
        """A process for a session in ``revision``: one an earlier check left clean, or a new one.

        Raises:
            OSError: the command cannot be started.
        """
        idle = self._idle.get(revision, [])
        while idle:
            process = idle.pop()
            if _quiet_while_idle(process):
                await self._answer_unasked(process)
                # what is queued was recorded and judged above: the check reads only what the
                # server sends from now on (a leftover is not the first answer to its request)
                process.wire.discard_queued()
                self.reused += 1
                return self._lend(process, fresh=False)
            process.close.set()
        return self._lend(await self._start(revision), fresh=True)

    async def _answer_unasked(self, process: _Process) -> None:
        """Answer the requests the server sent unasked (during the last lease, or since, while the
        process waited) before the process is lent again; they and the answers join the history
        every later lease shows first, and the requests the frames every later lease finds."""
        wire = process.wire
        arrived = [frame for frame in list(wire.frames)[len(process.announced) :] if _server_request(frame)]
        requests = [*process.unanswered, *arrived]
        if not requests:
            return
        for frame in requests:
            answer = canned_answer(dict(frame.value))
            if answer is not None:
                await wire.send(answer)
        assert process.history is not None  # only a process with a history waits in the pool
        process.history = (*process.history, *process.unanswered_exchanges, *wire.exchanges)
        process.announced = (*process.announced, *requests)
        process.unanswered, process.unanswered_exchanges = (), ()
        _reset(wire, process.announced)

    def _lend(self, process: _Process, *, fresh: bool) -> Lease:
        wire = process.wire
        if not fresh:
            wire.skip_ids(process.uses * ID_STRIDE)
        process.uses += 1
        return Lease(wire, fresh, process, _stderr_mark=wire.stderr_total, _first_id=wire.last_id)

    def handshake_done(self, lease: Lease) -> None:
        """The lease's check completed the handshake: later leases show these exchanges first, and
        find the notifications it brought in their frames (a request it brought is answered before
        the process is lent again, see the module docstring). A process whose handshake brought
        anything else unasked (a line that is no JSON-RPC message) is never reused."""
        process, wire = lease._process, lease.wire
        unasked = [frame for frame in wire.frames if not frame.is_response]
        if all(_notification(frame) or _server_request(frame) for frame in unasked):
            process.history = tuple(wire.exchanges)
            process.announced = tuple(frame for frame in unasked if _notification(frame))
            process.may_announce = _advertised_list_changes(wire)

    def give_back(self, lease: Lease, *, clean: bool) -> WireRecord:
        """End ``lease``: keep the process for another session if it is clean (see the module
        docstring), else shut it down in the background. Returns the lease's evidence."""
        record = lease.record()
        if lease._given_back:
            return record
        lease._given_back = True
        lease._record = record
        process = lease._process
        found = self._reusable(lease) if self.reuse and clean and process.revision is not None else None
        if found is not None and process.revision is not None:
            unasked, ids = found
            process.ids |= ids
            wire = process.wire
            assert process.history is not None  # a reusable lease's process has its history
            # the requests to answer before the next lease, and their exchanges (those of the
            # handshake are in the history already)
            process.unanswered = tuple(unasked)
            process.unanswered_exchanges = tuple(e for e in _exchanges_of(wire, unasked) if e not in process.history)
            _reset(wire, process.announced)
            wire.responder = None
            self._idle.setdefault(process.revision, []).append(process)
        else:
            process.close.set()
        return record

    def _reusable(self, lease: Lease) -> tuple[list[Frame], set[tuple[type, Any]]] | None:
        """When the process may serve another session (see the module docstring): the requests the
        server sent unasked during ``lease`` (to be answered) and the ids of the lease's requests;
        else None."""
        wire, process = lease.wire, lease._process
        if process.history is None or wire.process.returncode is not None:
            return None
        if wire.stdout_closed or wire.closing or wire.exit_step is not None or wire.tainted or wire.unqueued:
            return None
        if wire.frames.dropped or wire.sent.dropped or wire.exchanges.dropped:
            return None
        # every request of the lease by its id (with the id's JSON type: 1 and "1" are two ids),
        # and the method of each that might change something ("" when it only reads)
        asked: dict[tuple[type, Any], str] = {}
        handshake = {"initialize", "notifications/initialized"} if lease.fresh else set()
        for message in wire.sent:
            if not isinstance(message, dict) or not isinstance(message.get("method"), str):
                return None
            method = message["method"]
            if "id" not in message:
                if method not in handshake and method not in HARMLESS_NOTIFICATIONS and not _own(method):
                    return None
                continue
            key = _id_key(message["id"])
            # an id used twice in the process's session, by this check or an earlier one
            if key is None or key in asked or key in process.ids:
                return None
            harmless = method in READ_ONLY or method in handshake or _own(method) or _own_tool(message)
            asked[key] = "" if harmless else method
        answered: set[tuple[type, Any]] = set()
        unasked: list[Frame] = []
        announced = {id(frame) for frame in lease._process.announced}
        for frame in wire.frames:
            if id(frame) in announced or _announcement(frame, lease._process):
                continue
            if _server_request(frame):
                unasked.append(frame)
                continue
            value = frame.value
            if not frame.is_response or "jsonrpc" not in value:
                return None
            key = _id_key(value.get("id"))
            if key is None or key not in asked or key in answered:
                return None
            answered.add(key)
            if asked[key]:  # a method that might change something: harmless only when refused outright
                error = value.get("error")
                code = error.get("code") if isinstance(error, dict) else None
                if type(code) is not int or code not in REFUSED:
                    return None
        if answered != set(asked):
            return None
        return unasked, set(asked)

    def close_idle(self) -> None:
        """Shut down every process waiting in the pool (in the background)."""
        for idle in self._idle.values():
            for process in idle:
                process.close.set()
        self._idle.clear()

    def close_all(self) -> None:
        """Shut down every process of the pool, lent or not (the run is over or cancelled); the
        fork server follows once they have ended."""
        self.close_idle()
        for process in list(self._all):
            process.close.set()
        self._closed.set()
        if not self._all:
            self._all_gone.set()


#: a script larger than this is no console script
_SCRIPT_MAX_BYTES: Final = 16 * 1024
_SHEBANG_PYTHON: Final = re.compile(rb"^#!(/\S*/python[0-9.]*)[ \t]*\r?\n")
_IMPORT: Final = re.compile(r"^(?:from ([A-Za-z_][\w.]*) import |import ([A-Za-z_][\w.]*)\s*$)", re.MULTILINE)


def python_script(argv: Sequence[str]) -> tuple[str, str, tuple[str, ...], tuple[str, ...]] | None:
    """``(interpreter, script, arguments, imports)`` when ``argv`` runs a Python console script
    (a small file whose first line names a Python interpreter by absolute path, as pip writes
    ``mcp-server-time``), so its processes may be forks of one process that imported it; else None.

    Start-up is most of what such a server's process costs (2 s of imports on a busy machine, a
    hundred processes a run); a fork is ready in milliseconds and is otherwise the same process.
    """
    if not argv or not forkserver.available():
        return None
    found = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if found is None:
        return None
    try:
        with open(found, "rb") as file:
            head = file.read(_SCRIPT_MAX_BYTES + 1)
    except OSError:
        return None
    match = _SHEBANG_PYTHON.match(head)
    if match is None or len(head) > _SCRIPT_MAX_BYTES or b"__main__" not in head:
        return None
    interpreter = match.group(1).decode("utf-8", "replace")
    if not os.access(interpreter, os.X_OK):
        return None
    text = head.decode("utf-8", "replace")
    imports = tuple(dict.fromkeys(a or b for a, b in _IMPORT.findall(text)))
    return interpreter, os.path.abspath(found), tuple(argv[1:]), imports


def _fork_prefix(argv: tuple[str, ...], module: str | None) -> tuple[str, ...] | None:
    """The interpreter and its options of ``argv`` when it runs ``module`` (``... -m MODULE``) and
    this platform can fork it, else None."""
    if module is None or not forkserver.available() or len(argv) < 3 or argv[-2:] != ("-m", module):
        return None
    return argv[:-2]


def _quiet_while_idle(process: _Process) -> bool:
    """Nothing arrived (but advertised list_changed notifications and requests, which the pool
    answers), and the process lives, since the process went back to the pool."""
    wire = process.wire
    if wire.stdout_closed or wire.process.returncode is not None:
        return False
    arrived = list(wire.frames)[len(process.announced) :]
    return all(_announcement(frame, process) or _server_request(frame) for frame in arrived)


def _reset(wire: Wire, announced: Sequence[Frame]) -> None:
    """New records for the next lease; its frames start with what every later lease finds."""
    wire.exchanges, wire.frames, wire.sent = new_exchanges(), new_frames(), new_sent()
    for frame in announced:
        wire.frames.append(frame)


def _notification(frame: Frame) -> bool:
    return frame.is_notification and frame.value.get("jsonrpc") == "2.0"


def _server_request(frame: Frame) -> bool:
    """``frame`` is a JSON-RPC request from the server (the pool can answer it)."""
    if not frame.is_request:
        return False
    value = frame.value
    return value.get("jsonrpc") == "2.0" and isinstance(value.get("method"), str) and type(value["id"]) in (int, str)


def _id_key(rid: Any) -> tuple[type, Any] | None:
    """A request id with its JSON type (None: not an integer or a string)."""
    return (type(rid), rid) if type(rid) in (int, str) else None


def _own(method: str) -> bool:
    return method.startswith(OWN_METHOD_PREFIXES)


def _own_tool(message: dict[str, Any]) -> bool:
    """A ``tools/call`` of a tool named in the checker's own namespace (no server offers one)."""
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return message.get("method") == "tools/call" and isinstance(name, str) and name.startswith(OWN_TOOL_PREFIXES)


def _exchanges_of(wire: Wire, frames: Sequence[Frame]) -> list[Exchange]:
    """The recorded exchanges of ``frames`` (received), in the wire's order."""
    texts = {recorded(frame.text) for frame in frames}
    return [e for e in wire.exchanges if e.direction == "<" and e.text in texts]


def _announcement(frame: Frame, process: _Process) -> bool:
    """``frame`` is a list_changed notification the server advertised (harmless at any time)."""
    value = frame.value
    return frame.is_notification and value.get("jsonrpc") == "2.0" and value.get("method") in process.may_announce


def _advertised_list_changes(wire: Wire) -> frozenset[str]:
    """The list_changed notifications the handshake's answer advertised (``listChanged: true``)."""
    for frame in wire.frames:
        result = frame.value.get("result") if frame.is_response else None
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        if isinstance(capabilities, dict):
            return frozenset(
                f"notifications/{kind}/list_changed"
                for kind in ("tools", "prompts", "resources")
                if isinstance(capabilities.get(kind), dict) and capabilities[kind].get("listChanged") is True
            )
    return frozenset()
