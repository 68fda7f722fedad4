"""Each policy alone and in the stack (autojump clock wherever time matters)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
import trio.testing

from mcpwire.errors import (
    ApprovalDenied,
    CircuitOpen,
    ClientClosed,
    LocalProtocolError,
    OutputSchemaError,
    RemoteProtocolError,
    RequestTimeout,
    RPCError,
    ServerGone,
)
from mcpwire.host.policies import (
    ApprovalPolicy,
    ApprovalRequest,
    AuditLog,
    BreakerState,
    CallContext,
    CircuitBreaker,
    Metrics,
    PolicyStack,
    ResultCache,
    RetryPolicy,
    Risk,
    classify_risk,
    hash_arguments,
    name_risk,
    redact,
)
from mcpwire.protocol.types import ReadResourceResult, TextContent, ToolResult


def ctx(tool: str = "t", **kw: object) -> CallContext:
    return CallContext(server="s", tool=tool, arguments={"a": 1}, **kw)  # type: ignore[arg-type]


class Flaky:
    """Fails ``failures`` times with ``exc``, then answers ``ok<n>``."""

    def __init__(self, failures: int, exc: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.exc = exc or ServerGone("gone", server="s")
        self.seen: list[Mapping[str, object]] = []

    async def __call__(self, args: Mapping[str, object]) -> str:
        self.calls += 1
        self.seen.append(args)
        if self.calls <= self.failures:
            raise self.exc
        return f"ok{self.calls}"


def stack(**parts: object) -> PolicyStack[object]:
    parts.setdefault("retry", RetryPolicy(retries=0))
    return PolicyStack(**parts)  # type: ignore[arg-type]


# -- retry --------------------------------------------------------------------------------------


async def test_retry_only_idempotent_and_transient(autojump_clock: trio.testing.MockClock) -> None:
    s = stack(retry=RetryPolicy(retries=2, rng=random.Random(1)))
    f = Flaky(2)
    assert await s.run(ctx(read_only=True), f) == "ok3"
    assert await s.run(ctx(idempotent=True), Flaky(1)) == "ok2"
    assert await s.run(ctx("file:///x", kind="resource"), Flaky(2)) == "ok3"
    f = Flaky(1)
    with pytest.raises(ServerGone):  # may have side effects: never repeated blindly
        await s.run(ctx(), f)
    assert f.calls == 1
    assert await s.run(ctx(retryable=True), Flaky(1)) == "ok2"  # marked retryable in config
    f = Flaky(1)
    with pytest.raises(ServerGone):
        await s.run(ctx(read_only=True, retryable=False), f)  # or marked not retryable
    assert f.calls == 1
    for final in (RPCError(-32602, "bad"), ClientClosed("closed"), RemoteProtocolError("garbage")):
        f = Flaky(5, final)
        with pytest.raises(type(final)):
            await s.run(ctx(idempotent=True), f)
        assert f.calls == 1  # an answer, or our own close, is final
    f = Flaky(5)
    with pytest.raises(ServerGone):
        await s.run(ctx(read_only=True, retries=4), f)
    assert f.calls == 5


def test_retry_backoff_is_exponential_with_full_jitter() -> None:
    retry = RetryPolicy(base_delay=0.5, max_delay=3.0, rng=random.Random(7))
    for attempt, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (40, 3.0)]:
        delays = [retry.delay(attempt) for _ in range(50)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # spread over the whole range


async def test_timeouts_are_retried_when_idempotent(autojump_clock: trio.testing.MockClock) -> None:
    attempts: list[float] = []

    async def slow(args: Mapping[str, object]) -> str:
        attempts.append(trio.current_time())
        if len(attempts) < 3:
            await trio.sleep(100)
        return "late but fine"

    s = stack(retry=RetryPolicy(retries=2, base_delay=0.1, rng=random.Random(3)))
    assert await s.run(ctx(read_only=True, timeout=2.0), slow) == "late but fine"
    assert len(attempts) == 3 and 4.0 <= attempts[-1] <= 4.3
    attempts.clear()
    with pytest.raises(RequestTimeout, match=r"^server 's': tool 't' got no answer within 2s$") as err:
        await s.run(ctx(timeout=2.0), slow)
    assert len(attempts) == 1 and err.value.server == "s" and err.value.timeout == 2.0


# -- breaker ----------------------------------------------------------------------------------


async def test_breaker_opens_half_opens_and_recovers(autojump_clock: trio.testing.MockClock) -> None:
    breaker = CircuitBreaker("s", failures=3, cooldown=10)
    s = stack(breaker=breaker)
    for _ in range(3):
        with pytest.raises(ServerGone):
            await s.run(ctx(), Flaky(1))
    assert breaker.current() is BreakerState.OPEN and breaker.opened == 1
    f = Flaky(0)
    with pytest.raises(CircuitOpen, match=r"^server 's': circuit open after 3 consecutive failures; .*10\.0s$"):
        await s.run(ctx(), f)
    assert f.calls == 0
    await trio.sleep(10)
    assert breaker.current() is BreakerState.HALF_OPEN
    with pytest.raises(ServerGone):  # a failed trial opens it again at once
        await s.run(ctx(), Flaky(1))
    assert breaker.current() is BreakerState.OPEN and breaker.opened == 2
    await trio.sleep(10)
    assert await s.run(ctx(), f) == "ok1"
    assert breaker.current() is BreakerState.CLOSED and breaker.consecutive == 0


async def test_breaker_lets_one_trial_through(autojump_clock: trio.testing.MockClock) -> None:
    breaker = CircuitBreaker("s", failures=1, cooldown=1)
    breaker.failure()
    await trio.sleep(1)
    release = trio.Event()
    results: list[str] = []

    async def trial(args: Mapping[str, object]) -> str:
        await release.wait()
        return "trial"

    async def call() -> None:
        results.append(str(await stack(breaker=breaker).run(ctx(), trial)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(CircuitOpen, match=r"waiting for a trial call to finish$"):
            await stack(breaker=breaker).run(ctx(), Flaky(0))
        release.set()
    assert results == ["trial"] and breaker.current() is BreakerState.CLOSED


async def test_breaker_counts_answers_as_success_and_can_be_disabled() -> None:
    breaker = CircuitBreaker("s", failures=2)
    s = stack(breaker=breaker)
    for _ in range(5):
        with pytest.raises(RPCError):
            await s.run(ctx(), Flaky(1, RPCError(-32603, "internal")))
    assert breaker.current() is BreakerState.CLOSED
    never = CircuitBreaker("s", failures=0)
    for _ in range(10):
        with pytest.raises(ServerGone):
            await stack(breaker=never).run(ctx(), Flaky(1))
    assert never.current() is BreakerState.CLOSED and never.consecutive == 10


async def test_what_the_caller_did_wrong_never_counts_against_the_server() -> None:
    # a gateway's clients send bad requests, and relayed rounds their client never answers: the
    # backend answered or was never asked, so its breaker stays closed for everyone else
    breaker = CircuitBreaker("s", failures=2)
    s = stack(breaker=breaker)
    caller_faults: list[Exception] = [
        LocalProtocolError("cannot call 'tools/call' on server 's': invalid params"),
        OutputSchemaError("structuredContent does not match the tool's outputSchema"),
        ValueError("a relayed round the client never answered"),
    ]
    for fault in caller_faults * 3:
        with pytest.raises(type(fault)):
            await s.run(ctx(), Flaky(1, fault))
    assert breaker.current() is BreakerState.CLOSED and breaker.opened == 0
    # the server's own failures still do
    for fault in (RequestTimeout("no answer", method="tools/call", server="s"), RemoteProtocolError("garbage")):
        with pytest.raises(type(fault)):
            await s.run(ctx(), Flaky(1, fault))
    assert breaker.current() is BreakerState.OPEN


# -- cache ----------------------------------------------------------------------------------------


async def test_cache_ttl_lru_counters_and_invalidation(autojump_clock: trio.testing.MockClock) -> None:
    cache: ResultCache[object] = ResultCache(ttl=5, size=2)
    s = stack(cache=cache)
    f = Flaky(0)
    assert await s.run(ctx(read_only=True), f) == "ok1"
    assert await s.run(ctx(read_only=True), f) == "ok1"
    assert (cache.hits, cache.misses) == (1, 1)
    assert await s.run(ctx(), f) == "ok2"  # no hints: never cached
    assert await s.run(ctx("t2", cacheable=True), f) == "ok3"  # unless configured so
    assert await s.run(ctx("t2", cacheable=True), f) == "ok3"
    await trio.sleep(6)
    assert await s.run(ctx(read_only=True), f) == "ok4"  # expired
    assert await s.run(ctx(read_only=True, cache_ttl=1), Flaky(0)) == "ok4"  # still fresh
    for uri in ("u/1", "u/2", "u/3"):
        await s.run(ctx(uri, kind="resource"), f)
    assert len(cache) == 2 and cache.evictions == 3  # LRU: the least recently used went
    assert cache.uris("s") == ["u/2", "u/3"]
    assert cache.invalidate("s", kind="resource", name="u/3") == 1
    assert cache.invalidate("s", kind="resource", name="u") == 1  # a URI drops the ones below it
    assert cache.hit_rate == pytest.approx(3 / 9)


@pytest.mark.parametrize(
    ("hints", "cached"),
    [
        ({"read_only": True}, True),
        ({"idempotent": True, "destructive": False}, True),
        ({"idempotent": True, "destructive": True}, False),
        ({"idempotent": True}, False),  # destructiveHint absent: true, as the schema says
        ({"read_only": False, "destructive": False}, False),
        ({}, False),
        ({"retryable": True}, False),  # retryable is about repeating a call, not skipping it
        ({"idempotent": True, "destructive": False, "cacheable": False}, False),  # configured
        ({"destructive": True, "cacheable": True}, True),  # configured
    ],
)
async def test_which_tool_calls_are_cached(hints: dict[str, bool], cached: bool) -> None:
    s = stack(cache=ResultCache())
    f = Flaky(0)
    await s.run(ctx(**hints), f)
    second = ctx(**hints)
    await s.run(second, f)
    assert (second.outcome == "cache_hit", f.calls) == (cached, 1 if cached else 2)


async def test_cache_keys_respect_arguments_and_errors_are_not_cached(autojump_clock: trio.testing.MockClock) -> None:
    cache: ResultCache[object] = ResultCache()
    s = stack(cache=cache)
    calls = 0

    async def tool(args: Mapping[str, object]) -> ToolResult:
        nonlocal calls
        calls += 1
        return ToolResult(content=[TextContent(text=str(args))], is_error=args.get("fail") is True)

    one = CallContext(server="s", tool="t", arguments={"a": 1, "b": [1, 2]}, read_only=True)
    same = CallContext(server="s", tool="t", arguments={"b": [1, 2], "a": 1}, read_only=True)
    other = CallContext(server="s", tool="t", arguments={"a": 2, "b": [1, 2]}, read_only=True)
    await s.run(one, tool)
    await s.run(same, tool)  # key order does not matter
    await s.run(other, tool)
    assert calls == 2
    bad = CallContext(server="s", tool="t", arguments={"fail": True}, read_only=True)
    await s.run(bad, tool)
    await s.run(bad, tool)
    assert calls == 4 and bad.outcome == "tool_error"


async def test_cache_honours_server_ttl_hints(autojump_clock: trio.testing.MockClock) -> None:
    cache: ResultCache[object] = ResultCache(ttl=60)
    s = stack(cache=cache)
    reads = 0

    async def read(ttl_ms: int | None) -> ReadResourceResult:
        nonlocal reads
        reads += 1
        return ReadResourceResult(ttl_ms=ttl_ms, cache_scope="private")

    def resource(era: str) -> CallContext:
        return CallContext(server="s", tool="r", arguments={}, kind="resource", era=era)

    await s.run(resource("modern"), lambda a: read(1500))
    await s.run(resource("modern"), lambda a: read(1500))
    assert reads == 1
    await trio.sleep(1.5)
    await s.run(resource("modern"), lambda a: read(-5))  # negative: treated as 0 (UT-X04)
    await s.run(resource("modern"), lambda a: read(None))  # absent on 2026-07-28: 0
    await s.run(resource("modern"), lambda a: read(None))
    assert reads == 4
    await s.run(resource("legacy"), lambda a: read(None))  # legacy: the configured TTL (UT-X08)
    await s.run(resource("legacy"), lambda a: read(None))
    assert reads == 5


# -- approval ---------------------------------------------------------------------------------------


def test_risk_from_names() -> None:
    assert [name_risk(n) for n in ("delete_file", "deleteFile", "files.delete", "run-shell", "execute_command")] == [
        Risk.CRITICAL
    ] * 5
    assert [name_risk(n) for n in ("transfer_funds", "make_payment", "drop_table", "remove_item", "git_reset")] == [
        Risk.CRITICAL
    ] * 5
    assert [name_risk(n) for n in ("write_file", "updateRecord", "create_issue", "upload", "toggle-logging")] == [
        Risk.HIGH
    ] * 5
    assert [name_risk(n) for n in ("fetch_url", "browse", "web_search", "read_query")] == [Risk.MEDIUM] * 4
    assert [name_risk(n) for n in ("list_dir", "search", "get_status", "convert_time", "echo")] == [Risk.LOW] * 5
    # words, not substrings
    assert [name_risk(n) for n in ("settings", "dropbox", "addresses", "gzip-file-as-resource")] == [None] * 4


@pytest.mark.parametrize(
    ("name", "risk"),
    [
        # "add" is arithmetic with values only, a change otherwise
        ("add", Risk.LOW),
        ("add_time", Risk.LOW),
        ("addTime", Risk.LOW),
        ("add_numbers", Risk.LOW),
        ("add_task", Risk.HIGH),
        ("add_observations", Risk.HIGH),
        ("add_user_to_group", Risk.HIGH),
        # a changing word after a read word names a thing, unless it is a bare verb
        ("list_posts", Risk.LOW),
        ("get_commit", Risk.LOW),
        ("read_deleted_items", Risk.LOW),
        ("get_task_result", Risk.LOW),
        ("get_and_delete", Risk.CRITICAL),
        ("find_and_replace", Risk.HIGH),
        ("create_post", Risk.HIGH),
        ("post_message", Risk.HIGH),
        ("git_commit", Risk.HIGH),
        ("run_task", Risk.HIGH),
        ("disable_task", Risk.HIGH),
        ("remove_task", Risk.CRITICAL),
        # a changing word with code to run
        ("write_query", Risk.CRITICAL),
        ("run_script", Risk.CRITICAL),
        ("runCommand", Risk.CRITICAL),
        ("read_query", Risk.MEDIUM),
        ("get_command_help", Risk.LOW),
    ],
)
def test_risk_keywords_tuned_on_real_names(name: str, risk: Risk) -> None:
    assert name_risk(name) is risk


def test_risk_from_annotations_first_then_names() -> None:
    assert classify_risk("frobnicate") is Risk.MEDIUM  # nothing known
    assert classify_risk("echo") is Risk.LOW  # the name alone
    assert classify_risk("frobnicate", read_only=True) is Risk.MEDIUM  # openWorldHint defaults to true
    assert classify_risk("frobnicate", read_only=True, open_world=False) is Risk.LOW
    assert classify_risk("frobnicate", read_only=False, destructive=False) is Risk.HIGH
    assert classify_risk("frobnicate", read_only=False) is Risk.CRITICAL  # destructiveHint defaults to true
    assert classify_risk("frobnicate", idempotent=True) is Risk.MEDIUM  # no deciding hint: the name decides
    # annotations come first, in both directions
    assert classify_risk("list_things", destructive=True) is Risk.CRITICAL
    assert classify_risk("get_thing", read_only=False, destructive=False) is Risk.HIGH
    assert classify_risk("create_directory", read_only=True, open_world=False) is Risk.LOW
    # ...but an untrusted server cannot put a critical name below HIGH
    assert classify_risk("delete_file", read_only=True, open_world=False) is Risk.HIGH
    assert classify_risk("delete_file", read_only=True, open_world=False, trust_annotations=True) is Risk.LOW


async def test_approval_rules_approver_and_timeout(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[ApprovalRequest] = []

    async def approver(req: ApprovalRequest) -> bool | dict[str, object]:
        seen.append(req)
        if req.tool == "delete_modified":
            return {"a": 2}
        if req.tool == "delete_slow":
            await trio.sleep(1000)
        if req.tool == "delete_broken":
            raise RuntimeError("the approval service is down")
        if req.tool == "delete_second_thoughts":
            return req.confirmation == 1
        return req.tool in ("delete_ok", "write_ok")

    approval = ApprovalPolicy(rules=[("s", "drop_*", "deny"), ("*", "safe_*", "allow")], approver=approver)
    s = stack(approval=approval)
    f = Flaky(0)
    assert await s.run(ctx("echo"), f) == "ok1"  # LOW: below the HIGH threshold
    assert await s.run(ctx("frobnicate"), f) == "ok2" and not seen  # MEDIUM: below it too
    c = ctx("write_ok")
    assert await s.run(c, f) == "ok3" and c.approval == "approved" and c.risk is Risk.HIGH
    assert [(r.reason, r.confirmation, r.confirmations_needed) for r in seen] == [
        ("risk HIGH is at or above HIGH", 1, 1)
    ]
    seen.clear()
    c = ctx("delete_ok")  # CRITICAL: asked twice
    assert await s.run(c, f) == "ok4" and c.approval == "approved" and c.risk is Risk.CRITICAL
    assert [(r.confirmation, r.confirmations_needed, r.id) for r in seen] == [(1, 2, None), (2, 2, None)]
    with pytest.raises(
        ApprovalDenied, match=r"^tool 'delete_second_thoughts' on server 's' was denied by the approver"
    ):
        await s.run(ctx("delete_second_thoughts"), f)
    seen.clear()
    c = ctx("delete_modified")
    await s.run(c, f)
    # the edit counts as the first confirmation of the new arguments; the second confirms them
    assert [dict(r.arguments) for r in seen] == [{"a": 1}, {"a": 2}]
    assert f.seen[-1] == {"a": 2} and c.approval == "approved_modified"
    with pytest.raises(ApprovalDenied, match=r"^tool 'drop_x' on server 's' is denied by the rule \('s', 'drop_\*'\)"):
        await s.run(ctx("drop_x"), f)
    with pytest.raises(ApprovalDenied, match=r"^tool 'delete_no' on server 's' was denied by the approver"):
        await s.run(ctx("delete_no"), f)
    start = trio.current_time()
    with pytest.raises(ApprovalDenied, match=r"^tool 'delete_slow' on server 's': no approval within 300s; denied$"):
        await s.run(ctx("delete_slow"), f)
    assert trio.current_time() - start == pytest.approx(300)
    with pytest.raises(ApprovalDenied, match=r"the approver failed \(RuntimeError: the approval service is down\)"):
        await s.run(ctx("delete_broken"), f)
    assert await s.run(ctx("safe_delete"), f) == "ok6"
    with pytest.raises(ApprovalDenied, match=r"denied by the server's approval setting for 'echo'"):
        await s.run(ctx("echo", decision="deny"), f)
    strict = stack(approval=ApprovalPolicy(ask_at=Risk.MEDIUM, timeout=1))
    with pytest.raises(ApprovalDenied, match=r"needs approval \(risk MEDIUM is at or above MEDIUM\) but no approver"):
        await strict.run(ctx("frobnicate"), f)
    with pytest.raises(ApprovalDenied, match="no approver"):
        await strict.run(ctx("echo", risk=Risk.HIGH), f)  # a configured risk replaces the inferred one
    # a server's own threshold comes before the policy's
    assert await strict.run(ctx("frobnicate", ask_at=Risk.HIGH), f) == "ok7"
    per_call: list[str] = []

    async def mine(req: ApprovalRequest) -> bool:
        per_call.append(req.name)
        return True

    assert await strict.run(ctx("frobnicate", approver=mine, name="s__frobnicate"), f) == "ok8"
    assert per_call == ["s__frobnicate"]
    assert f.calls == 8


# -- audit ------------------------------------------------------------------------------------------


def test_redaction_and_hashing() -> None:
    args = {
        "user": "bob",
        "api_key": "k1",
        "nested": {"Password": "p", "list": [{"token": "t"}, "plain"]},
        "headers": [{"Authorization": "Bearer x"}],
    }
    assert redact(args) == {
        "user": "bob",
        "api_key": "[REDACTED]",
        "nested": {"Password": "[REDACTED]", "list": [{"token": "[REDACTED]"}, "plain"]},
        "headers": [{"Authorization": "[REDACTED]"}],
    }
    assert hash_arguments({"a": 1, "b": 2}) == hash_arguments({"b": 2, "a": 1})
    assert hash_arguments({"a": 1}) != hash_arguments({"a": 2})


async def test_audit_records_rotation_and_modes(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.jsonl"
    audit = AuditLog(path, max_bytes=900, backups=2)
    s = stack(audit=audit, approval=ApprovalPolicy(rules=[("*", "nope", "deny")]))
    await s.run(
        CallContext(server="s", tool="login", arguments={"api_token": "hunter2", "user": "bob"}, name="s__login"),
        Flaky(0),
    )
    with pytest.raises(ServerGone):
        await s.run(ctx(), Flaky(1))
    with pytest.raises(ApprovalDenied):
        await s.run(ctx("nope"), Flaky(0))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert "hunter2" not in path.read_text()
    first, failed, denied = lines
    assert set(first) == {
        "time", "server", "kind", "tool", "name", "arguments", "risk", "decision", "latency_ms", "outcome", "error"
    }  # fmt: skip
    assert (first["name"], first["arguments"], first["outcome"], first["risk"]) == (
        "s__login",
        {"api_token": "[REDACTED]", "user": "bob"},
        "ok",
        "MEDIUM",
    )
    assert first["time"].endswith("Z") and first["latency_ms"] >= 0
    assert (failed["outcome"], failed["error"]) == ("error", "ServerGone: gone")
    assert (denied["outcome"], denied["decision"]) == ("denied", "denied")
    for _ in range(10):
        await s.run(ctx(), Flaky(0))
    assert audit.records == 13
    rotated = [path.with_name("audit.jsonl.1"), path.with_name("audit.jsonl.2")]
    assert all(p.exists() for p in rotated) and not path.with_name("audit.jsonl.3").exists()
    assert all(p.stat().st_size <= 900 for p in [path, *rotated])
    audit.close()
    hashed = AuditLog(tmp_path / "h.jsonl", arguments="hash")
    await stack(audit=hashed).run(ctx(), Flaky(0))
    hashed.close()
    assert json.loads((tmp_path / "h.jsonl").read_text())["arguments"] == hash_arguments({"a": 1})
    with pytest.raises(ValueError, match="arguments must be"):
        AuditLog(tmp_path / "x", arguments="some")  # type: ignore[arg-type]


async def test_cancelled_calls_are_audited(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    audit = AuditLog(tmp_path / "a.jsonl")

    async def forever(args: Mapping[str, object]) -> str:
        await trio.sleep_forever()
        return ""

    with trio.move_on_after(1):
        await stack(audit=audit).run(ctx(timeout=100), forever)
    audit.close()
    (record,) = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert (record["outcome"], record["error"]) == ("cancelled", None)


# -- metrics ----------------------------------------------------------------------------------------


def test_metrics_percentiles_and_prometheus() -> None:
    metrics = Metrics()
    for i in range(1, 101):
        metrics.observe("s", "t", i / 1000, ok=i % 10 != 0, cache_hit=i <= 5)
    metrics.observe("s", 'we"ird', 0.5, ok=True)
    snap = metrics.snapshot()["s"]["t"]
    assert (snap.calls, snap.errors, snap.cache_hits) == (100, 10, 5)
    assert (snap.p50, snap.p95, snap.p99) == (0.05, 0.095, 0.099)  # nearest rank
    text = metrics.prometheus(["extra_line 1"])
    assert 'mcpwire_host_calls_total{server="s",tool="t"} 100' in text
    assert 'mcpwire_host_errors_total{server="s",tool="t"} 10' in text
    assert 'mcpwire_host_cache_hits_total{server="s",tool="t"} 5' in text
    assert 'mcpwire_host_latency_seconds{server="s",tool="t",quantile="0.99"} 0.099' in text
    assert 'mcpwire_host_latency_seconds_count{server="s",tool="t"} 100' in text
    assert 'tool="we\\"ird"' in text and text.endswith("extra_line 1\n")
    metrics.forget("s")
    assert metrics.snapshot() == {}


def test_redaction_answers_the_same_for_keys_it_has_seen_and_keeps_no_long_ones() -> None:
    """What the default patterns say of a key is kept (a call's keys repeat), so the second
    redaction of the same arguments must read exactly as the first; keys longer than 128
    characters are judged each time and never kept (a caller cannot fill memory with them)."""
    from mcpwire.host.policies import audit as audit_policy

    arguments = {"message": "hi", "api_key": "sk-123", "nested": {"Password": "x", "note": "ok"}}
    first = audit_policy.redact(arguments)
    assert first == {"message": "hi", "api_key": "[REDACTED]", "nested": {"Password": "[REDACTED]", "note": "ok"}}
    assert audit_policy.redact(arguments) == first
    long_key = "token_" + "x" * 200
    kept = len(audit_policy._DEFAULT_VERDICTS)
    assert audit_policy.redact({long_key: "v"}) == {long_key: "[REDACTED]"}
    assert long_key not in audit_policy._DEFAULT_VERDICTS and len(audit_policy._DEFAULT_VERDICTS) == kept
