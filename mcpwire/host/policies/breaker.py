"""The circuit breaker, one per server.

closed --N consecutive failures--> open --cool-down--> half-open --success--> closed; a failed
trial reopens it. While open, calls fail fast with :class:`CircuitOpen`; half-open lets one
trial call through at a time. An answer from the server (even a JSON-RPC error, or a result that
breaks its own output schema) proves it alive and counts as a success. Only the server's own
failures count against it: a lost or refused connection, no answer in time, an answer that is not
valid JSON-RPC. What the caller did wrong (a request refused before it was sent, a relayed round
its client never answered) is neither: a gateway client's failing requests must not shut the
server off for every other client. Time is ``trio.current_time()``, so tests drive it with the
autojump clock.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from ...errors import (
    CircuitOpen,
    HostError,
    OutputSchemaError,
    RemoteProtocolError,
    RequestTimeout,
    RPCError,
    TransportError,
)

__all__ = ["BreakerState", "CircuitBreaker"]

log = logging.getLogger("mcpwire.host.policies.breaker")
T = TypeVar("T")


class BreakerState(enum.Enum):
    CLOSED = "closed"  #: calls pass
    OPEN = "open"  #: calls fail fast with CircuitOpen
    HALF_OPEN = "half_open"  #: one trial call passes


@dataclass(slots=True)
class CircuitBreaker:
    """Opens after ``failures`` consecutive failures (0: never), half-opens after ``cooldown``
    seconds, closes again on a successful trial."""

    server: str
    failures: int = 5
    cooldown: float = 30.0
    state: BreakerState = BreakerState.CLOSED
    consecutive: int = 0
    opened_at: float = 0.0
    trial_running: bool = False
    #: times the breaker opened
    opened: int = 0

    def _refresh(self) -> None:
        if self.state is BreakerState.OPEN and trio.current_time() - self.opened_at >= self.cooldown:
            self.state = BreakerState.HALF_OPEN
            log.info("%s: circuit half-open: the next call is a trial", self.server)

    def current(self) -> BreakerState:
        self._refresh()
        return self.state

    def before(self) -> None:
        """Raises CircuitOpen when calls must fail fast; marks a half-open trial as running."""
        self._refresh()
        if self.state is BreakerState.OPEN or (self.state is BreakerState.HALF_OPEN and self.trial_running):
            left = max(0.0, self.cooldown - (trio.current_time() - self.opened_at))
            detail = f"another {left:.1f}s" if self.state is BreakerState.OPEN else "a trial call to finish"
            raise CircuitOpen(
                f"server {self.server!r}: circuit open after {self.consecutive} consecutive failures; "
                f"calls fail fast, waiting for {detail}"
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
        if self.failures <= 0:
            return
        if self.state is BreakerState.HALF_OPEN or self.consecutive >= self.failures:
            if self.state is not BreakerState.OPEN:
                log.warning("%s: circuit open after %d consecutive failures", self.server, self.consecutive)
                self.opened += 1
            self.state = BreakerState.OPEN
            self.opened_at = trio.current_time()

    async def run(self, invoke: Callable[[], Awaitable[T]]) -> T:
        """Cancellation: a cancelled trial counts as neither success nor failure."""
        self.before()
        try:
            result = await invoke()
        except (RPCError, HostError, OutputSchemaError):
            # the server answered (or a policy refused): it is alive
            self.success()
            raise
        except (TransportError, RequestTimeout, RemoteProtocolError):
            self.failure()
            raise
        except BaseException:
            # the caller's own doing (or a bug): no word on the server either way
            self.trial_running = False
            raise
        self.success()
        return result
