"""The steps of an OAuth flow, and the one loop that drives them.

Theory of operation: httpx drives an ``httpx.Auth`` through one async generator that yields
requests and gets their responses back. A flow has sub-steps (discovery, registration, a grant,
the token request), and ``yield from`` does not exist for async generators, so a step does not
forward another's requests: it yields a :class:`Call` of the sub-step, and :func:`run_steps`
keeps a stack, sends each response to the step that asked, resumes the caller when a sub-step
ends, and throws a sub-step's error into its caller where it called it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import NamedTuple, cast

import httpx

__all__ = ["Call", "Step", "run_steps"]


class Call(NamedTuple):
    """Yielded by a step: run ``step`` to its end, then carry on (``None`` comes back)."""

    step: Step


#: A step of a flow: yields the requests to send (each response comes back) or a :class:`Call`
#: of a sub-step. ``yield from`` does not exist for async generators, so steps do not drive
#: each other: :func:`run_steps` does, for all of them.
Step = AsyncGenerator["httpx.Request | Call", httpx.Response]


async def run_steps(step: Step) -> AsyncGenerator[httpx.Request, httpx.Response]:
    """Runs ``step`` and the sub-steps it calls, yielding their requests to httpx and sending
    each response back to the step that asked. Every step is closed, even when httpx closes
    this generator early (cancellation), so none is left to be finalized later."""
    stack = [step]
    sent: httpx.Response | None = None
    failed: BaseException | None = None
    try:
        while stack:
            top = stack[-1]
            try:
                if failed is not None:
                    # a sub-step failed: its caller gets the error where it called it
                    error, failed = failed, None
                    item = await top.athrow(error)
                else:
                    # a Call's yield gets None back, and ignores it
                    item = await top.asend(cast("httpx.Response", sent))
            except StopAsyncIteration:
                stack.pop()
                sent = None
                continue
            except Exception as exc:
                stack.pop()
                if not stack:
                    raise
                failed = exc
                continue
            if isinstance(item, Call):
                stack.append(item.step)
                sent = None
            else:
                sent = yield item
    finally:
        while stack:
            await stack.pop().aclose()
