"""The run's time: the budget clock, how long one finding may be shrunk, and the rounds' targets.

Theory of operation: :class:`Clock` holds the start of the run and, with a time budget, its end.
Every wait of the exchange stops at that end and nothing new (example, replay, unit) starts after
it (see :mod:`fuzz.schedule`). Units get their examples in rounds (:func:`rounds`: one, then
doubling from a tenth of ``max_examples``), and shrinking one finding takes a bounded share of the
budget (:func:`shrink_time`), so one slow bug never starves the other units.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .runner import Config

__all__ = ["SHRINK_BUDGET_SHARE", "SHRINK_FLOOR_S", "Clock", "rounds", "shrink_time"]

#: with a time budget, one finding is shrunk for at most this share of it (and at least the floor)
SHRINK_BUDGET_SHARE = 0.1
SHRINK_FLOOR_S = 2.0


@dataclass(slots=True)
class Clock:
    """The run's time: its start and, with a budget, its end (``until``, a ``time.monotonic()`` moment)."""

    start: float
    until: float | None

    def left(self) -> float | None:
        return None if self.until is None else max(0.0, self.until - time.monotonic())

    def over(self, now: float | None = None) -> bool:
        return self.until is not None and (time.monotonic() if now is None else now) >= self.until

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def shrink_time(config: Config) -> float:
    """Seconds one finding may be shrunk for: ``shrink_time``, and with a budget at most a tenth of
    it (at least :data:`SHRINK_FLOOR_S`), so shrinking one bug never starves the other units."""
    if config.time_budget is None:
        return config.shrink_time
    return min(config.shrink_time, max(SHRINK_FLOOR_S, config.time_budget * SHRINK_BUDGET_SHARE))


def rounds(max_examples: int) -> list[int]:
    """The examples every unit has after each round: one, then doubling from a tenth of ``max_examples``."""
    if max_examples <= 1:
        return [1]
    targets = [1]
    n = max(2, math.ceil(max_examples / 10))
    while n < max_examples:
        targets.append(n)
        n *= 2
    return [*targets, max_examples]
