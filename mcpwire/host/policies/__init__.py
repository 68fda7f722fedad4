"""Call policies, applied in the order audit -> approval -> cache -> breaker -> retry -> timeout.

Theory of operation: a :class:`CallContext` describes one call; :class:`PolicyStack` runs it
through each policy around an ``invoke`` coroutine function that performs the actual request.
Times come from ``trio.current_time()``, so tests drive them with trio's autojump clock.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import json
import logging
import os
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Generic, Literal, TypeVar

import trio

from ...errors import (
    ApprovalDenied,
    CircuitOpen,
    ClientClosed,
    RequestTimeout,
    RPCError,
    TransportError,
)

__all__ = [
    "ApprovalPolicy",
    "ApprovalRequest",
    "AuditLog",
    "BreakerState",
    "CallContext",
    "CircuitBreaker",
    "Metrics",
    "PolicyStack",
    "ResultCache",
    "RetryPolicy",
    "Risk",
    "classify_risk",
]

log = logging.getLogger("mcpwire.host.policies")
T = TypeVar("T")
Invoke = Callable[[], Awaitable[T]]

DEFAULT_APPROVAL_TIMEOUT: Final = 300.0


@dataclass(slots=True)
class CallContext:
    """One call going through the policies."""

    server: str
    tool: str  #: tool name on the server, or the resource URI for reads
    arguments: Mapping[str, object]
    kind: Literal["tool", "resource", "list"] = "tool"
    read_only: bool = False
    idempotent: bool = False
    destructive: bool | None = None
    timeout: float = 30.0


# -- retry ---------------------------------------------------------------------------------------


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, RequestTimeout | TransportError) and not isinstance(exc, ClientClosed)


@dataclass(slots=True)
class RetryPolicy:
    """Retries idempotent calls on transient failures, with exponential backoff and full jitter."""

    retries: int = 2
    base_delay: float = 0.2
    max_delay: float = 5.0
    retryable: Sequence[str] = ()
    rng: random.Random = field(default_factory=random.Random)

    def applies(self, ctx: CallContext) -> bool:
        if ctx.kind != "tool" or ctx.read_only or ctx.idempotent:
            return True
        return any(fnmatch.fnmatchcase(ctx.tool, g) for g in self.retryable)

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))

    async def run(self, ctx: CallContext, invoke: Invoke[T]) -> T:
        """Cancellation: cancels the attempt or the backoff sleep."""
        attempts = self.retries + 1 if self.applies(ctx) else 1
        for attempt in range(attempts):
            try:
                return await invoke()
            except Exception as exc:
                if attempt + 1 >= attempts or not _transient(exc):
                    raise
                wait = self.delay(attempt)
                log.info("%s: retrying %r in %.2fs after %s", ctx.server, ctx.tool, wait, type(exc).__name__)
                await trio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover


# -- circuit breaker ---------------------------------------------------------------------------


class BreakerState(enum.Enum):
    CLOSED = "closed"  #: calls pass
    OPEN = "open"  #: calls fail fast with CircuitOpen
    HALF_OPEN = "half_open"  #: one trial call passes


@dataclass(slots=True)
class CircuitBreaker:
    """Per-server breaker: opens after ``failures`` consecutive failures, half-opens after
    ``cooldown`` seconds, closes again on a successful trial."""

    server: str
    failures: int = 5
    cooldown: float = 30.0
    state: BreakerState = BreakerState.CLOSED
    consecutive: int = 0
    opened_at: float = 0.0
    trial_running: bool = False

    def _refresh(self) -> None:
        if self.state is BreakerState.OPEN and trio.current_time() - self.opened_at >= self.cooldown:
            self.state = BreakerState.HALF_OPEN
            log.info("%s: circuit half-open", self.server)

    def current(self) -> BreakerState:
        self._refresh()
        return self.state

    def before(self) -> None:
        self._refresh()
        if self.state is BreakerState.OPEN or (self.state is BreakerState.HALF_OPEN and self.trial_running):
            left = max(0.0, self.cooldown - (trio.current_time() - self.opened_at))
            raise CircuitOpen(
                f"server {self.server!r}: circuit open after {self.consecutive} consecutive failures; "
                f"calls fail fast for another {left:.1f}s"
            )
        if self.state is BreakerState.HALF_OPEN:
            self.trial_running = True

    def success(self) -> None:
        if self.state is not BreakerState.CLOSED:
            log.info("%s: circuit closed", self.server)
        self.state = BreakerState.CLOSED
        self.consecutive = 0
        self.trial_running = False

    def failure(self) -> None:
        self.consecutive += 1
        self.trial_running = False
        if self.state is BreakerState.HALF_OPEN or self.consecutive >= self.failures:
            if self.state is not BreakerState.OPEN:
                log.warning("%s: circuit open after %d failures", self.server, self.consecutive)
            self.state = BreakerState.OPEN
            self.opened_at = trio.current_time()

    async def run(self, invoke: Invoke[T]) -> T:
        self.before()
        try:
            result = await invoke()
        except (RPCError, ApprovalDenied):
            # the server answered: it is alive
            self.success()
            raise
        except Exception:
            self.failure()
            raise
        except BaseException:
            self.trial_running = False
            raise
        self.success()
        return result


# -- cache ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class ResultCache(Generic[T]):
    """TTL + LRU cache of read-only tool results and resource reads."""

    ttl: float = 60.0
    size: int = 256
    hits: int = 0
    misses: int = 0
    _entries: OrderedDict[tuple[str, str, str, str], tuple[float, T]] = field(default_factory=OrderedDict)

    @staticmethod
    def key(ctx: CallContext) -> tuple[str, str, str, str]:
        args = json.dumps(ctx.arguments, sort_keys=True, separators=(",", ":"), default=str)
        return (ctx.server, ctx.kind, ctx.tool, args)

    def get(self, key: tuple[str, str, str, str]) -> tuple[bool, T | None]:
        entry = self._entries.get(key)
        if entry is not None and entry[0] > trio.current_time():
            self._entries.move_to_end(key)
            self.hits += 1
            return True, entry[1]
        if entry is not None:
            del self._entries[key]
        self.misses += 1
        return False, None

    def put(self, key: tuple[str, str, str, str], value: T) -> None:
        if self.size <= 0 or self.ttl <= 0:
            return
        self._entries[key] = (trio.current_time() + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def invalidate(self, server: str, *, kind: str | None = None, name: str | None = None) -> int:
        """Drops a server's entries (optionally one kind, or one tool/URI); returns how many."""
        doomed = [
            k
            for k in self._entries
            if k[0] == server and (kind is None or k[1] == kind) and (name is None or k[2] == name)
        ]
        for k in doomed:
            del self._entries[k]
        return len(doomed)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


# -- approval ------------------------------------------------------------------------------------


class Risk(enum.IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2
    CRITICAL = 3


_CRITICAL_WORDS: Final = ("delete", "remove", "drop", "exec", "shell", "transfer", "payment", "kill", "destroy")
_HIGH_WORDS: Final = ("write", "update", "create", "upload", "edit", "move", "set", "insert", "send", "touch")
_MEDIUM_WORDS: Final = ("list", "search", "fetch", "get", "read", "query", "find")


def classify_risk(tool: str, *, read_only: bool | None = None, destructive: bool | None = None) -> Risk:
    """Risk from annotations first, then from keywords in the tool's name."""
    if destructive:
        return Risk.CRITICAL
    if read_only:
        return Risk.LOW
    words = tool.lower()
    if any(w in words for w in _CRITICAL_WORDS):
        return Risk.CRITICAL
    if any(w in words for w in _HIGH_WORDS):
        return Risk.HIGH
    if destructive is False:
        return Risk.MEDIUM
    if any(w in words for w in _MEDIUM_WORDS):
        return Risk.MEDIUM
    return Risk.MEDIUM


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    server: str
    tool: str
    arguments: Mapping[str, object]
    risk: Risk


#: an approver answers True (approve), False (deny) or a dict (approve with these arguments)
Approver = Callable[[ApprovalRequest], Awaitable[bool | dict[str, object]]]


@dataclass(slots=True)
class ApprovalPolicy:
    """Rules ``(server glob, tool glob, decision)``, first match wins; unmatched calls at or
    above ``ask_at`` go to the approver (denied when there is none, or it times out)."""

    rules: Sequence[tuple[str, str, Literal["allow", "deny", "ask"]]] = ()
    approver: Approver | None = None
    ask_at: Risk = Risk.CRITICAL
    timeout: float = DEFAULT_APPROVAL_TIMEOUT

    def decide(self, ctx: CallContext, risk: Risk) -> Literal["allow", "deny", "ask"]:
        for server_glob, tool_glob, decision in self.rules:
            if fnmatch.fnmatchcase(ctx.server, server_glob) and fnmatch.fnmatchcase(ctx.tool, tool_glob):
                return decision
        return "ask" if risk >= self.ask_at else "allow"

    async def check(self, ctx: CallContext) -> tuple[str, Mapping[str, object]]:
        """Returns ``(decision, arguments)``; raises ApprovalDenied.

        Cancellation: cancels the approver."""
        if ctx.kind != "tool":
            return "allow", ctx.arguments
        risk = classify_risk(ctx.tool, read_only=ctx.read_only, destructive=ctx.destructive)
        decision = self.decide(ctx, risk)
        where = f"tool {ctx.tool!r} on server {ctx.server!r}"
        if decision == "allow":
            return "allow", ctx.arguments
        if decision == "deny":
            raise ApprovalDenied(f"{where} is denied by the approval rules (risk {risk.name})")
        if self.approver is None:
            raise ApprovalDenied(f"{where} needs approval (risk {risk.name}) but no approver is configured")
        answer: bool | dict[str, object] = False
        with trio.move_on_after(self.timeout) as scope:
            answer = await self.approver(ApprovalRequest(ctx.server, ctx.tool, dict(ctx.arguments), risk))
        if scope.cancelled_caught:
            raise ApprovalDenied(f"{where}: no approval within {self.timeout:g}s; denied")
        if answer is False:
            raise ApprovalDenied(f"{where} was denied by the approver (risk {risk.name})")
        if isinstance(answer, dict):
            return "approved_modified", answer
        return "approved", ctx.arguments


# -- audit -----------------------------------------------------------------------------------------

_SECRET_KEYS: Final = ("token", "secret", "password", "passwd", "key", "auth", "credential", "cookie")


def redact(arguments: Mapping[str, object]) -> dict[str, object]:
    """Values under secret-looking keys become a short hash; long strings are hashed too."""
    out: dict[str, object] = {}
    for k, v in arguments.items():
        if any(s in k.lower() for s in _SECRET_KEYS):
            out[k] = "sha256:" + hashlib.sha256(repr(v).encode()).hexdigest()[:12]
        elif isinstance(v, Mapping):
            out[k] = redact(v)
        elif isinstance(v, str) and len(v) > 200:
            out[k] = f"<{len(v)} chars sha256:{hashlib.sha256(v.encode()).hexdigest()[:12]}>"
        else:
            out[k] = v
    return out


@dataclass(slots=True)
class AuditLog:
    """Append-only JSONL, one line per call, rotated to ``.1`` ... ``.N`` at ``max_bytes``."""

    path: Path
    max_bytes: int = 10_000_000
    backups: int = 3

    def record(
        self,
        ctx: CallContext,
        *,
        decision: str,
        latency: float,
        outcome: str,
        error: str | None = None,
    ) -> None:
        line = json.dumps(
            {
                "time": time.time(),
                "server": ctx.server,
                "tool": ctx.tool,
                "kind": ctx.kind,
                "arguments": redact(ctx.arguments),
                "decision": decision,
                "latency_ms": round(latency * 1000, 3),
                "outcome": outcome,
                "error": error,
            },
            default=str,
        )
        self._rotate(len(line) + 1)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def _rotate(self, incoming: int) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return
        if size + incoming <= self.max_bytes:
            return
        for i in range(self.backups - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))


# -- metrics ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Series:
    calls: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)

    def add(self, latency: float, ok: bool) -> None:
        self.calls += 1
        if not ok:
            self.errors += 1
        self.latencies.append(latency)
        if len(self.latencies) > 2048:
            del self.latencies[:1024]

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(slots=True)
class Metrics:
    """Per (server, tool) counts, errors and latency percentiles."""

    series: dict[tuple[str, str], _Series] = field(default_factory=dict)

    def observe(self, server: str, tool: str, latency: float, ok: bool) -> None:
        self.series.setdefault((server, tool), _Series()).add(latency, ok)

    def snapshot(self) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (server, tool), s in sorted(self.series.items()):
            out.setdefault(server, {})[tool] = {
                "calls": s.calls,
                "errors": s.errors,
                "p50": s.percentile(0.5),
                "p95": s.percentile(0.95),
                "p99": s.percentile(0.99),
            }
        return out

    def prometheus(self) -> str:
        lines = [
            "# TYPE mcpwire_host_calls_total counter",
            "# TYPE mcpwire_host_errors_total counter",
            "# TYPE mcpwire_host_latency_seconds summary",
        ]
        for (server, tool), s in sorted(self.series.items()):
            labels = f'server="{_esc(server)}",tool="{_esc(tool)}"'
            lines.append(f"mcpwire_host_calls_total{{{labels}}} {s.calls}")
            lines.append(f"mcpwire_host_errors_total{{{labels}}} {s.errors}")
            for q in (0.5, 0.95, 0.99):
                lines.append(f'mcpwire_host_latency_seconds{{{labels},quantile="{q}"}} {s.percentile(q)}')
        return "\n".join(lines) + "\n"


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# -- the stack -------------------------------------------------------------------------------------


@dataclass(slots=True)
class PolicyStack(Generic[T]):
    """audit -> approval -> cache -> breaker -> retry -> timeout -> invoke."""

    breaker: CircuitBreaker
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cache: ResultCache[T] | None = None
    approval: ApprovalPolicy | None = None
    audit: AuditLog | None = None
    metrics: Metrics | None = None

    async def run(self, ctx: CallContext, invoke: Callable[[Mapping[str, object]], Awaitable[T]]) -> T:
        """Runs ``invoke(arguments)`` under every policy.

        Cancellation: propagates; the audit line records ``cancelled``."""
        start = time.perf_counter()
        decision = "allow"
        outcome = "error"
        error: str | None = None
        try:
            if self.approval is not None:
                try:
                    decision, arguments = await self.approval.check(ctx)
                except ApprovalDenied:
                    decision = "denied"
                    raise
                ctx.arguments = arguments
            cacheable = self.cache is not None and (ctx.kind != "tool" or ctx.read_only)
            key = ResultCache.key(ctx)
            if cacheable:
                assert self.cache is not None
                hit, value = self.cache.get(key)
                if hit:
                    outcome = "cache_hit"
                    return value  # type: ignore[return-value]
            args = ctx.arguments

            async def attempt() -> T:
                with trio.fail_after(ctx.timeout):
                    return await invoke(args)

            async def guarded() -> T:
                return await self.retry.run(ctx, attempt)

            try:
                result = await self.breaker.run(guarded)
            except trio.TooSlowError:
                raise RequestTimeout(
                    f"server {ctx.server!r}: {ctx.kind} {ctx.tool!r} got no answer within {ctx.timeout:g}s",
                    server=ctx.server,
                    timeout=ctx.timeout,
                ) from None
            if cacheable:
                assert self.cache is not None
                self.cache.put(key, result)
            outcome = "ok"
            return result
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                outcome = "cancelled"
            else:
                error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            latency = time.perf_counter() - start
            if self.metrics is not None:
                self.metrics.observe(ctx.server, ctx.tool, latency, outcome in ("ok", "cache_hit"))
            if self.audit is not None:
                try:
                    self.audit.record(ctx, decision=decision, latency=latency, outcome=outcome, error=error)
                except OSError as exc:
                    log.warning("audit log %s is not writable: %s", self.audit.path, exc)
