"""The policy stack: audit -> approval -> cache -> breaker -> retry -> timeout -> invoke.

Theory of operation: :meth:`PolicyStack.run` takes a :class:`CallContext` and an ``invoke``
coroutine function that performs the request with the (possibly modified) arguments. Approval
runs first so a denied call costs nothing and is still audited; the cache answers before the
breaker so a cached read works while a server is failing; the breaker wraps the retries so one
call counts once; the timeout bounds each attempt. Metrics and the audit record are written in
``finally``, so every call leaves exactly one of each, whatever its outcome.

A call's latency is the call's own: the time it waited for a decision is measured apart
(``ctx.approval_wait``, the audit record's ``approval_wait_ms``), so a tool that answers in 7 ms
shows 7 ms however long a person took to approve it. A call sent to the server of a tool that is
not read-only drops that server's cached results once it ends (:meth:`PolicyStack.invalidate`;
``ctx.invalidates`` widens or narrows it), so a read after a write is fresh.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from ...client.relay import RelayedAnswer
from ...errors import ApprovalAbandoned, ApprovalDenied
from .approval import ApprovalPolicy
from .audit import ArgumentsMode, AuditLog, AuditRecord, AuditSink
from .breaker import CircuitBreaker
from .cache import ResultCache, hinted_ttl
from .context import CallContext
from .metrics import Metrics
from .retry import RetryPolicy
from .timeout import run_with_timeout

__all__ = ["PolicyStack"]

log = logging.getLogger("mcpwire.host.policies")
T = TypeVar("T")


def _is_error_result(value: object) -> bool:
    return getattr(value, "is_error", False) is True


@dataclass(slots=True)
class PolicyStack(Generic[T]):
    """Every policy of one server; any of them may be left out (``None``)."""

    breaker: CircuitBreaker | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cache: ResultCache[T] | None = None
    approval: ApprovalPolicy | None = None
    audit: AuditSink | None = None
    metrics: Metrics | None = None
    #: how records show arguments (an :class:`AuditLog` sink uses its own setting)
    audit_arguments: ArgumentsMode = "redact"
    audit_patterns: Sequence[re.Pattern[str]] | None = None
    #: asked before each record is built; ``False`` skips it (nobody would read it)
    audit_wanted: Callable[[], bool] | None = None

    def cacheable(self, ctx: CallContext) -> bool:
        """Whether a result may be answered from the cache: resource reads, and tools annotated
        ``readOnlyHint``, or ``idempotentHint`` with ``destructiveHint: false`` (absent, the
        schema's default for ``destructiveHint`` is true). A configured ``cacheable`` decides
        alone; ``retryable`` plays no part (a retry repeats a call, a cache hit skips it). Never a
        relayed round that carries its asker's input responses or request state (a gateway's
        2026-07-28 client answering a backend's questions): neither read from nor stored."""
        if self.cache is None or not self.cache.enabled:
            return False
        relayed = ctx.relay.round if ctx.relay is not None else None
        if relayed is not None and relayed.params:
            return False  # answers to a relayed round's questions: the result is its asker's alone
        if ctx.cacheable is not None:
            return ctx.cacheable
        if ctx.kind == "prompt":
            return False
        if ctx.kind != "tool" or ctx.read_only:
            return True
        return bool(ctx.idempotent) and ctx.destructive is False

    async def run(
        self, ctx: CallContext, invoke: Callable[[Mapping[str, object]], Awaitable[T]], *, bounded: bool = False
    ) -> T:
        """Runs ``invoke(arguments)`` under every policy; sets ``ctx.approval`` and ``ctx.outcome``.

        ``bounded``: ``invoke`` ends by ``ctx.deadline`` itself (see :func:`run_with_timeout`).

        Raises:
            ApprovalDenied, CircuitOpen: a policy refused the call.
            RequestTimeout: every attempt ran out of time.
            MCPWireError: the call's own failure, after retries.

        Cancellation: propagates; the audit record says ``cancelled``.
        """
        start = time.perf_counter()
        error: str | None = None
        sent = False
        ctx.approval = "allow"
        ctx.outcome = "error"
        try:
            if self.approval is not None:
                try:
                    ctx.approval, ctx.arguments = await self.approval.check(ctx)
                except ApprovalAbandoned:
                    ctx.approval = ctx.outcome = "abandoned"
                    raise
                except ApprovalDenied:
                    ctx.approval = ctx.outcome = "denied"
                    raise
                finally:
                    if ctx.approval != "allow" or ctx.approval_id is not None:  # a decision's wait is not the call's
                        ctx.approval_wait = time.perf_counter() - start
                        start += ctx.approval_wait
            cache = self.cache if self.cacheable(ctx) else None
            generation = self.cache.generation if self.cache is not None else 0
            if cache is not None:
                key = ResultCache.key(ctx)
                if not ctx.fresh:
                    hit, value = cache.get(key)
                    if hit:
                        ctx.outcome = "cache_hit"
                        return value  # type: ignore[return-value]
            args = ctx.arguments
            sent = True

            async def attempt() -> T:
                return await run_with_timeout(ctx, lambda: invoke(args), bounded=bounded)

            async def retried() -> T:
                return await self.retry.run(ctx, attempt)

            result = await (self.breaker.run(retried) if self.breaker is not None else retried())
            if self.cache is not None and self.cache.generation == generation:
                # what this call changed is dropped before its own result is kept (a cacheable
                # call that writes, an idempotent one, answers later calls from its own result)
                sent = False
                if self.invalidate(ctx):
                    generation = self.cache.generation
            if _is_error_result(result):
                ctx.outcome = "tool_error"
            else:
                ctx.outcome = "ok"
                if cache is not None:
                    ttl = hinted_ttl(result, ctx)
                    if ctx.cache_ttl is not None:
                        ttl = ctx.cache_ttl if ttl is None else min(ttl, ctx.cache_ttl)
                    cache.put(key, result, ttl=ttl, scope=getattr(result, "cache_scope", None), generation=generation)
            return result
        except RelayedAnswer:
            # the server answered the relayed round with what its asker follows (its questions, a
            # task): an answer, recorded as one, that the proxy passes on
            ctx.outcome = "ok"
            raise
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                ctx.outcome = "cancelled"
            elif ctx.outcome not in ("denied", "abandoned"):
                ctx.outcome = "error"
            if not isinstance(exc, trio.Cancelled):
                error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise
        finally:
            latency = time.perf_counter() - start
            if sent:
                self.invalidate(ctx)
            if self.metrics is not None:
                name = {"tool": ctx.tool, "resource": "resources/read", "prompt": "prompts/get"}.get(ctx.kind, ctx.tool)
                self.metrics.observe(
                    ctx.server,
                    name,
                    latency,
                    ok=ctx.outcome in ("ok", "cache_hit"),
                    cache_hit=ctx.outcome == "cache_hit",
                )
            if self.audit is not None and (self.audit_wanted is None or self.audit_wanted()):
                self._audit(self.audit, ctx, latency, error)

    def invalidate(self, ctx: CallContext) -> bool:
        """Drops the cached results a call sent to the server may have made stale (and moves the
        cache's generation on); returns whether the call's rule drops anything at all.

        A tool call that is not read-only drops every cached result of its server (tool results
        and resource reads); a read-only one, a resource read and a prompt drop nothing.
        ``ctx.invalidates`` decides instead when set: ``"server"`` (everything), ``"none"``, or
        globs naming the cached tools or resource URIs of the server to drop.
        """
        if self.cache is None or ctx.kind != "tool":
            return False
        rule = ctx.invalidates
        if rule is None:
            rule = "none" if ctx.read_only else "server"
        if rule == "none":
            return False
        if rule == "server":
            dropped = self.cache.invalidate(ctx.server)
        else:
            dropped = self.cache.invalidate(ctx.server, names=tuple(rule))
        if dropped:
            log.debug("%s: %s may have changed things: %d cached results dropped", ctx.server, ctx.tool, dropped)
        return True

    def _audit(self, sink: AuditSink, ctx: CallContext, latency: float, error: str | None) -> None:
        patterns: Sequence[re.Pattern[str]] | None
        if isinstance(sink, AuditLog):
            mode, patterns = sink.arguments, sink.patterns
        else:
            mode, patterns = self.audit_arguments, self.audit_patterns
        record = AuditRecord.for_call(ctx, latency=latency, error=error, arguments=mode, patterns=patterns)
        try:
            sink.write(record)
        except Exception as exc:  # a failing sink must not fail the call it records
            log.warning("audit sink %r cannot write: %s: %s", sink, type(exc).__name__, exc)
