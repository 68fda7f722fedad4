"""Approvals as objects: a call that needs a person's decision becomes an :class:`Approval` with
an id and a state, kept in an :class:`ApprovalQueue` that any part of a program can list and
decide.

Theory of operation: the approval policy opens an approval (``PENDING``) when a call's decision is
"ask", then waits for it. A decision comes from :meth:`ApprovalQueue.decide` (a person, through the
command line, an API or the library) or from an approver callable that the policy runs alongside
(the command line's prompt, the gateway's elicitation); whichever lands first wins, since a
decision is only taken while the approval is still pending. A CRITICAL call needs two
confirmations: the first leaves it pending with ``confirmations == 1``; editing the arguments
restarts the count, so the arguments that run are the ones confirmed twice. Silence past
``expires_at`` makes it ``EXPIRED``, which denies the call.

An approval lives only as long as its caller. While it waits, the policy follows whoever waits
for the answer (:class:`~mcpwire.host.policies.Caller`): the approval shows whether that caller is
present (``caller_present``, ``caller_away_since``), and once the caller is gone for good (its
task cancelled, its request cancelled, its stream or session closed, its connection not resumed
in time) the approval ends as ``ABANDONED``: the call is never sent, and the approval can no
longer be approved. Each decision records who took it (``decided_by``: a person, a token, a
callback's name, the caller) and through what (``decided_via``: console, api, callback, caller).

Approvals live in an :class:`ApprovalBackend`. The default keeps them in memory
(:class:`MemoryApprovals`, bounded). A service passes its store instead, so approvals survive a
restart and several processes share them: the waiting process then polls
:meth:`ApprovalBackend.changed_since` at a bounded interval, so a decision made in another process
releases the waiting call within ``poll_interval`` seconds. Each saved change carries a version one
higher than the last; a shared backend refuses a stale one (:class:`ApprovalConflict`), so two
processes deciding the same approval at once cannot both win.

Times are epoch seconds (``clock``, :func:`time.time` by default). Waits are bounded twice: by the
wall clock (``expires_at``, which another process can see) and by a trio deadline taken when the
wait starts, so a wait ends even when the two clocks disagree.
"""

from __future__ import annotations

import enum
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final, Protocol, runtime_checkable

import msgspec
import trio

from ..errors import HostError
from ..protocol.types import JSONObject
from .policies.context import DEFAULT_APPROVAL_TIMEOUT, ApprovalRequest, Risk

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "Approval",
    "ApprovalBackend",
    "ApprovalConflict",
    "ApprovalNotPending",
    "ApprovalQueue",
    "ApprovalState",
    "MemoryApprovals",
    "UnknownApproval",
]

log = logging.getLogger("mcpwire.host.approvals")

#: seconds between polls of a shared backend while a call waits
DEFAULT_POLL_INTERVAL: Final = 0.5
#: decided approvals an in-memory backend keeps
DEFAULT_KEEP: Final = 1000
#: approvals whose last version a queue remembers (so a change is announced once)
NOTIFIED_KEPT: Final = 10_000
#: saves a decision tries when the approval changed meanwhile (its caller's presence)
DECIDE_TRIES: Final = 3


class ApprovalState(enum.Enum):
    PENDING = "pending"  #: waiting for a decision (or for a second confirmation)
    APPROVED = "approved"  #: the call may run (with ``final_arguments`` when edited)
    DENIED = "denied"  #: someone said no
    EXPIRED = "expired"  #: no decision in time; the call is denied
    ABANDONED = "abandoned"  #: the caller went away before a decision; the call never runs


class UnknownApproval(HostError):
    """No approval has that id."""


class ApprovalNotPending(HostError):
    """The approval was already decided, has expired or was abandoned, so it cannot be decided."""


class ApprovalConflict(HostError):
    """A backend refused a change because another one was saved first (a stale version)."""


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    """One call waiting for (or past) a decision.

    Attributes:
        id: unique and unguessable.
        tool: the tool's name on its server; ``name`` is the namespaced name the caller used.
        arguments: what the caller asked for; ``final_arguments`` is set when a decision edited
            them (the call then runs with those).
        reason: the decider's reason (for a denial, or given with an approval).
        why: why the call needed approval (the rule, or its risk against the threshold).
        created_at, expires_at, decided_at: epoch seconds.
        decided_by: who took the last decision (a person or a token once known, else the channel
            and address, such as ``console 127.0.0.1``; a callback's name; the caller); ``None``
            when nobody did (expired, abandoned). ``confirmed_by`` lists each confirmation.
        decided_via: the channel of that decision: ``console``, ``api``, ``callback`` (the
            library's or an agent's approver), ``caller`` (the calling client's user, where the
            policy is ``ask-caller``) or ``queue`` (a program deciding on the queue).
        caller_present: whether whoever waits for the call's answer could receive it now;
            ``caller_away_since`` is when it stopped (it may come back until its transport gives
            up on it; then the approval is abandoned).
        confirmations, confirmations_needed: a CRITICAL call needs two.
        context: where the call came from (``trace_id``, ``run_id``, ``caller``...).
        version: one more with each saved change (for backends shared between processes).
    """

    id: str
    state: ApprovalState
    risk: Risk
    server: str
    tool: str
    name: str
    arguments: JSONObject
    final_arguments: JSONObject | None = None
    reason: str | None = None
    why: str = ""
    created_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    decided_via: str | None = None
    confirmations: int = 0
    confirmations_needed: int = 1
    confirmed_by: tuple[str, ...] = ()
    context: dict[str, str] = msgspec.field(default_factory=dict)
    caller_present: bool = True
    caller_away_since: float | None = None
    version: int = 1

    @property
    def pending(self) -> bool:
        return self.state is ApprovalState.PENDING

    @property
    def arguments_to_run(self) -> JSONObject:
        """The arguments the call runs with once approved."""
        return self.arguments if self.final_arguments is None else self.final_arguments

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (state and risk as lower-case words), for APIs and stores."""
        data: dict[str, object] = msgspec.to_builtins(self)
        data["state"] = self.state.value
        data["risk"] = self.risk.name.lower()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Approval:
        """The inverse of :meth:`to_dict` (also accepts the risk as its number).

        Raises:
            msgspec.ValidationError: a field is missing or of the wrong type.
        """
        values = dict(data)
        risk = values.get("risk")
        if isinstance(risk, str):
            try:
                values["risk"] = Risk[risk.upper()].value
            except KeyError:
                raise msgspec.ValidationError(f"unknown risk level {risk!r} - at `$.risk`") from None
        return msgspec.convert(values, cls)


@runtime_checkable
class ApprovalBackend(Protocol):
    """Where approvals are kept. Every method may block (a database), so every one is async.

    ``changed_since(cursor)`` returns the approvals saved after ``cursor`` (oldest first) and the
    cursor to pass next time; ``None`` means "from now": no approvals, only the current cursor.
    Cursors are opaque strings. A backend shared between processes should refuse, with
    :class:`ApprovalConflict`, a save whose ``version`` is not one more than the stored one (a
    new approval has version 1).
    """

    async def save(self, approval: Approval) -> None: ...

    async def load(self, id: str) -> Approval | None: ...

    async def pending(self) -> list[Approval]: ...

    async def changed_since(self, cursor: str | None) -> tuple[list[Approval], str]: ...


class MemoryApprovals:
    """Approvals in memory: every pending one, and the last ``keep`` decided ones.

    Enforces versions as a shared backend must, so one instance may serve several queues (tests
    use it so for two "processes").
    """

    def __init__(self, *, keep: int = DEFAULT_KEEP) -> None:
        self._items: OrderedDict[str, Approval] = OrderedDict()
        self._log: list[tuple[int, str]] = []  # (sequence, id), for changed_since
        self._sequence = 0
        self._keep = keep

    async def save(self, approval: Approval) -> None:
        old = self._items.get(approval.id)
        expected = 1 if old is None else old.version + 1
        if approval.version != expected:
            raise ApprovalConflict(
                f"approval {approval.id} changed elsewhere (stored version "
                f"{0 if old is None else old.version}, saving {approval.version})"
            )
        self._items[approval.id] = approval
        self._items.move_to_end(approval.id)
        self._sequence += 1
        self._log.append((self._sequence, approval.id))
        self._trim()

    def _trim(self) -> None:
        decided = [k for k, a in self._items.items() if not a.pending]
        for key in decided[: max(0, len(decided) - self._keep)]:
            del self._items[key]
        if len(self._log) > 4 * (self._keep + len(self._items)):
            self._log = self._log[len(self._log) // 2 :]

    async def load(self, id: str) -> Approval | None:
        return self._items.get(id)

    async def pending(self) -> list[Approval]:
        return [a for a in self._items.values() if a.pending]

    async def changed_since(self, cursor: str | None) -> tuple[list[Approval], str]:
        if cursor is None:
            return [], str(self._sequence)
        after = int(cursor)
        ids = dict.fromkeys(i for seq, i in self._log if seq > after)
        return [self._items[i] for i in ids if i in self._items], str(self._sequence)


class ApprovalQueue:
    """Approvals of one host (or shared by several, through a backend).

    Args:
        backend: where approvals live; in memory by default. With a backend given, waits also
            poll it, so decisions made by other processes are seen.
        poll_interval: seconds between those polls.
        clock: epoch seconds (tests pass their own).

    Every method is async because a backend may block. Listeners (:meth:`on_change`) hear of each
    approval opened, confirmed, decided or expired, here or (while something waits) elsewhere.
    """

    def __init__(
        self,
        backend: ApprovalBackend | None = None,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, not {poll_interval!r}")
        self.backend: ApprovalBackend = MemoryApprovals() if backend is None else backend
        self.shared = backend is not None
        self.poll_interval = poll_interval
        self._clock = clock
        self._known: dict[str, Approval] = {}  # approvals someone here waits for
        self._waiting: dict[str, int] = {}
        self._notified: OrderedDict[str, int] = OrderedDict()  # id -> the last version heard of
        self._events: dict[str, trio.Event] = {}
        self._listeners: list[tuple[Callable[[Approval], None], bool]] = []
        self._cursor: str | None = None
        self._poll_lock = trio.Lock()

    # -- listening ------------------------------------------------------------------------------

    def on_change(self, listener: Callable[[Approval], None], *, local_only: bool = False) -> Callable[[], None]:
        """Calls ``listener(approval)`` on every change seen (only those made through this queue
        with ``local_only``); returns a function that stops it."""
        entry = (listener, local_only)
        self._listeners.append(entry)

        def stop() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)

        return stop

    def _changed(self, approval: Approval, *, local: bool = False) -> None:
        if self._notified.get(approval.id, 0) >= approval.version:
            # seen already (a poll returns our own saves too), or an older copy; a poll that ran
            # while our own save was in flight told only the listeners of every change: those of
            # this queue's own changes (the audit record of a decision made here) hear it now
            if local:
                self._tell(approval, local_only=True)
            return
        self._notified[approval.id] = approval.version
        self._notified.move_to_end(approval.id)
        if len(self._notified) > NOTIFIED_KEPT:
            self._notified.popitem(last=False)
        if approval.id in self._known:
            self._known[approval.id] = approval
        event = self._events.pop(approval.id, None)
        if event is not None:
            event.set()
        self._tell(approval, local_only=None if local else False)

    def _tell(self, approval: Approval, *, local_only: bool | None) -> None:
        """Calls the listeners whose ``local_only`` is the one given (None: every listener)."""
        for listener, only_local in list(self._listeners):
            if local_only is not None and only_local != local_only:
                continue
            try:
                listener(approval)
            except Exception:
                log.exception("an approval listener failed")

    async def _save(self, approval: Approval) -> Approval:
        await self.backend.save(approval)
        self._changed(approval, local=True)
        return approval

    # -- the API --------------------------------------------------------------------------------

    async def open(
        self,
        request: ApprovalRequest,
        *,
        timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        context: Mapping[str, str] | None = None,
    ) -> Approval:
        """Opens a pending approval for ``request`` that expires ``timeout`` seconds from now.

        ``context`` (trace id, run id, caller) is added to the request's own. The request's
        ``reason`` becomes the approval's ``why``; its ``confirmations_needed`` is kept.
        """
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        await self._follow()
        now = self._clock()
        approval = Approval(
            id="apv_" + secrets.token_urlsafe(12),
            state=ApprovalState.PENDING,
            risk=request.risk,
            server=request.server,
            tool=request.tool,
            name=request.name,
            arguments=dict(request.arguments),  # type: ignore[arg-type]
            why=request.reason,
            created_at=now,
            expires_at=now + timeout,
            confirmations_needed=max(1, request.confirmations_needed),
            context={**request.context, **(context or {})},
        )
        return await self._save(approval)

    async def get(self, id: str) -> Approval:
        """The approval ``id`` as it is now (an overdue pending one is marked expired).

        Raises:
            UnknownApproval: no such approval.
        """
        approval = await self.backend.load(id)
        if approval is None:
            raise UnknownApproval(f"no approval with id {id!r}")
        if approval.pending and self._clock() >= approval.expires_at:
            approval = await self._expire(approval, "no decision before it expired")
        elif approval.id in self._known and approval != self._known[approval.id]:
            self._changed(approval)
        return approval

    async def pending(self) -> list[Approval]:
        """Every pending approval, oldest first (overdue ones are marked expired and left out)."""
        out: list[Approval] = []
        now = self._clock()
        for approval in sorted(await self.backend.pending(), key=lambda a: a.created_at):
            if now >= approval.expires_at:
                await self._expire(approval, "no decision before it expired")
            else:
                out.append(approval)
        return out

    async def decide(
        self,
        id: str,
        *,
        approve: bool,
        arguments: Mapping[str, object] | None = None,
        reason: str | None = None,
        by: str | None = None,
        via: str | None = "queue",
    ) -> Approval:
        """Approves or denies ``id``; approving with ``arguments`` runs the call with those.

        A CRITICAL call needs ``confirmations_needed`` approvals: until then it stays pending.
        New arguments restart the count. A denial is final at once. ``by`` and ``via`` record who
        decided and through what (see :class:`Approval`).

        Raises:
            UnknownApproval: no such approval.
            ApprovalNotPending: it was already decided, has expired or was abandoned (its
                caller went away: approving it would run a call nobody waits for).
        """
        for _ in range(DECIDE_TRIES):
            current = await self.get(id)
            if not current.pending:
                raise ApprovalNotPending(_not_pending(current))
            update = self._decision(current, approve=approve, arguments=arguments, reason=reason, by=by, via=via)
            try:
                return await self._save(update)
            except ApprovalConflict:
                latest = await self.get(id)
                if latest.pending and _same_question(latest, current):
                    continue  # only its caller's presence changed meanwhile: decide again
                if not latest.pending:
                    raise ApprovalNotPending(_not_pending(latest)) from None
                raise ApprovalNotPending(
                    f"approval {id} was changed by someone else meanwhile (now {latest.confirmations} of "
                    f"{latest.confirmations_needed} confirmations); look at it again and decide"
                ) from None
        raise ApprovalNotPending(f"approval {id} keeps changing while it is decided; try again")

    def _decision(
        self,
        current: Approval,
        *,
        approve: bool,
        arguments: Mapping[str, object] | None,
        reason: str | None,
        by: str | None,
        via: str | None,
    ) -> Approval:
        now = self._clock()
        if not approve:
            return msgspec.structs.replace(
                current,
                state=ApprovalState.DENIED,
                reason=reason,
                decided_at=now,
                decided_by=by,
                decided_via=via,
                version=current.version + 1,
            )
        final = current.final_arguments
        count = current.confirmations + 1
        confirmed = (*current.confirmed_by, by or "")
        if arguments is not None and dict(arguments) != current.arguments_to_run:
            final = dict(arguments)  # type: ignore[arg-type]
            count, confirmed = 1, (by or "",)  # changed arguments need their own confirmations
        done = count >= current.confirmations_needed
        return msgspec.structs.replace(
            current,
            state=ApprovalState.APPROVED if done else ApprovalState.PENDING,
            final_arguments=final,
            reason=reason if reason is not None else current.reason,
            decided_at=now if done else None,
            decided_by=by,
            decided_via=via,
            confirmations=count,
            confirmed_by=confirmed,
            version=current.version + 1,
        )

    async def mark_caller(self, id: str, *, present: bool) -> Approval | None:
        """Records whether the caller of a pending approval is present (its away time starts
        now); ``None`` when there is no such approval. A decided one is left as it is."""
        for _ in range(DECIDE_TRIES):
            approval = await self.backend.load(id)
            if approval is None or not approval.pending or approval.caller_present == present:
                return approval
            update = msgspec.structs.replace(
                approval,
                caller_present=present,
                caller_away_since=None if present else self._clock(),
                version=approval.version + 1,
            )
            try:
                return await self._save(update)
            except ApprovalConflict:
                continue  # decided or confirmed meanwhile: look again
        return await self.backend.load(id)

    async def wait(self, id: str, *, timeout: float) -> Approval:
        """Waits until ``id`` is decided or expires (then marks it expired), for at most
        ``timeout`` seconds; after that it returns the approval as it is (maybe still pending).

        Raises:
            UnknownApproval: no such approval.

        Cancellation: only the wait ends; the approval stays as it is.
        """
        await self._follow()
        approval = await self.get(id)
        self._waiting[id] = self._waiting.get(id, 0) + 1
        self._known[id] = approval
        try:
            now = trio.current_time()
            until_expiry = now + max(0.0, approval.expires_at - self._clock())
            give_up = now + max(0.0, timeout)
            while approval.pending:
                deadline = min(until_expiry, give_up)
                if trio.current_time() >= deadline:
                    if deadline == until_expiry:
                        approval = await self._expire(approval, "no decision before it expired")
                    break
                event = self._events.setdefault(id, trio.Event())
                step = min(deadline, trio.current_time() + self.poll_interval) if self.shared else deadline
                with trio.move_on_at(step):
                    await event.wait()
                if self.shared:
                    await self.poll()
                approval = self._known[id]
            return approval
        finally:
            self._waiting[id] -= 1
            if not self._waiting[id]:
                del self._waiting[id]
                self._known.pop(id, None)

    async def withdraw(self, id: str, reason: str) -> Approval | None:
        """Marks a still-pending approval expired (no decision in time); ``None`` when unknown."""
        return await self._end(id, reason, ApprovalState.EXPIRED)

    async def abandon(self, id: str, reason: str) -> Approval | None:
        """Marks a still-pending approval abandoned (its caller went away: ``reason`` says how);
        it can no longer be approved. ``None`` when unknown; a decided one is returned as it is."""
        return await self._end(id, reason, ApprovalState.ABANDONED)

    async def _end(self, id: str, reason: str, state: ApprovalState) -> Approval | None:
        try:
            approval = await self.backend.load(id)
        except Exception:  # a backend failing here must not hide why the caller stopped
            log.exception("cannot end approval %s", id)
            return None
        if approval is None or not approval.pending:
            return approval
        try:
            return await self._expire(approval, reason, state=state)
        except (ApprovalConflict, ApprovalNotPending):
            return await self.backend.load(id)

    async def _follow(self) -> None:
        """Takes the backend's cursor once, before anything here could miss a change made elsewhere."""
        if self.shared and self._cursor is None:
            async with self._poll_lock:
                if self._cursor is None:
                    _, self._cursor = await self.backend.changed_since(None)

    async def poll(self) -> list[Approval]:
        """Reads the changes saved since the last poll (by any process); returns them."""
        if self._poll_lock.locked():
            async with self._poll_lock:  # another task is polling: its result serves us too
                return []
        async with self._poll_lock:
            changes, self._cursor = await self.backend.changed_since(self._cursor)
        for approval in changes:
            self._changed(approval)
        return changes

    async def _expire(
        self, approval: Approval, reason: str, *, state: ApprovalState = ApprovalState.EXPIRED
    ) -> Approval:
        for _ in range(DECIDE_TRIES):
            update = msgspec.structs.replace(
                approval,
                state=state,
                reason=reason,
                decided_at=self._clock(),
                decided_by=None,
                decided_via=None,
                version=approval.version + 1,
            )
            try:
                return await self._save(update)
            except ApprovalConflict:
                latest = await self.backend.load(approval.id)
                if latest is None:  # pragma: no cover - a backend that lost it
                    raise UnknownApproval(f"no approval with id {approval.id!r}") from None
                if not latest.pending:
                    self._changed(latest)
                    return latest
                approval = latest  # its caller's presence changed meanwhile: end that one
        return approval


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _not_pending(approval: Approval) -> str:
    """Why ``approval`` cannot be decided, as the error says it."""
    when = "" if approval.decided_at is None else " at " + _iso(approval.decided_at)
    if approval.state is ApprovalState.ABANDONED:
        why = f" ({approval.reason})" if approval.reason else ""
        return (
            f"approval {approval.id} was abandoned{when}: its caller went away{why}; nobody waits for the "
            "result, so the call cannot run"
        )
    who = f" by {approval.decided_by}" if approval.decided_by else ""
    return f"approval {approval.id} is already {approval.state.value}{who}{when}"


def _same_question(a: Approval, b: Approval) -> bool:
    """Whether two versions of a pending approval ask the same (only their caller's presence differs)."""
    return (a.confirmations, a.final_arguments, a.confirmed_by) == (b.confirmations, b.final_arguments, b.confirmed_by)
