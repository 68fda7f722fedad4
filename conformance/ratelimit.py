"""HTTP 429 Too Many Requests, waited out: every HTTP request the checker sends comes through here.

Theory of operation: a server may limit how fast a client calls it (RFC 6585 §4: 429 "indicates
that the user has sent too many requests in a given amount of time"; its answer "MAY include a
Retry-After header indicating how long to wait before making a new request"). That is the server's
policy, not its answer to the request: a check must never be judged on it. :func:`send_patiently`
sends a request; while the answer is 429 it reads a little of it (for the evidence), waits what the
server asked (``Retry-After`` as delay-seconds or as an HTTP-date, RFC 9110 §10.2.3) or, without a
readable one, a backoff that doubles per attempt, each wait cut to :data:`MAX_WAIT_S`, and sends
the same request again. It stops waiting, and the last 429 is the answer as it came, after
:data:`MAX_ATTEMPTS` attempts, once the waits of the request would pass :data:`MAX_TOTAL_WAIT_S`,
or when the next wait would reach past the deadline of the enclosing cancel scopes (the check's
own deadline): nothing hangs, and a check that runs out of time reports the 429, not a timeout.

``window`` is a read window around the request (a raw verb's ``timeout``): each wait moves its
deadline on by as much, so the window bounds reading the answer, not waiting for leave to send;
the enclosing deadlines still bound everything. Every 429 is handed to ``on_limited`` as a
:class:`RateLimited`: the HTTP wire keeps them with the exchange and notes each one, so the report
shows that the request was rate-limited and resent. The server's text in it (``Retry-After``, the
body) is hostile: it is cut here and redacted with the rest of the evidence (:mod:`.evidence`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import trio

from mcpwire.protocol.http1 import retry_after_seconds

if TYPE_CHECKING:
    import httpx

__all__ = [
    "BACKOFF_BASE_S",
    "MAX_ATTEMPTS",
    "MAX_TOTAL_WAIT_S",
    "MAX_WAIT_S",
    "TOO_MANY_REQUESTS",
    "RateLimited",
    "backoff",
    "retry_after",
    "send_patiently",
]

_log = logging.getLogger("mcpwire.check.ratelimit")

TOO_MANY_REQUESTS: Final = 429
#: sends of one request, the first included, before its 429 is taken as the answer
MAX_ATTEMPTS: Final = 5
#: the longest one wait before a resend (seconds); a longer Retry-After is cut to this
MAX_WAIT_S: Final = 5.0
#: the most one request waits in all (seconds)
MAX_TOTAL_WAIT_S: Final = 15.0
#: the wait after the first 429 without a readable Retry-After; it doubles per attempt
BACKOFF_BASE_S: Final = 0.5
#: what is kept of a 429's Retry-After and of its body
MAX_SHOWN_CHARS: Final = 200
_BODY_READ_BYTES: Final = 4096
#: the longest read of a 429's body (a server may trickle it)
_BODY_READ_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class RateLimited:
    """One 429 answer to a request: what it asked and what the checker did."""

    #: which send of the request was answered 429 (1: the first)
    attempt: int
    #: the ``Retry-After`` header as it came (cut), or None
    retry_after: str | None
    #: seconds waited before the request was sent again (0 when it was not)
    waited_s: float
    #: the request was sent again
    resent: bool
    #: the start of the 429's body (cut)
    body: str = ""
    #: why the checker stopped waiting (only when not ``resent``)
    gave_up: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record for reports (not redacted: see :mod:`.evidence`)."""
        return {
            "status": TOO_MANY_REQUESTS,
            "attempt": self.attempt,
            "retry_after": self.retry_after,
            "waited_s": round(self.waited_s, 3),
            "resent": self.resent,
            "body": self.body,
            "gave_up": self.gave_up,
        }

    def line(self, label: str) -> str:
        """One line of evidence: ``POST#3 429 Too Many Requests (Retry-After: '1'): resent after 1 s``."""
        asked = f"Retry-After: {self.retry_after!r}" if self.retry_after is not None else "no Retry-After"
        head = f"{label} {TOO_MANY_REQUESTS} Too Many Requests ({asked}, attempt {self.attempt} of {MAX_ATTEMPTS})"
        if self.resent:
            return f"{head}: rate-limited, resent after {self.waited_s:.3g} s"
        return f"{head}: not resent ({self.gave_up}); the 429 is the answer"


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait (delay-seconds or an HTTP-date; a date in the
    past is 0), or None when it is absent or cannot be read. ``now`` is the wall clock (epoch
    seconds) an HTTP-date is measured from (default: :func:`time.time`)."""
    return retry_after_seconds(value, now=now)


def backoff(attempt: int) -> float:
    """The wait after the ``attempt``-th send was answered 429 without a readable Retry-After."""
    return min(MAX_WAIT_S, BACKOFF_BASE_S * 2.0 ** max(0, attempt - 1))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + f"...({len(text)} chars)"


async def _read_some(response: httpx.Response) -> str:
    """The start of a 429's body, read for at most :data:`_BODY_READ_S`; the response is closed."""
    import httpx

    data = b""
    try:
        with trio.move_on_after(_BODY_READ_S):
            async for chunk in response.aiter_raw():
                data += chunk
                if len(data) >= _BODY_READ_BYTES:
                    break
    except httpx.TransportError:
        pass
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await response.aclose()
    return _cut(data[:_BODY_READ_BYTES].decode("utf-8", "replace"))


async def send_patiently(
    send: Callable[[], Awaitable[httpx.Response]],
    *,
    on_limited: Callable[[RateLimited], None],
    window: trio.CancelScope | None = None,
    now: Callable[[], float] = time.time,
) -> httpx.Response:
    """``send()``'s response, sending again while it is a 429 (see the module docstring); the last
    429 is returned unread when the checker stops waiting.

    Raises:
        httpx.TransportError: from ``send`` (the request could not be sent).

    Cancellation: a 429 being read or waited out is closed; nothing is left open.
    """
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        response = await send()
        if response.status_code != TOO_MANY_REQUESTS:
            return response
        header = response.headers.get("retry-after")
        asked = retry_after(header, now=now())
        wait = min(MAX_WAIT_S, asked if asked is not None else backoff(attempt))
        shown = _cut(header) if header is not None else None
        gave_up = None
        # the time this refusal may take: the wait and reading its body; a window moves on by it
        reserve = wait + _BODY_READ_S
        if attempt >= MAX_ATTEMPTS:
            gave_up = f"after {attempt} attempts"
        elif waited + wait > MAX_TOTAL_WAIT_S:
            gave_up = f"it would wait more than {MAX_TOTAL_WAIT_S:g} s in all"
        else:
            if window is not None:
                window.deadline += reserve
            if trio.current_time() + reserve >= trio.current_effective_deadline():
                if window is not None:
                    window.deadline -= reserve
                gave_up = f"waiting {wait:.3g} s would pass the deadline"
        if gave_up is not None:
            on_limited(RateLimited(attempt, shown, 0.0, resent=False, gave_up=gave_up))
            _log.debug("429 after %d attempts: not resent (%s)", attempt, gave_up)
            return response
        began = trio.current_time()
        body = await _read_some(response)
        if window is not None:  # the window moves on by the wait and the time the body took
            window.deadline -= max(0.0, _BODY_READ_S - (trio.current_time() - began))
        on_limited(RateLimited(attempt, shown, wait, resent=True, body=body))
        _log.debug("429 (attempt %d): resending in %.3g s", attempt, wait)
        await trio.sleep(wait)
        waited += wait
