"""The fuzzing run: learn the server, then fuzz each tool and the protocol, and keep minimal findings.

Theory of operation: :func:`learn` starts the server once, detects its era (a 2026-07-28
``server/discover`` probe, else the legacy ``initialize`` handshake, restarting the process if
the probe killed it) and reads its catalogue into a :class:`~fuzz.exchange.Profile`. Then each
phase is one Hypothesis test built at run time: the example is a list of steps (a
``tools/call`` with generated arguments, or a few protocol messages), always followed by a
liveness probe; it runs on a fresh process per example (``isolation="process"``, the default:
a crash or a hang cannot poison the next example and every example replays on its own) or on a
shared session that is replaced once it misbehaves (``isolation="session"``). An oracle
violation raises the oracle's own exception class; Hypothesis shrinks each distinct failure to
its minimal example and replays it last, so the exception that comes out carries the minimal
exchange, which becomes a :class:`Finding`.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky

from .exchange import MODERN_REVISION, Observation, Profile, Step, execute, prologue, request
from .messages import protocol_steps
from .oracles import ORACLES, OracleFailure, Violation, check, failure_class
from .schemas import arguments
from .wire import Entry, StdioPeer, decode_line

__all__ = ["Config", "Finding", "Report", "fuzz", "learn", "run_steps"]

log = logging.getLogger("mcpwire.fuzz.runner")

PROBE_ID = "mcpwire-fuzz-probe"
LEGACY_REVISIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


@dataclass(slots=True)
class Config:
    """Everything a run needs; the CLI fills it from its options."""

    argv: list[str]
    max_examples: int = 100
    time_budget: float | None = None
    deadline: float = 5.0
    settle: float = 0.0
    connect_timeout: float = 20.0
    seed: int | None = None
    database: Path | None = None
    era: str = "auto"
    isolation: str = "process"
    deny: Sequence[str] = ()
    allow: Sequence[str] | None = None
    phases: Sequence[str] = ("tools", "protocol", "stateful", "lists")
    #: rule sequences of the stateful machine, and rules per sequence
    machine_runs: int = 10
    machine_steps: int = 12
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    progress: Callable[[str], None] | None = None


@dataclass(slots=True)
class Finding:
    """One minimal failing example and what it broke."""

    violation: Violation
    phase: str
    tool: str | None
    observation: Observation
    entries: list[Entry]
    flaky: bool = False

    def to_json(self) -> dict[str, Any]:
        out = self.violation.to_json()
        out.update({"phase": self.phase, "tool": self.tool, "flaky": self.flaky})
        out["input"] = [s.line.decode("utf-8", "replace") for s in self.observation.steps if not s.setup]
        return out


@dataclass(slots=True)
class Report:
    profile: Profile | None
    findings: list[Finding] = field(default_factory=list)
    examples: int = 0
    skipped_tools: list[str] = field(default_factory=list)
    duration: float = 0.0
    error: str | None = None

    @property
    def failed(self) -> bool:
        return any(f.violation.info.severity == "error" for f in self.findings) or self.error is not None


# -- learning the server --------------------------------------------------------------------------


def _request_answer(peer: StdioPeer, step: Step, timeout: float) -> dict[str, Any] | None:
    if not peer.send(step.line, timeout=timeout):
        return None
    until = time.monotonic() + timeout
    while (remaining := until - time.monotonic()) > 0:
        line = peer.receive(remaining)
        if line is None:
            return None
        message = decode_line(line)
        if isinstance(message, dict) and "method" not in message and message.get("id") == step.request_id:
            return message
        if isinstance(message, dict) and "method" in message and "id" in message:
            peer.send(b'{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}' % _id(message), timeout=1)
    return None


def _id(message: dict[str, Any]) -> bytes:
    import json

    return json.dumps(message.get("id")).encode()


def _pages(peer: StdioPeer, profile: Profile, method: str, key: str, timeout: float) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(100):
        params = {"cursor": cursor} if cursor is not None else None
        answer = _request_answer(peer, request(f"learn-{method}-{page}", method, profile.params(params)), timeout)
        result = answer.get("result") if answer else None
        if not isinstance(result, dict):
            break
        items.extend(i for i in result.get(key, []) if isinstance(i, dict))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or cursor in seen:
            break
        seen.add(cursor)
    return items


def _open(config: Config) -> StdioPeer:
    return StdioPeer(config.argv, env=config.env or None, cwd=config.cwd)


def learn(config: Config) -> Profile:
    """Detects the era and reads tools, prompts and resources (raises ``RuntimeError`` if it can't)."""
    argv = config.argv
    era = config.era
    with _open(config) as peer:
        modern_answer = None
        if era in ("auto", "modern"):
            probe_profile = Profile(argv, "modern", MODERN_REVISION)
            probe_timeout = config.connect_timeout if era == "modern" else min(config.connect_timeout, 5.0)
            modern_answer = _request_answer(peer, probe_profile.probe("learn-discover"), probe_timeout)
        result = modern_answer.get("result") if modern_answer else None
        if isinstance(result, dict) and MODERN_REVISION in (result.get("supportedVersions") or []):
            profile = Profile(argv, "modern", MODERN_REVISION, result.get("capabilities") or {})
            profile.server_info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
            return _catalogue(peer, profile, config)
        if era == "modern":
            raise RuntimeError("the server did not answer server/discover for 2026-07-28")
    with _open(config) as peer:  # a fresh process: the probe may have upset or killed the first one
        for revision in LEGACY_REVISIONS:
            profile = Profile(argv, "legacy", revision)
            init, done = prologue(profile)
            answer = _request_answer(peer, init, config.connect_timeout)
            result = answer.get("result") if answer else None
            if isinstance(result, dict):
                profile.revision = str(result.get("protocolVersion") or revision)
                profile.capabilities = result.get("capabilities") or {}
                profile.server_info = result.get("serverInfo") or {}
                peer.send(done.line, timeout=config.deadline)
                return _catalogue(peer, profile, config)
            if not peer.alive():
                break
        raise RuntimeError(
            f"the server answered neither server/discover nor initialize: {peer.trace.stderr_tail[-300:]}"
        )


def _catalogue(peer: StdioPeer, profile: Profile, config: Config) -> Profile:
    caps = profile.capabilities
    if "tools" in caps:
        profile.tools = _pages(peer, profile, "tools/list", "tools", config.connect_timeout)
    if "prompts" in caps:
        profile.prompts = _pages(peer, profile, "prompts/list", "prompts", config.connect_timeout)
    if "resources" in caps:
        profile.resources = _pages(peer, profile, "resources/list", "resources", config.connect_timeout)
    return profile


# -- running examples -----------------------------------------------------------------------------


def run_steps(config: Config, profile: Profile, steps: Sequence[Step]) -> tuple[Observation, list[Entry]]:
    """Runs a whole example (prologue included) on a fresh process; returns what happened."""
    with _open(config) as peer:
        obs = execute(
            peer, [*prologue(profile), *steps], deadline=config.deadline, settle=config.settle, barrier=profile.probe
        )
    obs.stderr_tail = peer.trace.stderr_tail
    return obs, peer.trace.entries


class _Sessions:
    """Isolation: a fresh process per example, or one shared session replaced after trouble."""

    def __init__(self, config: Config, profile: Profile) -> None:
        self.config = config
        self.profile = profile
        self.peer: StdioPeer | None = None

    def run(self, steps: Sequence[Step]) -> tuple[Observation, list[Entry]]:
        if self.config.isolation == "process":
            return run_steps(self.config, self.profile, steps)
        fresh = self.peer is None
        if self.peer is None:
            self.peer = _open(self.config)
        mark = len(self.peer.trace.entries)
        setup = prologue(self.profile) if fresh else []
        obs = execute(
            self.peer,
            [*setup, *steps],
            deadline=self.config.deadline,
            settle=self.config.settle,
            barrier=self.profile.probe,
        )
        entries = list(self.peer.trace.entries[mark:])
        if not fresh:
            opening = prologue(self.profile)
            obs.steps = [*opening, *obs.steps]  # what a replay must send first
            entries = [*(Entry.of_bytes("send", 0.0, s.line) for s in opening), *entries]
            shift = len(obs.steps) - len(steps)
            obs.answers = {i + shift: a for i, a in obs.answers.items()}
            for a in [*obs.answers.values(), *obs.strays]:
                a.step += shift
            obs.timed_out = [i + shift for i in obs.timed_out]
            obs.died_after = None if obs.died_after is None else obs.died_after + shift
        if obs.died_after is not None or obs.timed_out or obs.write_failed is not None:
            self.close()
        return obs, entries

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()
            self.peer = None


def _database(config: Config) -> ExampleDatabase | None:
    if config.database is None:
        return None
    return DirectoryBasedExampleDatabase(str(config.database))


def _settings(config: Config) -> settings:
    return settings(
        max_examples=config.max_examples,
        deadline=None,
        database=_database(config),
        derandomize=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
        print_blob=False,
    )


def _collect(exc: BaseException, flaky: bool = False) -> Iterator[tuple[OracleFailure, bool]]:
    if isinstance(exc, OracleFailure):
        yield exc, flaky
    elif isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _collect(inner, flaky or isinstance(exc, Flaky))


@contextmanager
def _quiet_hypothesis() -> Iterator[None]:
    logger = logging.getLogger("hypothesis")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _phase(
    config: Config,
    profile: Profile,
    report: Report,
    name: str,
    tool: str | None,
    strategy: st.SearchStrategy[list[Step]],
    deadline_at: float | None,
) -> None:
    sessions = _Sessions(config, profile)
    state = {"examples": 0, "failing": False}
    tag = f"{name}:{tool}" if tool else name

    def example(steps: list[Step]) -> None:
        if deadline_at is not None and time.monotonic() > deadline_at and not state["failing"]:
            return  # out of time: the remaining examples pass at once (shrinking goes on)
        state["examples"] = int(state["examples"]) + 1
        obs, entries = sessions.run([*steps, profile.probe(PROBE_ID)])
        violations = check(obs, profile)
        if violations:
            state["failing"] = True
            first = violations[0]
            failure = failure_class(first.oracle)(first, obs)
            failure.entries = entries  # type: ignore[attr-defined]
            raise failure

    test = given(strategy)(example)
    if config.seed is not None:
        test = seed(config.seed)(test)
    test = _settings(config)(test)
    digest = hashlib.sha256(repr((config.argv, tag)).encode()).digest()
    test._hypothesis_internal_database_key = digest  # type: ignore[attr-defined]
    if config.progress:
        config.progress(f"{tag}: fuzzing ({config.max_examples} examples)")
    try:
        with _quiet_hypothesis():
            test()
    except (OracleFailure, BaseExceptionGroup) as exc:
        seen: set[tuple[str, str]] = set()
        for failure, flaky in _collect(exc):
            key = (failure.violation.oracle, failure.violation.message)
            if key in seen or failure.observation is None:
                continue
            seen.add(key)
            entries = getattr(failure, "entries", [])
            finding = Finding(failure.violation, name, tool, failure.observation, entries, flaky)
            report.findings.append(finding)
            if config.progress:
                config.progress(f"{tag}: FOUND [{failure.violation.oracle}] {failure.violation.message}")
        if not seen:
            raise
    finally:
        sessions.close()
        report.examples += int(state["examples"])


def _tool_steps(profile: Profile, tool: dict[str, Any]) -> st.SearchStrategy[list[Step]]:
    name = tool["name"]
    schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {"type": "object"}

    def build(case: tuple[bool, Any]) -> list[Step]:
        valid, args = case
        params = profile.params({"name": name, "arguments": args})
        return [request(1, "tools/call", params, tool=name, valid=valid)]

    return arguments(schema).map(build)


def _selected(config: Config, tools: list[dict[str, Any]], report: Report) -> list[dict[str, Any]]:
    chosen = []
    for tool in tools:
        name = str(tool.get("name"))
        if name in config.deny or (config.allow is not None and name not in config.allow):
            report.skipped_tools.append(name)
            continue
        chosen.append(tool)
    return chosen


def _check_lists(config: Config, profile: Profile, report: Report) -> None:
    """list-stable: a second process lists the same tools, and so does the same process after calls."""
    if "tools" not in profile.capabilities:
        return
    steps = [request(i + 1, "tools/list", profile.params(None)) for i in range(2)]
    obs, entries = run_steps(config, profile, steps)
    lists = []
    for index in sorted(obs.answers):
        message = obs.answers[index].message
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and obs.steps[index].method == "tools/list" and "nextCursor" not in result:
            lists.append(sorted(str(t.get("name")) for t in result.get("tools", []) if isinstance(t, dict)))
    first = sorted(str(t.get("name")) for t in profile.tools)
    for index, names in enumerate(lists):
        if names != first:
            violation = Violation(
                "list-stable", f"tools/list #{index + 1} of a new process differs: {names} vs {first}", None
            )
            report.findings.append(Finding(violation, "lists", None, obs, entries))
            return


def _stateful(config: Config, profile: Profile, report: Report) -> None:
    from .stateful import machine_for, run_machine

    tools = _selected(config, profile.tools, Report(profile))
    machine = machine_for(
        config.argv, profile, deadline=config.deadline, env=config.env or None, cwd=config.cwd, tools=tools
    )
    if config.progress:
        config.progress(f"stateful: {config.machine_runs} rule sequences of up to {config.machine_steps} rules")
    try:
        with _quiet_hypothesis():
            run_machine(
                machine,
                max_examples=config.machine_runs,
                steps=config.machine_steps,
                seed=config.seed,
                database=_database(config),
            )
    except (OracleFailure, BaseExceptionGroup) as exc:
        found = list(_collect(exc))
        if not found:
            raise
        for failure, flaky in found:
            assert failure.observation is not None
            entries = getattr(failure, "entries", [])
            report.findings.append(Finding(failure.violation, "stateful", None, failure.observation, entries, flaky))
            if config.progress:
                config.progress(f"stateful: FOUND [{failure.violation.oracle}] {failure.violation.message}")
    finally:
        report.examples += config.machine_runs


def fuzz(config: Config) -> Report:
    """Runs every phase within the budgets; never raises for what the server does."""
    start = time.monotonic()
    deadline_at = start + config.time_budget if config.time_budget else None
    try:
        profile = learn(config)
    except (RuntimeError, OSError) as exc:
        return Report(None, error=str(exc), duration=time.monotonic() - start)
    report = Report(profile)
    if config.progress:
        config.progress(
            f"server {profile.server_info.get('name', '?')}: {profile.era} {profile.revision}, "
            f"{len(profile.tools)} tools"
        )
    if "tools" in config.phases:
        for tool in _selected(config, profile.tools, report):
            if deadline_at is not None and time.monotonic() > deadline_at:
                break
            _phase(config, profile, report, "tools", str(tool["name"]), _tool_steps(profile, tool), deadline_at)
    if "protocol" in config.phases:
        for kind in ("notifications", "malformed", "requests"):
            if deadline_at is not None and time.monotonic() > deadline_at:
                break
            _phase(config, profile, report, f"protocol-{kind}", None, protocol_steps(profile, kind), deadline_at)
    if "stateful" in config.phases and (deadline_at is None or time.monotonic() < deadline_at):
        _stateful(config, profile, report)
    if "lists" in config.phases:
        _check_lists(config, profile, report)
    report.duration = time.monotonic() - start
    assert all(f.violation.oracle in ORACLES for f in report.findings)
    return report
