from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
import trio.testing

from mcpwire.errors import ApprovalDenied, CircuitOpen, RequestTimeout, RPCError, ServerGone
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
)


def ctx(tool: str = "t", **kw: object) -> CallContext:
    return CallContext(server="s", tool=tool, arguments={"a": 1}, **kw)  # type: ignore[arg-type]


class Flaky:
    def __init__(self, failures: int, exc: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.exc = exc or ServerGone("gone", server="s")

    async def __call__(self, args: Mapping[str, object]) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc
        return f"ok{self.calls}"


async def test_retry_only_idempotent(autojump_clock: trio.testing.MockClock) -> None:
    stack: PolicyStack[str] = PolicyStack(
        breaker=CircuitBreaker("s"), retry=RetryPolicy(retries=2, rng=random.Random(1))
    )
    f = Flaky(2)
    assert await stack.run(ctx(read_only=True), f) == "ok3"
    f = Flaky(1)
    with pytest.raises(ServerGone):
        await stack.run(ctx(), f)
    assert f.calls == 1
    stack.retry.retryable = ["t*"]
    assert await stack.run(ctx(), Flaky(1)) == "ok2"
    f = Flaky(5, RPCError(-32602, "bad"))
    with pytest.raises(RPCError):
        await stack.run(ctx(idempotent=True), f)
    assert f.calls == 1


async def test_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async def slow(args: Mapping[str, object]) -> str:
        await trio.sleep(100)
        return "late"

    stack: PolicyStack[str] = PolicyStack(breaker=CircuitBreaker("s"), retry=RetryPolicy(retries=0))
    with pytest.raises(RequestTimeout, match=r"^server 's': tool 't' got no answer within 2s$"):
        await stack.run(ctx(timeout=2.0), slow)
    assert trio.current_time() == pytest.approx(2.0)


async def test_breaker_opens_half_opens_and_recovers(autojump_clock: trio.testing.MockClock) -> None:
    breaker = CircuitBreaker("s", failures=3, cooldown=10)
    stack: PolicyStack[str] = PolicyStack(breaker=breaker, retry=RetryPolicy(retries=0))
    for _ in range(3):
        with pytest.raises(ServerGone):
            await stack.run(ctx(), Flaky(1))
    assert breaker.current() is BreakerState.OPEN
    f = Flaky(0)
    with pytest.raises(CircuitOpen, match=r"^server 's': circuit open after 3 consecutive failures"):
        await stack.run(ctx(), f)
    assert f.calls == 0
    await trio.sleep(10)
    assert breaker.current() is BreakerState.HALF_OPEN
    with pytest.raises(ServerGone):
        await stack.run(ctx(), Flaky(1))
    assert breaker.current() is BreakerState.OPEN
    await trio.sleep(10)
    assert await stack.run(ctx(), f) == "ok1"
    assert breaker.current() is BreakerState.CLOSED


async def test_cache_ttl_lru_and_invalidation(autojump_clock: trio.testing.MockClock) -> None:
    cache: ResultCache[str] = ResultCache(ttl=5, size=2)
    stack: PolicyStack[str] = PolicyStack(breaker=CircuitBreaker("s"), cache=cache)
    f = Flaky(0)
    assert await stack.run(ctx(read_only=True), f) == "ok1"
    assert await stack.run(ctx(read_only=True), f) == "ok1"
    assert (cache.hits, cache.misses) == (1, 1)
    assert await stack.run(ctx(), f) == "ok2"  # not read-only: never cached
    await trio.sleep(6)
    assert await stack.run(ctx(read_only=True), f) == "ok3"
    assert cache.invalidate("s", kind="tool") == 1
    assert await stack.run(ctx(read_only=True), f) == "ok4"
    for uri in ("u1", "u2", "u3"):
        await stack.run(ctx(uri, kind="resource"), f)
    assert len(cache) == 2
    assert cache.invalidate("s", kind="resource", name="u3") == 1
    assert cache.hit_rate == pytest.approx(1 / 7)


def test_risk_classification() -> None:
    assert classify_risk("delete_file") is Risk.CRITICAL
    assert classify_risk("run_shell") is Risk.CRITICAL
    assert classify_risk("write_file") is Risk.HIGH
    assert classify_risk("list_things") is Risk.MEDIUM
    assert classify_risk("delete_file", read_only=True) is Risk.LOW
    assert classify_risk("echo", destructive=True) is Risk.CRITICAL


async def test_approval_rules_approver_and_timeout(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[ApprovalRequest] = []

    async def approver(req: ApprovalRequest) -> bool | dict[str, object]:
        seen.append(req)
        if req.tool == "delete_modified":
            return {"a": 2}
        if req.tool == "delete_slow":
            await trio.sleep(1000)
        return req.tool == "delete_ok"

    got: list[Mapping[str, object]] = []

    async def invoke(args: Mapping[str, object]) -> str:
        got.append(args)
        return "done"

    approval = ApprovalPolicy(rules=[("s", "drop_*", "deny"), ("*", "safe_*", "allow")], approver=approver)
    stack: PolicyStack[str] = PolicyStack(breaker=CircuitBreaker("s"), approval=approval)
    assert await stack.run(ctx("echo"), invoke) == "done"
    assert await stack.run(ctx("delete_ok"), invoke) == "done"
    assert seen[0].risk is Risk.CRITICAL
    await stack.run(ctx("delete_modified"), invoke)
    assert got[-1] == {"a": 2}
    with pytest.raises(ApprovalDenied, match=r"^tool 'drop_x' on server 's' is denied by the approval rules"):
        await stack.run(ctx("drop_x"), invoke)
    with pytest.raises(ApprovalDenied, match="was denied by the approver"):
        await stack.run(ctx("delete_no"), invoke)
    with pytest.raises(ApprovalDenied, match=r"no approval within 300s; denied$"):
        await stack.run(ctx("delete_slow"), invoke)
    assert trio.current_time() == pytest.approx(300)
    assert await stack.run(ctx("safe_delete"), invoke) == "done"
    with pytest.raises(ApprovalDenied, match="no approver is configured"):
        bare: PolicyStack[str] = PolicyStack(breaker=CircuitBreaker("s"), approval=ApprovalPolicy())
        await bare.run(ctx("exec"), invoke)


async def test_audit_and_metrics(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl", max_bytes=600, backups=2)
    metrics = Metrics()
    stack: PolicyStack[str] = PolicyStack(
        breaker=CircuitBreaker("s"), retry=RetryPolicy(retries=0), audit=audit, metrics=metrics
    )
    c = CallContext(server="s", tool="login", arguments={"api_token": "hunter2", "user": "bob"})
    await stack.run(c, Flaky(0))
    with pytest.raises(ServerGone):
        await stack.run(ctx(), Flaky(1))
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert lines[0]["outcome"] == "ok" and lines[0]["arguments"]["user"] == "bob"
    assert "hunter2" not in json.dumps(lines) and lines[0]["arguments"]["api_token"].startswith("sha256:")
    assert lines[1]["outcome"] == "error" and lines[1]["error"].startswith("ServerGone")
    for _ in range(10):
        await stack.run(ctx(), Flaky(0))
    assert (tmp_path / "audit.jsonl.1").exists() and (tmp_path / "audit.jsonl.2").exists()
    assert not (tmp_path / "audit.jsonl.3").exists()
    snap = metrics.snapshot()
    assert snap["s"]["t"]["calls"] == 11 and snap["s"]["t"]["errors"] == 1
    assert snap["s"]["t"]["p99"] >= snap["s"]["t"]["p50"] >= 0
    assert 'mcpwire_host_calls_total{server="s",tool="t"} 11' in metrics.prometheus()
