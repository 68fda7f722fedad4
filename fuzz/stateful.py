"""A rule-based state machine over a live server: list, call, read, get prompt, cancel, re-list, subscribe.

Theory of operation: each run of the machine opens a fresh session on the target (a fresh
process for stdio), opens the era's session (the legacy handshake, or nothing in 2026-07-28
where every request carries ``_meta``), and lets Hypothesis pick rules in any order. Every rule
is a few steps run through :func:`~fuzz.exchange.execute` (with the era's barrier) and judged by
the same oracles as the other phases, plus ``list-stable``: a re-list of tools, prompts or
resources must give the items the first lists gave (SV-34). Cancellation is exercised both
ways: a request that was already answered (UT-C07: ignored) and one still in flight (its answer
becomes optional, UT-C04; over 2026-07-28 HTTP the cancellation is closing its stream, HT-M10).
Subscriptions are ``resources/subscribe`` + ``unsubscribe`` (legacy) or a
``subscriptions/listen`` that must be acknowledged first (SV-37) and is then cancelled
(2026-07-28). A violation raises its oracle's exception carrying *every* step of the session so
far, so the finding replays from a fresh session; Hypothesis shrinks the rule sequence. A
violation of a root cause already reported (:class:`~fuzz.clusters.Clusters`) ends the sequence
quietly instead (Hypothesis rejects it), so the search goes on for other causes. A
:class:`MachineStats` counts the sequences started and the rules that ran (a rule that had
nothing to do, or came after the time share was used up, is not counted).

Values flow between calls, as in a real session: every string and integer a result carries
(``structuredContent``, JSON in text content, resource URIs) goes into a pool, and a later
``call_tool`` may put one of them into an argument of the same type (when the arguments still
validate), so an id returned by one tool reaches the tool that takes it.

Time (:class:`Limits`): past its share a sequence's rules do nothing, unless a failure is being
shrunk; shrinking stops after ``shrink_time``; nothing runs past the run's end (``until``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from .clusters import Clusters, cause_unit, features
from .exchange import IN_JSON, Observation, Profile, Step, execute, notification, pace, prologue, request
from .oracles import OracleFailure, Violation, check, failure_class, list_stability
from .schemas import SchemaError, is_valid, valid_arguments, validator_for
from .wire import Peer, Target

__all__ = ["Limits", "MachineSetup", "MachineStats", "ServerMachine", "machine_for", "pool_values", "run_machine"]

log = logging.getLogger("mcpwire.fuzz.stateful")

LISTEN_ACK = "notifications/subscriptions/acknowledged"


@dataclass(slots=True)
class MachineStats:
    """What the machine did: rule sequences started, rules run (by name), and the number of the
    sequence that first broke an oracle (1: the very first, e.g. one from the example database)."""

    runs: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    first_failure: int | None = None
    #: sequences that ended on a root cause already reported
    known: int = 0
    #: tool calls that got a value from an earlier result
    fed: int = 0
    #: the shortest failing sequence seen, in case the time stops its shrinking
    smallest: tuple[Violation, Observation, list[Any]] | None = None
    #: the machine stopped doing anything (time): see :meth:`ServerMachine.over`
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class Limits:
    """When the machine stops: its share (``share_end``), the run's end (``until``), and how long
    one failure may be shrunk; ``time.monotonic()`` moments, ``None`` for no limit."""

    share_end: float | None = None
    until: float | None = None
    shrink_time: float = 30.0
    #: the sequences run before this round: the round's first one ignores ``share_end``
    first_run: int = 0


#: at most this many values are kept from results (the oldest go)
POOL_SIZE = 64


def pool_values(result: Any) -> list[tuple[str | int, tuple[str | int, ...]]]:
    """The strings and integers of a result worth passing to another tool, each with its path in
    the result (:func:`~fuzz.exchange.resolve`): the leaves of ``structuredContent``, of JSON text
    content, and resource URIs (short strings only)."""
    found: list[tuple[str | int, tuple[str | int, ...]]] = []

    def walk(value: Any, path: tuple[str | int, ...]) -> None:
        if len(path) > 8 or len(found) >= POOL_SIZE or isinstance(value, bool):
            return
        if isinstance(value, int) or (isinstance(value, str) and 0 < len(value) <= 200):
            found.append((value, path))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, str(key)))
        elif isinstance(value, list):
            for index, item in enumerate(value[:16]):
                walk(item, (*path, index))

    if not isinstance(result, dict):
        return found
    walk(result.get("structuredContent"), ("structuredContent",))
    for index, block in enumerate(result.get("content") or []):
        if not isinstance(block, dict):
            continue
        text = block.get("text")
        if isinstance(text, str) and text[:1] in "{[":
            try:
                walk(json.loads(text), ("content", index, "text", IN_JSON))
            except (ValueError, RecursionError):
                pass
        if isinstance(block.get("uri"), str):
            found.append((block["uri"], ("content", index, "uri")))
        resource = block.get("resource")
        if isinstance(resource, dict) and isinstance(resource.get("uri"), str):
            found.append((resource["uri"], ("content", index, "resource", "uri")))
    return found


@dataclass(slots=True)
class MachineSetup:
    """What one run's machine works with: the server, its tools (argument strategies and schemas),
    prompts and resources, the time limits, and the counts and causes it shares with the run."""

    target: Target
    profile: Profile
    deadline: float
    bounds: Limits
    startup: float | None
    counts: MachineStats
    clusters: Clusters | None
    strategies: dict[str, st.SearchStrategy[Any]]
    schemas: dict[str, dict[str, Any]]
    prompts: list[dict[str, Any]]
    uris: list[str]
    can_subscribe: bool
    #: when the first failure of this round was seen (shrinking started), or None
    failing: float | None = None

    @property
    def legacy(self) -> bool:
        return self.profile.era == "legacy"


class ServerMachine(RuleBasedStateMachine):
    """The rules over one server; :func:`machine_for` makes a subclass of it bound to one run's
    :class:`MachineSetup` (Hypothesis instantiates the class it is given once per sequence)."""

    setup: ClassVar[MachineSetup]

    def __init__(self) -> None:
        super().__init__()
        self.peer: Peer | None = None
        self.steps: list[Step] = []
        self.next_id = 1
        self.answered: list[int | str] = []
        #: values from earlier results (see pool_values) with where they came from (the answered
        #: request's id, the path), and list_changed notifications seen
        self.pool: list[tuple[str | int, int | str, tuple[str | int, ...]]] = []
        self.notified: set[str] = set()
        if self.over():  # a sequence that would do nothing: no process for it
            return
        setup = self.setup
        setup.counts.runs += 1
        self.peer = setup.target.open()
        self.run(prologue(setup.profile, setup.startup))

    # -- plumbing -------------------------------------------------------------------------

    def over(self) -> bool:
        """Whether the machine must stop doing anything: the run's end, shrinking for too long,
        or past its share (after the round's first sequence). It never raises: a sequence cut
        short would draw less than the same sequence before, which Hypothesis cannot replay;
        the rules do nothing instead, and the shortest failure so far is kept (``smallest``)."""
        setup = self.setup
        counts, bounds = setup.counts, setup.bounds
        if not counts.stopped:
            now = time.monotonic()
            if bounds.until is not None and now > bounds.until:
                counts.stopped = True
            elif setup.failing is not None:
                counts.stopped = now > setup.failing + bounds.shrink_time
            elif bounds.share_end is not None and now > bounds.share_end:
                counts.stopped = counts.runs > bounds.first_run  # the round's first always runs
        return counts.stopped

    def go(self, rule_name: str) -> bool:
        """Whether the rule should run now (not past the time share); counts it when so."""
        if self.peer is None or self.over():
            return False
        self.setup.counts.rules[rule_name] += 1
        return True

    def run(self, steps: list[Step]) -> Observation:
        assert self.peer is not None
        setup = self.setup
        profile = setup.profile
        self.steps.extend(steps)
        obs = execute(
            self.peer,
            steps,
            deadline=setup.deadline,
            barrier=profile.probe,
            until=setup.bounds.until,
        )
        if obs.cut:
            setup.counts.stopped = True  # the run's end came during it: it proves nothing
            return obs
        self.notified |= {str(n.get("method")) for n in obs.notifications if isinstance(n, dict)}
        violations = check(obs, profile) or list_stability(obs, profile, self.notified)
        self.answered.extend(s.request_id for i, s in enumerate(steps) if i in obs.answers and s.request_id)
        for index, answer in obs.answers.items():
            source = steps[index].request_id
            if isinstance(answer.message, dict) and source is not None:
                found = [(v, source, path) for v, path in pool_values(answer.message.get("result"))]
                self.pool = (self.pool + found)[-POOL_SIZE:]
        if violations:
            self.fail(violations[0], obs)
        return obs

    def fail(self, violation: Violation, obs: Observation) -> None:
        assert self.peer is not None
        setup = self.setup
        counts = setup.counts
        # the observation is of the last steps run; the failure is of the whole sequence
        offset = len(self.steps) - len(obs.steps)
        if violation.step is not None:
            violation = dataclasses.replace(violation, step=violation.step + offset)
        step = self.steps[violation.step] if violation.step is not None else None
        unit = cause_unit(
            violation.oracle, "stateful", None if step is None else step.tool, None if step is None else step.method
        )
        clusters = setup.clusters
        shape = features(self.steps, violation.step)
        known = None if clusters is None else clusters.match(violation.oracle, shape, unit)
        if known is not None:
            known.members["stateful"] += 1
            counts.known += 1
            self.peer.close()
            # a cause already reported: this sequence says nothing new, and ends here as a pass. Not
            # a reject(): whether a cause is known changes during the run, and a sequence Hypothesis
            # replays would then stop drawing at another rule (FlakyStrategyDefinition)
            self.peer = None
            return
        if setup.failing is None:
            setup.failing = time.monotonic()
        if counts.first_failure is None:
            counts.first_failure = counts.runs
        whole = Observation(list(self.steps))
        whole.died_after = None if obs.died_after is None else obs.died_after + offset
        whole.exit_status = obs.exit_status
        self.peer.close()
        whole.stderr_tail = self.peer.trace.stderr_tail
        failure: OracleFailure = failure_class(violation.oracle)(violation, whole)
        failure.entries = list(self.peer.trace.entries)  # type: ignore[attr-defined]
        if counts.smallest is None or len(whole.steps) < len(counts.smallest[1].steps):
            counts.smallest = (violation, whole, failure.entries)  # type: ignore[attr-defined]
        raise failure

    def rid(self) -> int:
        self.next_id += 1
        return self.next_id

    def call(
        self, method: str, params: dict[str, Any] | None, fed: tuple[Any, ...] = (), **kw: Any
    ) -> dict[str, Any] | None:
        setup = self.setup
        rid = self.rid()
        tool = kw.get("tool")
        if tool is not None and params is not None:  # a tool call: paced as the tools phase does
            params = {**params, "_meta": {"progressToken": f"mcpwire-fuzz-{rid}"}}
        step = request(rid, method, setup.profile.params(params), **kw)
        if tool is not None and params is not None:
            pace(step, f"mcpwire-fuzz-{rid}", setup.schemas.get(tool), params.get("arguments"), setup.deadline)
        step.fed = fed
        obs = self.run([step])
        answer = obs.answers.get(0)
        result = answer.message.get("result") if answer else None
        return result if isinstance(result, dict) else None

    def teardown(self) -> None:
        if self.peer is not None:
            self.peer.close()

    def feed(self, data: st.DataObject, name: str, args: Any) -> tuple[Any, tuple[Any, ...]]:
        """Maybe puts a value from an earlier result into one argument of the same type; also
        says where it came from (:attr:`~fuzz.exchange.Step.fed`: a replay takes the value of
        its own session). The draws are the same whatever the pool holds (Hypothesis replays
        choices, not values)."""
        wanted = data.draw(st.booleans(), label="feed")
        slot_pick = data.draw(st.integers(0, 15), label="fed argument")
        value_pick = data.draw(st.integers(0, POOL_SIZE - 1), label="fed value")
        if not wanted or not self.pool or not isinstance(args, dict):
            return args, ()
        schema = self.setup.schemas[name]
        props = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
        slots = [
            (key, kind)
            for key, sub in sorted(props.items())
            if isinstance(sub, dict) and (kind := sub.get("type")) in ("string", "integer")
        ]
        if not slots:
            return args, ()
        key, kind = slots[slot_pick % len(slots)]
        wanted_type = str if kind == "string" else int
        fitting = [e for e in self.pool if isinstance(e[0], wanted_type) and not isinstance(e[0], bool)]
        if not fitting:
            return args, ()
        value, source, path = fitting[value_pick % len(fitting)]
        fed = {**args, key: value}
        if not is_valid(validator_for(schema), fed):
            return args, ()
        self.setup.counts.fed += 1
        return fed, ((key, source, path),)

    # -- rules ----------------------------------------------------------------------------

    @rule()
    def list_tools(self) -> None:
        if self.go("list_tools"):
            self.call("tools/list", None)  # run() compares it with the first list

    @precondition(lambda self: bool(self.setup.strategies))
    @rule(data=st.data())
    def call_tool(self, data: st.DataObject) -> None:
        strategies = self.setup.strategies
        name = data.draw(st.sampled_from(sorted(strategies)), label="tool")
        args, fed = self.feed(data, name, data.draw(strategies[name], label="arguments"))
        if self.go("call_tool"):
            self.call("tools/call", {"name": name, "arguments": args}, tool=name, valid=True, fed=fed)

    @precondition(lambda self: bool(self.setup.prompts))
    @rule(data=st.data())
    def get_prompt(self, data: st.DataObject) -> None:
        prompt = data.draw(st.sampled_from(self.setup.prompts), label="prompt")
        args = {
            str(a["name"]): data.draw(st.text(max_size=8), label=str(a["name"]))
            for a in prompt.get("arguments") or []
            if isinstance(a, dict) and "name" in a
        }
        if self.go("get_prompt"):
            self.call("prompts/get", {"name": prompt["name"], "arguments": args})

    @precondition(lambda self: bool(self.setup.uris))
    @rule(data=st.data())
    def read_resource(self, data: st.DataObject) -> None:
        uri = data.draw(st.sampled_from(self.setup.uris), label="uri")
        if self.go("read_resource"):
            self.call("resources/read", {"uri": uri})

    @precondition(lambda self: "prompts" in self.setup.profile.capabilities)
    @rule()
    def list_prompts(self) -> None:
        if self.go("list_prompts"):
            self.call("prompts/list", None)

    @precondition(lambda self: "resources" in self.setup.profile.capabilities)
    @rule()
    def list_resources(self) -> None:
        if self.go("list_resources"):
            self.call("resources/list", None)

    @rule(data=st.data())
    def cancel_answered(self, data: st.DataObject) -> None:
        """Cancels a request that was already answered (or never sent): never answered back (UT-C07)."""
        # an index, not a value: what the server answered must not change what Hypothesis draws
        pick = data.draw(st.integers(0, 63), label="answered request")
        target_id = self.answered[pick % len(self.answered)] if self.answered else 999_999
        profile = self.setup.profile
        if profile.era == "modern" and profile.transport != "stdio":
            return  # 2026-07-28 HTTP has no client notifications (HT-M02)
        if self.go("cancel_answered"):
            self.run([notification("notifications/cancelled", {"requestId": target_id})])

    @rule(data=st.data())
    def cancel_in_flight(self, data: st.DataObject) -> None:
        """A request cancelled right after it was sent: answered or not (UT-C04), never a crash."""
        setup = self.setup
        rid = self.rid()
        if setup.strategies:
            name = data.draw(st.sampled_from(sorted(setup.strategies)), label="tool")
            args = data.draw(setup.strategies[name], label="arguments")
            token = f"mcpwire-fuzz-{rid}"
            params = {"name": name, "arguments": args, "_meta": {"progressToken": token}}
            call = request(rid, "tools/call", setup.profile.params(params), tool=name)
            pace(call, token, setup.schemas.get(name), args, setup.deadline)  # a server may finish it anyway
        else:
            call = request(rid, "tools/list", setup.profile.params(None))
        if not self.go("cancel_in_flight"):
            return
        call.answer = "optional"
        cancel = notification("notifications/cancelled", {"requestId": rid, "reason": "fuzz"}, cancels=rid)
        self.run([call, cancel])

    @precondition(lambda self: self.setup.can_subscribe and bool(self.setup.uris))
    @rule(data=st.data())
    def subscribe(self, data: st.DataObject) -> None:
        uri = data.draw(st.sampled_from(self.setup.uris), label="uri")
        if self.go("subscribe"):
            self.call("resources/subscribe", {"uri": uri})
            self.call("resources/unsubscribe", {"uri": uri})

    @precondition(lambda self: not self.setup.legacy)
    @rule(data=st.data())
    def listen(self, data: st.DataObject) -> None:
        """2026-07-28: a subscriptions/listen stream, acknowledged first (SV-37), then cancelled."""
        uris = self.setup.uris
        wanted: dict[str, Any] = {"toolsListChanged": data.draw(st.booleans(), label="toolsListChanged")}
        if uris:
            wanted["resourceSubscriptions"] = [data.draw(st.sampled_from(uris), label="uri")]
        if not self.go("listen"):
            return
        rid = self.rid()
        listen = request(rid, "subscriptions/listen", self.setup.profile.params({"notifications": wanted}))
        listen.answer, listen.expect = "optional", LISTEN_ACK
        cancel = notification("notifications/cancelled", {"requestId": rid}, cancels=rid)
        self.run([listen, cancel])


def machine_for(
    target: Target,
    profile: Profile,
    *,
    deadline: float,
    tools: list[dict[str, Any]] | None = None,
    limits: Limits | None = None,
    startup: float | None = None,
    stats: MachineStats | None = None,
    clusters: Clusters | None = None,
) -> type[ServerMachine]:
    """The machine class for one server (``tools``: the ones it may call; ``limits``: see
    :class:`Limits`; ``stats``: counted into as the machine runs; ``clusters``: the causes already
    reported, whose violations end a sequence quietly): a subclass of :class:`ServerMachine`
    bound to a :class:`MachineSetup` of its own."""
    callable_tools = [t for t in (profile.tools if tools is None else tools) if isinstance(t.get("inputSchema"), dict)]
    strategies: dict[str, st.SearchStrategy[Any]] = {}
    schemas: dict[str, dict[str, Any]] = {}
    for tool in callable_tools:
        try:
            strategies[tool["name"]] = valid_arguments(tool["inputSchema"])
            schemas[tool["name"]] = tool["inputSchema"]
        except SchemaError:
            continue
    legacy = profile.era == "legacy"
    setup = MachineSetup(
        target=target,
        profile=profile,
        deadline=deadline,
        bounds=limits or Limits(),
        startup=startup,
        counts=stats if stats is not None else MachineStats(),
        clusters=clusters,
        strategies=strategies,
        schemas=schemas,
        prompts=[p for p in profile.prompts if isinstance(p.get("name"), str)],
        uris=[r["uri"] for r in profile.resources if isinstance(r.get("uri"), str)],
        can_subscribe=legacy and bool((profile.capabilities.get("resources") or {}).get("subscribe")),
    )
    # a class per run: Hypothesis keeps the seed and the database digest on the class it is given
    return type("ServerMachine", (ServerMachine,), {"setup": setup, "__module__": __name__})


def run_machine(
    machine: type[RuleBasedStateMachine],
    *,
    max_examples: int,
    steps: int,
    seed: int | None,
    database: Any = None,
    database_key: bytes | None = None,
    reuse: bool = True,
) -> None:
    """Runs the machine (raises the shrunk :class:`OracleFailure` when a rule breaks an oracle);
    ``reuse``: replay the sequences the database kept first (the first round only).

    ``database_key`` keeps the machine's sequences apart in the example database: Hypothesis keys
    a machine by its class's source, which is the same for every server."""
    config = settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        database=database,
        derandomize=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink] if reuse else [Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        verbosity=Verbosity.quiet,
    )
    if seed is not None:
        machine._hypothesis_internal_use_seed = seed
    if database_key is not None:
        # Hypothesis adds this to the machine's digest, which names its examples in the database
        machine._hypothesis_internal_add_digest = database_key
    run_state_machine_as_test(machine, settings=config)
