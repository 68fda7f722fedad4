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

- the check ended normally and the process is alive, its stdout open;
- everything sent was a single JSON-RPC request (no batch, no raw bytes) for a method that only
  reads (:data:`READ_ONLY`), or one the server refused before doing anything ("method not found",
  "invalid params"), every one with an id this pool chose; the only notifications sent were the
  handshake's ``notifications/initialized`` and ``notifications/cancelled`` (every request was
  answered by then, so it cancels nothing);
- everything received was the response to one of those requests, exactly one each (a server that
  sends anything unasked, a notification, a request or a stray line, is never reused);
- nothing arrived while the process waited in the pool.

A reused process gets request ids far above those it has seen (no id is used twice in a
session), and its lease's evidence starts with the process's handshake, so a report shows the
same story as for a fresh process. ``reuse=False`` gives every lease a new process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from .evidence import WireRecord
from .harness import Exchange, Wire, new_exchanges, new_frames, new_sent, open_wire

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
#: request ids of the n-th reuse of a process start at n times this
ID_STRIDE: Final = 1_000_000


@dataclass(slots=True, eq=False)
class _Process:
    wire: Wire
    revision: str | None
    close: trio.Event
    #: the exchanges of the handshake, shown first in the evidence of later leases
    handshake: tuple[Exchange, ...] | None = None
    #: leases served so far
    uses: int = 0


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
        if not self.fresh and process.handshake is not None:
            exchanges = [*process.handshake, *wire.exchanges]
            preface = (
                f"this server process was used {process.uses - 1} time(s) before (by the probe, or by checks that "
                "only listed or read, with nothing unasked from the server); its handshake is shown first"
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

    async def _keep(self, revision: str | None, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        close = trio.Event()
        async with open_wire(self._argv, env=self._env, eof_grace=self._eof_grace, cwd=self._cwd) as wire:
            process = _Process(wire, revision, close)
            self._all.add(process)
            task_status.started(process)
            try:
                await close.wait()
            finally:
                self._all.discard(process)

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
            if _quiet_while_idle(process.wire):
                self.reused += 1
                return self._lend(process, fresh=False)
            process.close.set()
        return self._lend(await self._start(revision), fresh=True)

    def _lend(self, process: _Process, *, fresh: bool) -> Lease:
        wire = process.wire
        if not fresh:
            wire.skip_ids(process.uses * ID_STRIDE)
        process.uses += 1
        return Lease(wire, fresh, process, _stderr_mark=wire.stderr_total, _first_id=wire.last_id)

    def handshake_done(self, lease: Lease) -> None:
        """The lease's check completed the handshake: later leases show these exchanges first."""
        lease._process.handshake = tuple(lease.wire.exchanges)

    def give_back(self, lease: Lease, *, clean: bool) -> WireRecord:
        """End ``lease``: keep the process for another session if it is clean (see the module
        docstring), else shut it down in the background. Returns the lease's evidence."""
        record = lease.record()
        if lease._given_back:
            return record
        lease._given_back = True
        lease._record = record
        process = lease._process
        if self.reuse and clean and process.revision is not None and self._reusable(lease):
            wire = process.wire
            wire.exchanges, wire.frames, wire.sent = new_exchanges(), new_frames(), new_sent()
            wire.responder = None
            self._idle.setdefault(process.revision, []).append(process)
        else:
            process.close.set()
        return record

    def _reusable(self, lease: Lease) -> bool:
        wire, process = lease.wire, lease._process
        if process.handshake is None or wire.process.returncode is not None:
            return False
        if wire.stdout_closed or wire.closing or wire.exit_step is not None or wire.tainted or wire.unqueued:
            return False
        if wire.frames.dropped or wire.sent.dropped or wire.exchanges.dropped:
            return False
        asked: dict[int, str] = {}
        handshake = {"initialize", "notifications/initialized"} if lease.fresh else set()
        for message in wire.sent:
            if not isinstance(message, dict) or not isinstance(message.get("method"), str):
                return False
            method = message["method"]
            if "id" not in message:
                if method not in handshake and method not in HARMLESS_NOTIFICATIONS:
                    return False
                continue
            rid = message["id"]
            if type(rid) is not int or rid <= lease._first_id or rid in asked:
                return False
            if method not in READ_ONLY and method not in handshake:
                asked[rid] = method
            else:
                asked[rid] = ""
        answered: set[int] = set()
        for frame in wire.frames:
            value = frame.value
            if not frame.is_response or "jsonrpc" not in value:
                return False
            rid = value.get("id")
            if type(rid) is not int or rid not in asked or rid in answered:
                return False
            answered.add(rid)
            if asked[rid]:  # a method that might change something: harmless only when refused outright
                error = value.get("error")
                code = error.get("code") if isinstance(error, dict) else None
                if type(code) is not int or code not in REFUSED:
                    return False
        return answered == set(asked)

    def close_idle(self) -> None:
        """Shut down every process waiting in the pool (in the background)."""
        for idle in self._idle.values():
            for process in idle:
                process.close.set()
        self._idle.clear()

    def close_all(self) -> None:
        """Shut down every process of the pool, lent or not (the run is over or cancelled)."""
        self.close_idle()
        for process in list(self._all):
            process.close.set()


def _quiet_while_idle(wire: Wire) -> bool:
    """Nothing arrived, and the process lives, since the process went back to the pool."""
    return not wire.frames and not wire.stdout_closed and wire.process.returncode is None
