"""Approvals as objects: the queue alone (states, confirmations, edits, expiry, versions, a backend
shared by two queues), then through the host (calls waiting in the queue, decided by someone
else, per-call approvers, context in approvals and audit records, events), and between two
processes sharing one SQLite file."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing
from _host_fakes import Factory, FakeServer
from _sqlite_approvals import SqliteApprovals

from mcpwire.errors import ApprovalAbandoned, ApprovalDenied
from mcpwire.host import (
    Approval,
    ApprovalNotPending,
    ApprovalQueue,
    ApprovalRequest,
    ApprovalState,
    AuditRecord,
    Host,
    HostEvent,
    MemoryApprovals,
    Risk,
    UnknownApproval,
    parse_config,
)


class Clock:
    """Wall-clock seconds that tests move by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _queue(**kw: object) -> tuple[ApprovalQueue, Clock]:
    clock = Clock()
    return ApprovalQueue(clock=clock, **kw), clock  # type: ignore[arg-type]


async def _open(queue: ApprovalQueue, *, risk: Risk = Risk.HIGH, needed: int = 1, timeout: float = 60) -> Approval:
    request = ApprovalRequest(
        "fs",
        "write_file",
        "fs__write_file",
        {"path": "/tmp/x", "text": "hi"},
        risk,
        "risk HIGH is at or above HIGH",
        confirmations_needed=needed,
        context={"trace_id": "t-1"},
    )
    return await queue.open(request, timeout=timeout, context={"caller": "alice"})


# -- the queue alone ------------------------------------------------------------------------------


async def test_open_list_decide_and_decide_again(autojump_clock: trio.testing.MockClock) -> None:
    queue, clock = _queue()
    seen: list[tuple[str, str]] = []
    queue.on_change(lambda a: seen.append((a.id, a.state.value)))
    opened = await _open(queue)
    assert opened.id.startswith("apv_") and len(opened.id) > 12
    assert (opened.state, opened.risk, opened.confirmations, opened.confirmations_needed) == (
        ApprovalState.PENDING,
        Risk.HIGH,
        0,
        1,
    )
    assert (opened.created_at, opened.expires_at, opened.decided_at) == (clock.now, clock.now + 60, None)
    assert opened.context == {"trace_id": "t-1", "caller": "alice"}
    assert [a.id for a in await queue.pending()] == [opened.id]
    clock.now += 5
    decided = await queue.decide(opened.id, approve=True, reason="looks fine", by="bob")
    assert (decided.state, decided.decided_by, decided.decided_at, decided.reason) == (
        ApprovalState.APPROVED,
        "bob",
        clock.now,
        "looks fine",
    )
    assert decided.final_arguments is None and decided.arguments_to_run == {"path": "/tmp/x", "text": "hi"}
    assert (await queue.wait(opened.id, timeout=10)) == decided
    assert await queue.pending() == []
    with pytest.raises(ApprovalNotPending, match=r"^approval apv_\S+ is already approved by bob at 1970-01-12T"):
        await queue.decide(opened.id, approve=False)
    with pytest.raises(UnknownApproval, match=r"^no approval with id 'apv_nope'$"):
        await queue.get("apv_nope")
    assert seen == [(opened.id, "pending"), (opened.id, "approved")]


async def test_critical_needs_two_confirmations_and_an_edit_restarts_the_count(
    autojump_clock: trio.testing.MockClock,
) -> None:
    queue, _ = _queue()
    a = await _open(queue, risk=Risk.CRITICAL, needed=2)
    one = await queue.decide(a.id, approve=True, by="alice")
    assert (one.state, one.confirmations, one.confirmed_by, one.decided_at) == (
        ApprovalState.PENDING,
        1,
        ("alice",),
        None,
    )
    edited = await queue.decide(a.id, approve=True, arguments={"path": "/tmp/y", "text": "hi"}, by="bob")
    # new arguments need their own confirmations: the edit is the first
    assert (edited.state, edited.confirmations, edited.final_arguments) == (
        ApprovalState.PENDING,
        1,
        {"path": "/tmp/y", "text": "hi"},
    )
    same = await queue.decide(a.id, approve=True, arguments={"path": "/tmp/y", "text": "hi"}, by="carol")
    assert (same.state, same.confirmations, same.confirmed_by) == (ApprovalState.APPROVED, 2, ("bob", "carol"))
    assert same.arguments_to_run == {"path": "/tmp/y", "text": "hi"}
    b = await _open(queue, risk=Risk.CRITICAL, needed=2)
    await queue.decide(b.id, approve=True)
    denied = await queue.decide(b.id, approve=False, reason="on second thoughts", by="dan")
    assert (denied.state, denied.reason, denied.decided_by) == (ApprovalState.DENIED, "on second thoughts", "dan")


async def test_expiry_and_bounded_waits(autojump_clock: trio.testing.MockClock) -> None:
    queue, clock = _queue()
    a = await _open(queue, timeout=30)
    start = trio.current_time()
    still = await queue.wait(a.id, timeout=10)  # the waiter gives up first: the approval stays
    assert still.state is ApprovalState.PENDING and trio.current_time() - start == pytest.approx(10)
    clock.now += 10
    expired = await queue.wait(a.id, timeout=100)
    # the wait's own deadline ended it, although the wall clock did not move meanwhile
    assert (expired.state, expired.reason) == (ApprovalState.EXPIRED, "no decision before it expired")
    assert trio.current_time() - start == pytest.approx(30)
    with pytest.raises(ApprovalNotPending, match=r"^approval \S+ is already expired"):
        await queue.decide(a.id, approve=True)
    # a pending approval past its time (its waiter is gone) expires when someone looks
    b = await _open(queue, timeout=30)
    clock.now += 31
    assert await queue.pending() == []
    assert (await queue.get(b.id)).state is ApprovalState.EXPIRED
    c = await _open(queue)
    withdrawn = await queue.withdraw(c.id, "the call was cancelled")
    assert withdrawn is not None and (withdrawn.state, withdrawn.reason) == (
        ApprovalState.EXPIRED,
        "the call was cancelled",
    )
    assert await queue.withdraw("apv_unknown", "x") is None
    with pytest.raises(ValueError, match=r"^timeout must be a positive number of seconds, not 0$"):
        await _open(queue, timeout=0)


async def test_a_shared_backend_releases_a_waiter_and_refuses_a_stale_decision(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = MemoryApprovals()
    here = ApprovalQueue(backend, poll_interval=0.5)
    there = ApprovalQueue(backend, poll_interval=0.5)
    heard_here: list[str] = []
    here.on_change(lambda a: heard_here.append(a.state.value))
    local_only: list[str] = []
    here.on_change(lambda a: local_only.append(a.state.value), local_only=True)
    a = await _open(here)
    released: list[Approval] = []

    async def waiter() -> None:
        released.append(await here.wait(a.id, timeout=60))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(3)
        decided_at = trio.current_time()
        await there.decide(a.id, approve=False, reason="not today", by="ops")
    assert released[0].state is ApprovalState.DENIED and released[0].decided_by == "ops"
    assert trio.current_time() - decided_at <= 0.5  # within one poll
    assert heard_here == ["pending", "denied"] and local_only == ["pending"]
    # two deciders racing: the second one's version is stale
    b = await _open(here)
    stale = await there.get(b.id)
    await here.decide(b.id, approve=True, by="first")
    with pytest.raises(ApprovalNotPending, match=r"^approval \S+ is already approved by first"):
        await there.decide(stale.id, approve=False)
    conflicting = msgspec.structs.replace(stale, state=ApprovalState.DENIED, version=stale.version + 1)
    with pytest.raises(Exception, match=r"changed elsewhere \(stored version 2, saving 2\)"):
        await backend.save(conflicting)


def test_approvals_round_trip_through_json() -> None:
    approval = Approval(
        id="apv_1",
        state=ApprovalState.PENDING,
        risk=Risk.CRITICAL,
        server="s",
        tool="t",
        name="s__t",
        arguments={"a": [1, {"b": None}]},
        created_at=1.5,
        expires_at=2.5,
        confirmations_needed=2,
        context={"run_id": "r"},
    )
    data = approval.to_dict()
    assert (data["state"], data["risk"], data["context"]) == ("pending", "critical", {"run_id": "r"})
    assert Approval.from_dict(json.loads(json.dumps(data))) == approval
    with pytest.raises(msgspec.ValidationError, match=r"unknown risk level 'severe'"):
        Approval.from_dict({**data, "risk": "severe"})


# -- through the host ------------------------------------------------------------------------------


class ListSink:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)


def _host(factory: Factory, *, entry: dict[str, object] | None = None, **options: object) -> Host:
    config = parse_config({"mcpServers": {"a": entry or {"command": "fake", "policy": {"retries": 0}}}})
    return Host(config, client_factory=factory, health_interval=0, **options)  # type: ignore[arg-type]


async def _first_pending(queue: ApprovalQueue) -> Approval:
    with trio.fail_after(10):
        while True:
            changed = trio.Event()
            stop = queue.on_change(lambda _, changed=changed: changed.set())  # type: ignore[misc]
            try:
                pending = await queue.pending()
                if pending:
                    return pending[0]
                await changed.wait()
            finally:
                stop()


async def test_a_call_waits_in_the_queue_until_someone_decides(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    queue = ApprovalQueue()
    sink = ListSink()
    async with _host(Factory(server), approvals=queue, audit=sink) as host:
        events = host.events()
        results: list[object] = []
        context = {"trace_id": "trace-7", "run_id": "run-3", "caller": "api"}

        async def call() -> None:
            results.append(await host.call_tool("a__set_thing", {"q": "v"}, context=context))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            pending = await _first_pending(host.approvals)  # type: ignore[arg-type]
            assert (pending.server, pending.tool, pending.name, pending.risk) == (
                "a",
                "set_thing",
                "a__set_thing",
                Risk.HIGH,
            )
            assert (pending.arguments, pending.context, pending.why) == (
                {"q": "v"},
                context,
                "risk HIGH is at or above HIGH",
            )
            assert server.calls == []  # nothing ran yet
            await queue.decide(pending.id, approve=True, arguments={"q": "edited"}, by="bob")
        (result,) = results
        assert result.approval == "approved_modified" and result.approval_id == pending.id  # type: ignore[attr-defined]
        assert server.calls[-1][1:] == ("set_thing", {"q": "edited"})
    approval_events = [e.approval for e in [e async for e in events] if e.kind == "approval"]
    assert [a.state for a in approval_events if a is not None] == [ApprovalState.PENDING, ApprovalState.APPROVED]
    kinds = [(r.kind, r.decision, r.outcome) for r in sink.records]
    assert kinds == [("approval", "approved", "approved"), ("tool", "approved_modified", "ok")]
    decision, call = sink.records
    assert (decision.by, decision.approval_id, decision.trace_id, decision.arguments) == (
        "bob",
        pending.id,
        "trace-7",
        {"q": "edited"},
    )
    assert (call.trace_id, call.run_id, call.caller, call.approval_id, call.risk) == (
        "trace-7",
        "run-3",
        "api",
        pending.id,
        "HIGH",
    )


async def test_denied_expired_and_cancelled_approvals(autojump_clock: trio.testing.MockClock) -> None:
    queue = ApprovalQueue()
    async with _host(Factory(FakeServer("a")), approvals=queue, approval_timeout=120) as host:

        async def deny() -> None:
            pending = await _first_pending(queue)
            await queue.decide(pending.id, approve=False, reason="too risky", by="alice")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(deny)
            with pytest.raises(
                ApprovalDenied,
                match=r"^tool 'set_thing' on server 'a' was denied by alice: too risky "
                r"\(risk HIGH, approval apv_\S+\)$",
            ):
                await host.call_tool("a__set_thing")
        start = trio.current_time()
        with pytest.raises(
            ApprovalDenied, match=r"^tool 'set_thing' on server 'a': no approval within 120s; denied \(approval apv_"
        ):
            await host.call_tool("a__set_thing")
        assert trio.current_time() - start == pytest.approx(120, abs=0.5)  # the wall clock moved a little
        with trio.move_on_after(5):
            await host.call_tool("a__set_thing", {"q": "cancelled"})
        assert await queue.backend.pending() == []  # the cancelled call's approval did not stay pending
    stored = list(queue.backend._items.values())  # type: ignore[attr-defined]
    assert [(a.state, a.reason) for a in stored] == [
        (ApprovalState.DENIED, "too risky"),
        (ApprovalState.EXPIRED, "no decision before it expired"),
        (ApprovalState.ABANDONED, "the call was cancelled while it waited (its caller stopped waiting)"),
    ]


async def test_critical_calls_need_two_decisions_through_the_host(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    queue = ApprovalQueue()
    async with _host(Factory(server), approvals=queue) as host:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.call_tool, "a__delete_thing", {"q": "1"})
            first = await _first_pending(queue)
            assert (first.risk, first.confirmations_needed) == (Risk.CRITICAL, 2)
            after_one = await queue.decide(first.id, approve=True, by="alice")
            await trio.sleep(1)
            assert after_one.pending and server.calls == []  # one confirmation is not enough
            await queue.decide(first.id, approve=True, by="alice")
        assert server.calls[-1][1] == "delete_thing"


async def test_per_call_approver_and_a_queue_decision_race(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    queue = ApprovalQueue()
    asked: list[ApprovalRequest] = []

    async def elicit(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    async def silent(request: ApprovalRequest) -> bool:
        await trio.sleep_forever()
        return False  # pragma: no cover

    async with _host(Factory(server), approvals=queue) as host:
        done = await host.call_tool("a__set_thing", {"q": "1"}, approver=elicit, context={"caller": "gw"})
        assert done.approval == "approved" and asked[0].id == done.approval_id
        assert (asked[0].context, asked[0].confirmation, asked[0].confirmations_needed) == ({"caller": "gw"}, 1, 1)
        decided = await queue.get(done.approval_id or "")
        assert (decided.decided_by, decided.decided_via) == ("elicit", "callback")  # the callback's name
        # the approver never answers, but a person decides on the queue: the call goes on
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(host.call_tool, "a__set_thing", {"q": "2"}, approver=silent))
            pending = await _first_pending(queue)
            await queue.decide(pending.id, approve=True, by="ops")
        assert server.calls[-1][2] == {"q": "2"}


async def test_without_queue_or_approver_high_calls_are_denied_at_once(autojump_clock: trio.testing.MockClock) -> None:
    async with _host(Factory(FakeServer("a"))) as host:
        assert host.approvals is None
        start = trio.current_time()
        with pytest.raises(
            ApprovalDenied,
            match=r"^tool 'set_thing' on server 'a' needs approval \(risk HIGH is at or above HIGH\) but no approver "
            r"is configured; pass approver= or approvals=ApprovalQueue\(\) to the Host, or add an 'allow' rule$",
        ):
            await host.call_tool("a__set_thing")
        assert trio.current_time() == start
        # MEDIUM is configurable: this server asks from MEDIUM up
        assert (await host.call_tool("a__get_thing")).approval == "allow"
    entry = {"command": "fake", "policy": {"retries": 0, "ask_at": "medium"}}
    async with _host(Factory(FakeServer("a")), entry=entry) as host:
        with pytest.raises(ApprovalDenied, match=r"needs approval \(risk MEDIUM is at or above MEDIUM\)"):
            await host.call_tool("a__get_thing")


async def test_events_of_approvals_seen_by_a_listener(autojump_clock: trio.testing.MockClock) -> None:
    queue = ApprovalQueue()
    async with _host(Factory(FakeServer("a")), approvals=queue) as host:
        events = host.events()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.call_tool, "a__set_thing", {"q": "x", "api_token": "s3cr3t"})
            pending = await _first_pending(queue)
            assert pending.arguments == {"q": "x", "api_token": "s3cr3t"}  # the decider sees what runs
            await queue.decide(pending.id, approve=True)
        seen: list[HostEvent] = []
        with trio.move_on_after(1):
            async for event in events:
                seen.append(event)
    approvals = [e for e in seen if e.kind == "approval"]
    assert [(e.server, e.status, e.approval.state.value) for e in approvals if e.approval] == [
        ("a", "connected", "pending"),
        ("a", "connected", "approved"),
    ]
    assert [e.record.kind for e in seen if e.kind == "audit" and e.record] == ["approval", "tool"]
    # events go to every listener: secret-looking values are redacted there
    assert all(e.approval.arguments == {"q": "x", "api_token": "[REDACTED]"} for e in approvals if e.approval)
    assert "s3cr3t" not in repr(seen)


# -- between processes --------------------------------------------------------------------------------

DEMO = [sys.executable, "-u", "-m", "mcpwire.testing.demo_server", "--name", "d"]


@pytest.mark.slow
async def test_a_decision_in_another_process_releases_the_call(tmp_path: Path) -> None:
    db = str(tmp_path / "approvals.db")
    queue = ApprovalQueue(SqliteApprovals(db), poll_interval=0.05)
    config = parse_config(
        {"mcpServers": {"d": {"command": DEMO[0], "args": DEMO[1:], "policy": {"approval": {"echo": "ask"}}}}}
    )
    other = Path(__file__).with_name("_sqlite_approvals.py")
    async with Host(config, approvals=queue, health_interval=0) as host:
        async with trio.open_nursery() as nursery:
            results: list[str] = []

            async def call() -> None:
                results.append((await host.call_tool("d__echo", {"text": "asked"})).text)

            nursery.start_soon(call)
            done = await trio.run_process(
                [sys.executable, str(other), db, "approve", json.dumps({"text": "edited elsewhere"})],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode()
        decided = json.loads(done.stdout)
        assert decided["state"] == "approved" and results == ["edited elsewhere"]
        stored = await queue.get(decided["id"])
        assert (stored.decided_by, stored.reason, stored.final_arguments) == (
            "other",
            "from the other process",
            {"text": "edited elsewhere"},
        )
        # and a denial there fails the call here
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                trio.run_process,
                [sys.executable, str(other), db, "deny"],
            )
            with pytest.raises(ApprovalDenied, match=r"was denied by other: from the other process"):
                await host.call_tool("d__echo", {"text": "no"})


class _SlowSaves(MemoryApprovals):
    """A shared backend whose saves are seen (by ``changed_since``) before ``save`` returns, as a
    database's commit is seen by another connection's poll while the saver waits for its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.saved = trio.Event()
        self.polled = trio.Event()

    async def save(self, approval: Approval) -> None:
        await super().save(approval)
        if approval.state is not ApprovalState.PENDING:
            self.saved.set()
            await self.polled.wait()  # the poll runs before the saver hears back


async def test_a_decision_seen_first_by_a_poll_still_reaches_the_local_listeners(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A poll (a waiter's, on a shared backend) that reads our own decision while its save is in
    flight tells the listeners of every change; the listeners of this queue's own changes (the
    host's audit record of the decision) must hear it too, once."""
    backend = _SlowSaves()
    queue = ApprovalQueue(backend, poll_interval=0.5)
    every: list[str] = []
    own: list[str] = []
    queue.on_change(lambda a: every.append(a.state.value))
    queue.on_change(lambda a: own.append(a.state.value), local_only=True)
    a = await _open(queue)

    async def poller() -> None:
        await backend.saved.wait()
        assert [x.state for x in await queue.poll()] == [ApprovalState.APPROVED]
        backend.polled.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller)
        decided = await queue.decide(a.id, approve=True, by="ops")
    assert decided.state is ApprovalState.APPROVED
    assert every == ["pending", "approved"]
    assert own == ["pending", "approved"]


class FakeCaller:
    """A caller the test moves: present or away, then gone with a reason."""

    def __init__(self) -> None:
        self.here = True
        self.reason: str | None = None

    def present(self) -> bool:
        return self.here

    def gone(self, *, cancelled: bool = False) -> str | None:
        return self.reason


async def test_an_approval_follows_its_caller_and_is_abandoned_when_it_goes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer("a")
    queue = ApprovalQueue()
    caller = FakeCaller()
    async with _host(Factory(server), approvals=queue) as host:
        failed: list[BaseException] = []

        async def call() -> None:
            try:
                await host.call_tool("a__set_thing", {"q": "late"}, caller=caller)
            except ApprovalAbandoned as exc:
                failed.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            pending = await _first_pending(queue)
            assert (pending.caller_present, pending.caller_away_since) == (True, None)
            caller.here = False
            await trio.sleep(1)
            away = await queue.get(pending.id)
            assert away.pending and not away.caller_present and away.caller_away_since is not None
            caller.here = True  # back: the approval waits for it again
            await trio.sleep(1)
            assert (await queue.get(pending.id)).caller_present
            caller.reason = "the client closed its session"
        assert str(failed[0]) == (
            f"tool 'set_thing' on server 'a' was not run: its caller went away: the client closed its session "
            f"(approval {pending.id})"
        )
        assert [c for c in server.calls if c[1] == "set_thing"] == []  # never sent
        abandoned = await queue.get(pending.id)
        assert (abandoned.state, abandoned.reason, abandoned.decided_by) == (
            ApprovalState.ABANDONED,
            "the client closed its session",
            None,
        )
        with pytest.raises(ApprovalNotPending, match=rf"^approval {pending.id} was abandoned at \S+: its caller went"):
            await queue.decide(pending.id, approve=True, by="ops")


async def test_a_decision_taken_while_the_callers_presence_changes_still_counts() -> None:
    backend = MemoryApprovals()
    queue, _ = _queue(backend=backend)
    approval = await _open(queue)
    real_save = backend.save
    moved: list[bool] = []

    async def save(update: Approval) -> None:
        if not moved and update.state is not ApprovalState.PENDING:
            moved.append(True)  # the caller went away just before this decision was saved
            await ApprovalQueue(backend).mark_caller(approval.id, present=False)
        await real_save(update)

    backend.save = save  # type: ignore[method-assign]
    decided = await queue.decide(approval.id, approve=True, by="ops", via="console")
    assert (decided.state, decided.caller_present, decided.decided_via, decided.version) == (
        ApprovalState.APPROVED,
        False,
        "console",
        3,
    )
