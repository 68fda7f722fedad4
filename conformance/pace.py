"""How long to wait for a server, from how fast the run has seen it answer.

Theory of operation: a check judges rules, not the machine it runs on. On a busy machine (two
cores, a load of 15) a Python SDK server takes 7 to 9 s to start and a second to answer what it
answers in milliseconds alone; a fixed window turns that into "no answer", and a fixed grace after
stdin EOF into "did not exit promptly". So every wait for an answer is a *window* that grows with
what the run observes, measured per process and per answer:

- the start-up of each process (from its spawn, or an HTTP client's first request, to its first
  answer), and
- the latency of each answer (from the request to its response).

:meth:`Pace.answer_window` is the requested wait (``--timeout``: the floor), raised to
:data:`SLACK` times the slowest of the last :data:`KEEP` answers; :meth:`Pace.first_window` (a
wire's first answer, which includes its start-up) is twice the requested wait, raised to
:data:`SLACK` times the slowest start-up seen. Both stop at the ceiling, :data:`CEILING_FACTOR`
times the requested wait (at least :data:`CEILING_MIN_S`): a server slower than that is not
waited for, and the check that waited reports that it could not judge (``error``), never a
failure, unless its rule is about time itself (SV-08, exit after stdin EOF, whose grace
:meth:`Pace.exit_grace` scales with that very process's start-up).

One :class:`Pace` serves a whole run (the probes and every check); wires report to it as answers
arrive. Nothing here awaits.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

__all__ = ["CEILING_FACTOR", "CEILING_MIN_S", "KEEP", "SLACK", "Pace"]

#: a window is this many times the slowest recent observation
SLACK: Final = 3.0
#: answers remembered (the slowest of them sets the answer window)
KEEP: Final = 32
#: no window exceeds this many times the requested wait ...
CEILING_FACTOR: Final = 6.0
#: ... nor less than this many seconds of ceiling
CEILING_MIN_S: Final = 60.0
#: the start-up allowance of a wire's first answer, in requested waits (initialize always had it)
FIRST_ANSWER_FACTOR: Final = 2.0


@dataclass(slots=True)
class Pace:
    """The run's observed start-up and answer latencies, and the windows they give."""

    #: start-ups seen (seconds from a process's spawn to its first answer)
    startups: deque[float] = field(default_factory=lambda: deque(maxlen=KEEP))
    #: answer latencies seen (seconds from a request to its response)
    answers: deque[float] = field(default_factory=lambda: deque(maxlen=KEEP))
    #: extra factor of a second attempt (the runner's re-run of a check that could not judge)
    stretch: float = 1.0

    def observe_startup(self, seconds: float) -> None:
        self.startups.append(max(0.0, seconds))

    def observe_answer(self, seconds: float) -> None:
        self.answers.append(max(0.0, seconds))

    def ceiling(self, requested: float) -> float:
        return max(CEILING_MIN_S, CEILING_FACTOR * requested)

    def _window(self, floor: float, seen: deque[float], requested: float) -> float:
        wanted = max(floor, SLACK * max(seen, default=0.0)) * self.stretch
        return min(max(floor, wanted), self.ceiling(requested))

    def answer_window(self, requested: float) -> float:
        """How long to wait for an answer when ``requested`` seconds were asked for."""
        return self._window(requested, self.answers, requested)

    def first_window(self, requested: float) -> float:
        """How long to wait for a wire's first answer (its start-up included)."""
        return self._window(requested * FIRST_ANSWER_FACTOR, self.startups, requested)

    def exit_grace(self, base: float, startup: float | None, requested: float) -> float:
        """The time a process gets to exit after stdin EOF (SV-08): ``base``, or :data:`SLACK`
        times this process's own start-up when that was slower (a process that took 9 s to start
        on a busy machine is not failed for taking 2.5 s to stop), up to the ceiling."""
        wanted = max(base, SLACK * (startup or 0.0))
        return min(wanted, max(base, self.ceiling(requested)))

    def watch_window(self, minimum: float, requested: float) -> float:
        """How long to watch for what a server sends on its own after a session began (SV-11):
        ``minimum``, or the slowest start-up seen when that is longer (a proxy connects its backend,
        and relays what the backend sends, as long after its own start as a start takes)."""
        return min(max(minimum, max(self.startups, default=0.0)) * self.stretch, self.ceiling(requested))

    def scale(self, requested: float) -> float:
        """How much slower than requested the run has seen the server (1.0 at least)."""
        if requested <= 0:
            return 1.0
        return max(1.0, self.answer_window(requested) / requested, self.first_window(requested) / (2 * requested))
