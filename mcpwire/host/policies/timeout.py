"""The timeout policy: a hard deadline per attempt, mapped to :class:`RequestTimeout`.

The client already cancels a request on the wire when its scope is cancelled, so the deadline
is a plain trio cancel scope; mapping the error here (inside the retry policy) lets a timed-out
idempotent call be retried. An attempt whose ``invoke`` keeps the deadline itself (``bounded``:
the host's calls hand ``ctx.deadline`` to the client, which ends its waits there and cancels the
request on the wire) needs no cancel scope of its own: a call then costs no registration in
trio's deadline table, and the same timeout ends it with the same error.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import trio

from ...errors import RequestTimeout
from .context import CallContext

__all__ = ["DEFAULT_TIMEOUT", "run_with_timeout"]

T = TypeVar("T")

DEFAULT_TIMEOUT: Final = 30.0


async def run_with_timeout(ctx: CallContext, invoke: Callable[[], Awaitable[T]], *, bounded: bool = False) -> T:
    """Runs ``invoke()`` for at most ``ctx.timeout`` seconds (``ctx.deadline`` is set to its end).

    ``bounded``: ``invoke`` itself ends by ``ctx.deadline`` with :class:`RequestTimeout` (see the
    module's docstring); no cancel scope is opened.

    Raises:
        RequestTimeout: the deadline passed; the request was cancelled.

    Cancellation: propagates (the request is cancelled on the wire by the client).
    """
    ctx.deadline = trio.current_time() + ctx.timeout
    try:
        if bounded:
            try:
                return await invoke()
            except RequestTimeout:
                if trio.current_time() < ctx.deadline:
                    raise  # a timeout of the request's own, shorter than the attempt's
                raise _timed_out(ctx) from None
        with trio.move_on_at(ctx.deadline) as scope:
            return await invoke()
        if scope.cancelled_caught:
            raise _timed_out(ctx)
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        ctx.deadline = math.inf


def _timed_out(ctx: CallContext) -> RequestTimeout:
    method = "tools/call" if ctx.kind == "tool" else "resources/read"
    return RequestTimeout(
        f"server {ctx.server!r}: {ctx.kind} {ctx.tool!r} got no answer within {ctx.timeout:g}s",
        method=method,
        server=ctx.server,
        timeout=ctx.timeout,
    )
