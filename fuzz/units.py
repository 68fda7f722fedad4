"""One fuzzing run's shared state: its units, its sessions, and the Hypothesis settings of a round.

Theory of operation: a :class:`FuzzRun` is what every part of the schedule works on (the config,
the target and its :class:`~fuzz.exchange.Profile`, the report being written, the clock and the
root causes found so far). A :class:`Unit` is one unit of work (a tool, a protocol kind, the
stateful machine, the list check) with its counts across rounds. :class:`Sessions` is the
isolation of examples: with ``"auto"`` they share a session, replaced as soon as one misbehaves;
with ``"process"`` each gets a fresh process. Each round of a unit is one Hypothesis run, set up
by :func:`round_settings` and :func:`round_seed`, with its examples kept in the example database
under :func:`database_key`.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky, HypothesisWarning

from .budget import Clock
from .clusters import Clusters
from .exchange import Observation, Profile, Step, execute, prologue
from .oracles import OracleFailure
from .runner import Config, Finding, Report, UnitStats, run_steps
from .wire import Entry, Peer, Target

__all__ = [
    "FuzzRun",
    "Sessions",
    "Unit",
    "database_key",
    "example_database",
    "oracle_failures",
    "quiet_hypothesis",
    "round_seed",
    "round_settings",
    "troubled",
]


#: while a failure shrinks, an answer is waited for this many times the slowest answer seen ...
SHRINK_LATENCY_FACTOR: Final = 10.0
#: ... and at least this long
SHRINK_DEADLINE_FLOOR_S: Final = 0.5


def troubled(obs: Observation) -> bool:
    return (
        obs.died_after is not None
        or bool(obs.timed_out)
        or obs.write_failed is not None
        or obs.barrier_timed_out is not None
        or obs.oversized
        or obs.cut
    )


class Sessions:
    """Isolation (see the module docstring): a shared session replaced after trouble, or a fresh one."""

    def __init__(self, config: Config, target: Target, profile: Profile, clock: Clock) -> None:
        self.config, self.target, self.profile, self.clock = config, target, profile, clock
        self.peer: Peer | None = None
        #: the slowest answer seen so far (seconds), which bounds the deadline of shrinking
        self.slowest = 0.0

    def shrink_deadline(self) -> float:
        """The deadline of an example while a failure shrinks: ``deadline``, or
        :data:`SHRINK_LATENCY_FACTOR` times the slowest answer the run saw when that is shorter
        (at least :data:`SHRINK_DEADLINE_FLOOR_S`). A hang costs a whole deadline per candidate;
        a server that answers in milliseconds need not be given seconds to show that it hangs,
        and the finding is replayed with the full (and the confirming) deadline before it counts."""
        fast = max(SHRINK_DEADLINE_FLOOR_S, SHRINK_LATENCY_FACTOR * self.slowest)
        return min(self.config.deadline, fast)

    def _saw(self, obs: Observation) -> None:
        if obs.latency:
            self.slowest = max(self.slowest, max(obs.latency.values()))

    def fresh(self, steps: Sequence[Step], deadline: float | None = None) -> tuple[Observation, list[Entry]]:
        """The steps on a session of their own (over HTTP with ``isolation="process"``: a restarted server)."""
        self.close()
        restart = getattr(self.target, "restart", None)
        if self.config.isolation == "process" and restart is not None:
            restart()
        obs, entries = run_steps(
            self.target,
            self.profile,
            steps,
            deadline=self.config.deadline if deadline is None else deadline,
            settle=self.config.settle,
            startup=self.config.connect_timeout,
            until=self.clock.until,
        )
        self._saw(obs)
        return obs, entries

    def run(self, steps: Sequence[Step], deadline: float | None = None) -> tuple[Observation, list[Entry], bool]:
        """Runs an example; the flag says whether it ran on a fresh session (its trace stands alone)."""
        if self.config.isolation == "process":
            obs, entries = self.fresh(steps, deadline)
            return obs, entries, True
        fresh = self.peer is None
        if self.peer is None:
            self.peer = self.target.open()
        peer = self.peer
        mark = len(peer.trace.entries)
        setup = prologue(self.profile, self.config.connect_timeout) if fresh else []
        obs = execute(
            peer,
            [*setup, *steps],
            deadline=self.config.deadline if deadline is None else deadline,
            settle=self.config.settle,
            barrier=self.profile.probe,
            until=self.clock.until,
        )
        self._saw(obs)
        entries = list(peer.trace.entries[mark:])
        if troubled(obs):
            self.close()
            obs.stderr_tail = peer.trace.stderr_tail
        return obs, entries, fresh

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()
            self.peer = None


def database_key(target: Target, unit: str) -> bytes:
    """The key of a unit's examples in the example database: its target (command or URL) and its
    name, so a database shared by several servers, or by both eras of one, keeps them apart."""
    described = target.describe()
    return hashlib.sha256(repr((described.get("argv"), described.get("url"), unit)).encode()).digest()


def example_database(config: Config) -> ExampleDatabase | None:
    if config.database is None:
        return None
    return DirectoryBasedExampleDatabase(str(config.database))


def round_settings(config: Config, max_examples: int, first_round: bool) -> settings:
    # the database's examples (failures of earlier runs) are replayed in the first round only
    phases = [Phase.explicit, Phase.reuse] if first_round else []
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=example_database(config),
        derandomize=False,
        phases=[*phases, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
        print_blob=False,
        verbosity=Verbosity.quiet,  # the CLI's stdout is the report (--json)
    )


def round_seed(config: Config, unit: str, round_no: int) -> int | None:
    if config.seed is None:
        return None
    if round_no == 0:
        return config.seed
    digest = hashlib.sha256(f"{config.seed}/{unit}/{round_no}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def oracle_failures(exc: BaseException, flaky: bool = False) -> Iterator[tuple[OracleFailure, bool]]:
    if isinstance(exc, OracleFailure):
        yield exc, flaky
    elif isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from oracle_failures(inner, flaky or isinstance(exc, Flaky))


@contextmanager
def quiet_hypothesis() -> Iterator[None]:
    logger = logging.getLogger("hypothesis")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # the strategy of a large request schema has a large repr, which Hypothesis builds for
            # its statistics when a filter retries, and warns about: noise on the CLI's stderr
            warnings.filterwarnings("ignore", "Generating overly large repr", HypothesisWarning)
            yield
    finally:
        logger.setLevel(level)


@dataclass(slots=True)
class Unit:
    """One unit of work and its state across rounds."""

    tag: str
    phase: str
    tool: str | None
    strategy: st.SearchStrategy[list[Step]] | None
    stats: UnitStats
    #: the examples it should have in the end (the stateful machine: rule sequences)
    limit: int
    done: bool = False
    #: the stateful machine's counts, kept across rounds
    counts: Any = None
    #: digests of the examples run, across rounds
    seen: set[bytes] = field(default_factory=set)


@dataclass(slots=True)
class FuzzRun:
    """One fuzzing run's shared state."""

    config: Config
    target: Target
    profile: Profile
    report: Report
    #: one shared session for all units (a fresh one after any trouble; see Sessions)
    sessions: Sessions
    clock: Clock
    clusters: Clusters = field(default_factory=Clusters)

    def say(self, message: str) -> None:
        if self.config.progress is not None:
            left = self.clock.left()
            status = f"{self.report.examples} examples, {len(self.report.findings)} findings" + (
                "" if left is None else f", {left:.0f}s left"
            )
            self.config.progress(f"{message}  [{status}]")

    def found(self, tag: str, finding: Finding) -> None:
        finding.found_at = self.clock.elapsed()
        self.report.findings.append(finding)
        self.say(f"{tag}: FOUND [{finding.violation.oracle}] {finding.violation.message[:200]}")
