"""The retry policy: exponential backoff with full jitter, only for idempotent operations.

A call is retried only when repeating it cannot do harm: resource reads, tools annotated
``readOnlyHint`` or ``idempotentHint``, and tools marked ``retryable`` in the config. Only
transient failures are retried (the connection broke, no answer in time); an answer from the
server, even an error, is final.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from ...errors import ClientClosed, RequestTimeout, TransportError
from .context import CallContext

__all__ = ["RetryPolicy", "is_transient"]

log = logging.getLogger("mcpwire.host.policies.retry")
T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """True for failures a later attempt may not see: a lost connection or a timeout."""
    return isinstance(exc, RequestTimeout | TransportError) and not isinstance(exc, ClientClosed)


@dataclass(slots=True)
class RetryPolicy:
    """Retries idempotent calls on transient failures, with exponential backoff and full jitter.

    Args:
        retries: extra attempts after the first (``CallContext.retries`` overrides it).
        base_delay, max_delay: the backoff before attempt *n* is uniform in
            ``[0, min(max_delay, base_delay * 2**n)]`` seconds.
    """

    retries: int = 2
    base_delay: float = 0.2
    max_delay: float = 5.0
    rng: random.Random = field(default_factory=random.Random)

    @staticmethod
    def applies(ctx: CallContext) -> bool:
        """True when repeating the call cannot do harm."""
        if ctx.retryable is not None:
            return ctx.retryable
        if ctx.kind != "tool":
            return True
        return bool(ctx.read_only or ctx.idempotent)

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** min(attempt, 30)))

    async def run(self, ctx: CallContext, invoke: Callable[[], Awaitable[T]]) -> T:
        """Cancellation: cancels the attempt or the backoff sleep."""
        retries = self.retries if ctx.retries is None else ctx.retries
        attempts = retries + 1 if self.applies(ctx) else 1
        for attempt in range(attempts):
            try:
                return await invoke()
            except Exception as exc:
                if attempt + 1 >= attempts or not is_transient(exc):
                    raise
                wait = self.delay(attempt)
                log.info("%s: retrying %r in %.2fs after %s", ctx.server, ctx.tool, wait, type(exc).__name__)
                await trio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover
