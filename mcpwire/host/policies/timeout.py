"""The timeout policy: a hard deadline per attempt, mapped to :class:`RequestTimeout`.

The client already cancels a request on the wire when its scope is cancelled, so the deadline
is a plain trio cancel scope; mapping the error here (inside the retry policy) lets a timed-out
idempotent call be retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import trio

from ...errors import RequestTimeout
from .context import CallContext

__all__ = ["DEFAULT_TIMEOUT", "run_with_timeout"]

T = TypeVar("T")

DEFAULT_TIMEOUT: Final = 30.0


async def run_with_timeout(ctx: CallContext, invoke: Callable[[], Awaitable[T]]) -> T:
    """Runs ``invoke()`` for at most ``ctx.timeout`` seconds.

    Raises:
        RequestTimeout: the deadline passed; the request was cancelled.

    Cancellation: propagates (the request is cancelled on the wire by the client).
    """
    with trio.move_on_after(ctx.timeout) as scope:
        return await invoke()
    if scope.cancelled_caught:
        method = "tools/call" if ctx.kind == "tool" else "resources/read"
        raise RequestTimeout(
            f"server {ctx.server!r}: {ctx.kind} {ctx.tool!r} got no answer within {ctx.timeout:g}s",
            method=method,
            server=ctx.server,
            timeout=ctx.timeout,
        )
    raise AssertionError("unreachable")  # pragma: no cover
