"""Steps and observations: what the fuzzer writes to a server and what it saw come back.

Theory of operation: one fuzz example is a list of :class:`Step` (a line to write and what it
is: a request with its id, a notification, or a malformed line). :func:`execute` writes them in
order on a :class:`~fuzz.wire.Peer` (stdio or HTTP), waits after each request for the answer with that id
(value *and* JSON type, JR-05) up to a deadline, and after anything else for a short quiet
period, so the answer to a notification or to a malformed line is attributed to the step that
provoked it. Server requests are answered the way a client without capabilities would (``ping``
with ``{}``, anything else with -32601), so a legacy server is never left waiting.
The result is an :class:`Observation`; :mod:`fuzz.oracles` judges it. The same functions run
the live fuzzer and ``--replay``, so a trace replays exactly what the fuzzer did.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import re
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .wire import Peer, decode_line

__all__ = [
    "CLIENT_INFO",
    "MODERN_REVISION",
    "Answer",
    "Deep",
    "Observation",
    "Profile",
    "Step",
    "declared_seconds",
    "dumps",
    "execute",
    "notification",
    "pace",
    "prologue",
    "request",
    "same_id",
]

log = logging.getLogger("mcpwire.fuzz.exchange")

MODERN_REVISION = "2026-07-28"
CLIENT_INFO = {"name": "mcpwire-fuzz", "version": "0.1.0"}
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
#: How long to wait for stray lines after a step that expects no answer.
SETTLE_S = 0.0

StepKind = Literal["request", "notification", "malformed"]
#: whether a request must be answered: "required", or "optional" (a cancelled request, a lenient
#: reading of odd framing, a long-lived subscriptions/listen)
AnswerRule = Literal["required", "optional"]
#: pause between the pieces of a request written in several writes (broken-up framing)
SPLIT_PAUSE_S = 0.005
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Deep:
    """``[[[...0...]]]`` nested ``depth`` times, written without recursing (json.dumps would)."""

    depth: int

    @property
    def placeholder(self) -> str:
        return f"@@mcpwire-fuzz-deep-{self.depth}@@"


def dumps(value: Any) -> bytes:
    """Compact JSON, as a server expects one message per line (ST-03: no raw newlines), in UTF-8
    (lone surrogates as ``\\uXXXX`` escapes)."""
    deep: list[Deep] = []

    def default(obj: object) -> object:
        if isinstance(obj, Deep):
            deep.append(obj)
            return obj.placeholder
        raise TypeError(f"cannot encode {type(obj).__name__}")

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=default)
    for d in deep:
        text = text.replace(f'"{d.placeholder}"', "[" * d.depth + "0" + "]" * d.depth, 1)
    # a lone surrogate has no UTF-8 form, but a JSON string may hold it as an escape (RFC 8259 §7)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


@dataclass(slots=True)
class SessionMemory:
    """What one session remembers across executions: the requests the fuzzer cancelled, and the
    ids that lines other than requests carried (see :func:`session_memory`)."""

    cancelled: set[str] = field(default_factory=set)
    own_ids: set[str] = field(default_factory=set)


_MEMORY: Final[weakref.WeakKeyDictionary[Any, SessionMemory]] = weakref.WeakKeyDictionary()


def session_memory(peer: Peer) -> SessionMemory:
    """The memory of ``peer``'s session: an answer can come in a later execution on the same
    session than the line it answers (a cancelled call finishing, a late error)."""
    try:
        return _MEMORY.setdefault(peer, SessionMemory())
    except TypeError:  # a peer that cannot be weakly referenced: no memory across executions
        return SessionMemory()


def _line_id(line: bytes) -> str | None:
    """The JSON of the id a line carries, if it is an object with an integer or string id."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if isinstance(message, dict) and type(message.get("id")) in (int, str):
        return _json_id(message["id"])
    return None


#: the id of the request every example ends with, to see that the server still answers
PROBE_ID: Final = "mcpwire-fuzz-probe"


def _json_id(rid: object) -> str:
    """An id as a set key that keeps its JSON type (1 and "1" differ, JR-05)."""
    return json.dumps(rid, sort_keys=True)


def same_id(a: object, b: object) -> bool:
    """JR-05: an id matches only with the same value and the same JSON type."""
    return type(a) is type(b) and a == b


@dataclass(slots=True)
class Step:
    """One line written to the server, and what the oracles should expect of it."""

    line: bytes
    kind: StepKind
    request_id: int | str | None = None
    method: str | None = None
    tool: str | None = None
    #: for ``tools/call``: whether the arguments validate against the tool's inputSchema
    valid: bool | None = None
    #: part of the session's opening (initialize), not of the example itself
    setup: bool = False
    #: for a request: must it be answered (see :data:`AnswerRule`)
    answer: AnswerRule = "required"
    #: written as is (no newline added), cut at these offsets into separate writes (framing cases)
    raw: bool = False
    split: tuple[int, ...] = ()
    #: for ``notifications/cancelled``: the id it cancels (send that request with ``answer="optional"``,
    #: UT-C04: a cancelled request SHOULD NOT be answered; on 2026-07-28 HTTP the cancellation is
    #: closing the request's stream instead, HT-M10)
    cancels: int | str | None = None
    #: a notification method the server must send in reply (subscriptions/listen's acknowledgment)
    expect: str | None = None
    #: this request's own deadline (the session's first request also waits for the server to start; a
    #: tool call that asks for a duration waits that much longer)
    deadline: float | None = None
    #: the ``_meta.progressToken`` of a request: its progress notifications extend its deadline
    progress: str | None = None
    #: tool arguments taken from earlier answers, as (argument, the answered request's id, path in
    #: its result; see :func:`resolve`): filled in with the value of *this* session when sent
    fed: tuple[tuple[str, int | str, tuple[str | int, ...]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("request_id", "method", "tool", "valid", "cancels", "expect", "deadline", "progress"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.fed:
            out["fed"] = [[arg, source, list(path)] for arg, source, path in self.fed]
        if self.setup:
            out["setup"] = True
        if self.answer != "required" and self.kind == "request":
            out["answer"] = self.answer
        if self.raw:
            out["raw"] = True
        if self.split:
            out["split"] = list(self.split)
        return out

    @classmethod
    def from_json(cls, line: bytes, record: dict[str, Any]) -> Step:
        cancels = record.get("cancels")
        return cls(
            line,
            record["kind"],
            record.get("request_id"),
            record.get("method"),
            record.get("tool"),
            record.get("valid"),
            bool(record.get("setup", False)),
            record.get("answer", "required"),
            bool(record.get("raw", False)),
            tuple(int(i) for i in record.get("split", ())),
            cancels if isinstance(cancels, int | str) else None,
            record.get("expect"),
            float(record["deadline"]) if isinstance(record.get("deadline"), int | float) else None,
            record.get("progress") if isinstance(record.get("progress"), str) else None,
            tuple(
                (str(arg), source, tuple(path))
                for arg, source, path in record.get("fed") or []
                if isinstance(source, int | str) and isinstance(path, list)
            ),
        )

    def chunks(self) -> list[bytes]:
        """The pieces to write: the line cut at ``split`` (a raw step carries its own terminator)."""
        data = self.line if self.raw else self.line + b"\n"
        cuts = [0, *sorted(i for i in self.split if 0 < i < len(data)), len(data)]
        return [data[a:b] for a, b in itertools.pairwise(cuts) if b > a]


#: in a :attr:`Step.fed` path: the string here is JSON; go on inside it
IN_JSON = "<json>"


def resolve(result: Any, path: Sequence[str | int]) -> Any:
    """The value at ``path`` in a result (keys, list indexes, and :data:`IN_JSON` to read a JSON
    string), or ``None`` when the path does not lead anywhere."""
    value = result
    for part in path:
        if part == IN_JSON:
            try:
                value = json.loads(value) if isinstance(value, str) else None
            except (ValueError, RecursionError):
                return None
        elif isinstance(value, dict) and isinstance(part, str):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return None
    return value


def request(
    rid: int | str, method: str, params: dict[str, Any] | None, *, tool: str | None = None, valid: bool | None = None
) -> Step:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return Step(dumps(message), "request", rid, method, tool, valid)


#: a tool call that asks for a duration longer than this is not waited for (its answer is optional)
DECLARED_CAP_S = 60.0
#: argument names that ask a tool to take its time (seconds, or milliseconds with "ms"/"milli")
_DURATION_WORDS = ("duration", "delay", "sleep", "wait", "timeout", "seconds", "secs", "interval")


def declared_seconds(schema: Any, args: Any) -> float:
    """How long a call asks the tool to take: the numbers of arguments named like a duration
    (``duration``, ``delay``, ``timeout_ms``...), in seconds (milliseconds when the name or the
    property's description says so); an argument left out counts with its schema's default."""
    if args is None:
        args = {}  # "arguments": null: every default applies
    if not isinstance(args, dict):
        return 0.0
    props = schema.get("properties") if isinstance(schema, dict) else None
    total = 0.0
    # an argument left out takes its default (server-everything's slow tool sleeps 10 s by default)
    defaults = {
        name: sub["default"]
        for name, sub in (props.items() if isinstance(props, dict) else ())
        if isinstance(sub, dict) and "default" in sub and name not in args
    }
    for name, value in {**args, **defaults}.items():
        lowered = str(name).lower()
        if not any(word in lowered for word in _DURATION_WORDS) or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            continue
        described = str((props or {}).get(name, {}).get("description", "")).lower() if isinstance(props, dict) else ""
        millis = "ms" in lowered or "milli" in lowered or "millisecond" in described
        total += value / 1000 if millis else value
    return total


def pace(step: Step, token: str, schema: Any, args: Any, deadline: float) -> None:
    """Paces a ``tools/call`` whose params carry ``_meta.progressToken`` ``token``: its progress
    notifications extend its deadline, and when its arguments ask for a duration it is waited for
    that much longer (up to :data:`DECLARED_CAP_S`; past it the answer is optional)."""
    step.progress = token
    asked = declared_seconds(schema, args)
    if asked > DECLARED_CAP_S:
        step.answer = "optional"  # not waited for: it would take longer than the fuzzer waits
    elif asked > 0:
        step.deadline = deadline + asked


def notification(method: str, params: dict[str, Any] | None = None, *, cancels: int | str | None = None) -> Step:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return Step(dumps(message), "notification", None, method, cancels=cancels)


@dataclass(slots=True)
class Profile:
    """What the fuzzer learnt about a server once, up front: its era, revision and catalogue.

    ``target`` describes where it runs (:meth:`~fuzz.wire.Target.describe`: transport, argv, url).
    """

    target: dict[str, Any]
    era: Literal["legacy", "modern"]
    revision: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    server_info: dict[str, Any] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return str(self.target.get("transport", "stdio"))

    @property
    def argv(self) -> list[str] | None:
        argv = self.target.get("argv")
        return list(argv) if argv else None

    def params(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """Request params for this era: 2026-07-28 requests carry the per-request ``_meta``."""
        if self.era != "modern":
            return params
        out = dict(params or {})
        meta = dict(out.get("_meta") or {})
        meta.update(
            {
                META_PROTOCOL_VERSION: self.revision,
                META_CLIENT_CAPABILITIES: {},
                META_CLIENT_INFO: CLIENT_INFO,
            }
        )
        out["_meta"] = meta
        return out

    def probe(self, rid: int | str) -> Step:
        """A cheap request every server of the era must answer: the liveness probe."""
        if self.era == "modern":
            return request(rid, "server/discover", self.params({}))
        return request(rid, "ping", None)

    def output_schema(self, tool: str | None) -> Any:
        for t in self.tools:
            if t.get("name") == tool:
                return t.get("outputSchema")
        return None


def prologue(profile: Profile, startup: float | None = None) -> list[Step]:
    """The opening of a session: the legacy handshake (LC: initialize, then notifications/initialized),
    or, in 2026-07-28 where there is none, a ``server/discover``. Its first request waits up to
    ``startup`` seconds (a server that is slow to start is not slow to answer)."""
    if profile.era == "modern":
        if startup is None:
            return []
        warmup = profile.probe("mcpwire-fuzz-startup")
        warmup.setup, warmup.deadline = True, startup
        return [warmup]
    init = request(
        0,
        "initialize",
        {"protocolVersion": profile.revision, "capabilities": {}, "clientInfo": CLIENT_INFO},
    )
    done = notification("notifications/initialized")
    init.setup = done.setup = True
    init.deadline = startup
    return [init, done]


@dataclass(slots=True)
class Answer:
    """A response that arrived, with the index of the step it answers (or followed)."""

    step: int
    message: Any
    t: float


@dataclass(slots=True)
class Observation:
    """Everything one execution of steps produced."""

    steps: list[Step]
    answers: dict[int, Answer] = field(default_factory=dict)
    #: responses whose id matched no outstanding request (duplicates, unknown ids, null ids)
    strays: list[Answer] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)
    server_requests: list[Any] = field(default_factory=list)
    noise: list[bytes] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
    #: index of the notification or malformed line after which the barrier request got no answer
    barrier_timed_out: int | None = None
    write_failed: int | None = None
    #: index of the step after which the process was seen dead (None: alive at the end)
    died_after: int | None = None
    exit_status: int | None = None
    oversized: bool = False
    #: (HTTP status, start of body) of 5xx answers (HTTP targets)
    http_failures: list[tuple[int, str]] = field(default_factory=list)
    #: indexes of steps whose expected notification (``Step.expect``) never came
    missing_expected: list[int] = field(default_factory=list)
    #: seconds from writing a request to its answer, by step index
    latency: dict[int, float] = field(default_factory=dict)
    #: the run's time ran out during a wait (``until``): what is missing is not the server's doing
    cut: bool = False
    #: answers to requests the fuzzer itself cancelled, arrived after their window (ignored, as the
    #: sender of a cancellation should: 2025-11-25 utilities/cancellation)
    late_cancelled: int = 0
    #: error answers to lines of an earlier execution that were no request (malformed), by their id
    late_own_errors: int = 0
    stderr_tail: str = ""
    duration: float = 0.0


def _answer_server_request(peer: Peer, message: dict[str, Any], deadline: float) -> None:
    rid = message.get("id")
    if message.get("method") == "ping":
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": {}}
    else:
        reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not supported by the fuzzer"}}
    peer.send(dumps(reply), timeout=deadline)


def _send(peer: Peer, step: Step, deadline: float) -> bool:
    """Writes one step: a line, or raw bytes in pieces (a pause between them), or a stream closed."""
    if step.cancels is not None and peer.cancel_by_closing:
        # 2026-07-28 HTTP: closing the stream is the cancellation (HT-M10); the trace keeps the step
        peer.trace.record("send", peer.now(), step.line)
        peer.close_request(step.cancels)
        return True
    wait = step.kind != "request"
    if not step.raw and not step.split:
        return peer.send(step.line, timeout=deadline, wait=wait)
    if not peer.stream_framing:  # HTTP: one body is one message, however it was to be cut
        return peer.send_raw(step.line, timeout=deadline, wait=wait)
    pieces = step.chunks()
    peer.trace.record("send", peer.now(), step.line)
    for n, piece in enumerate(pieces):
        if n:
            time.sleep(SPLIT_PAUSE_S)
        if not peer.send_raw(piece, timeout=deadline, record=False):
            return False
    return True


#: a request's deadline is extended by its progress notifications, up to this many times over
PROGRESS_CAP = 10.0


class _Exchange:
    """The state of one :func:`execute`: what is outstanding, what came back, who is to blame."""

    def __init__(self, peer: Peer, steps: Sequence[Step], deadline: float, until: float | None) -> None:
        self.peer, self.steps, self.deadline, self.until = peer, steps, deadline, until
        memory = session_memory(peer)
        #: the JSON of every request id the fuzzer cancelled on this session (kept with the session:
        #: a late answer can come in a later execution)
        self.cancelled: set[str] = memory.cancelled
        #: the JSON of the ids lines that were no request of ours carried, on this session
        self.own_ids: set[str] = memory.own_ids
        self.obs = Observation(list(steps))
        self.start = time.monotonic()
        self.outstanding: dict[int, Step] = {}
        self.answered: set[int] = set()
        self.sent_at: dict[int, float] = {}
        #: the last non-request step since the last answered request (-1: none)
        self.blame = -1
        self.seen_methods: list[str] = []
        #: progress tokens of requests still waiting, and when their deadline was last extended
        self.progressed: dict[str, float] = {}
        #: the results of answered requests, by the JSON of their id (for fed arguments)
        self.results: dict[str, Any] = {}

    def bounded(self, moment: float) -> float:
        """``moment``, or the run's end when that comes first (then the observation is ``cut``)."""
        if self.until is not None and moment > self.until:
            return self.until
        return moment

    def take(self, line: bytes, current: int) -> None:
        """Files one line received while ``current`` is the step in progress."""
        message = decode_line(line)
        if not isinstance(message, dict):
            if isinstance(message, list) and message:  # a batch (2025-03-26): file each element
                for item in message:
                    self.take(dumps(item), current)
                return
            self.obs.noise.append(line)
            return
        if "method" in message:
            if "id" in message:
                self.obs.server_requests.append(message)
                _answer_server_request(self.peer, message, self.deadline)
            else:
                self.obs.notifications.append(message)
                self.seen_methods.append(str(message.get("method")))
                self._progress(message)
            return
        self._response(message, current)

    def _progress(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        if message.get("method") == "notifications/progress" and isinstance(token, str):
            self.progressed[token] = time.monotonic()

    def _response(self, message: dict[str, Any], current: int) -> None:
        rid = message.get("id")
        now = time.monotonic()
        for index, step in self.outstanding.items():
            if index not in self.answered and same_id(step.request_id, rid):
                self.answered.add(index)
                if index >= 0:
                    self.obs.answers[index] = Answer(index, message, now - self.start)
                    self.results[json.dumps(step.request_id)] = message.get("result")
                    if index in self.sent_at:
                        self.obs.latency[index] = now - self.sent_at[index]
                    self.blame = -1
                return
        pending = self.steps[current].kind == "request" and current not in self.answered
        code = message.get("error", {}).get("code") if isinstance(message.get("error"), dict) else None
        refused = code in (-32700, -32600) or (code is not None and not self.peer.stream_framing)
        if rid is None and pending and self.blame < 0 and refused:
            # JSON-RPC 2.0 §5.1: a request the server could not read (depth, size) gets a null-id error;
            # over HTTP the error comes in the response to that very POST, whatever its code
            self.answered.add(current)
            self.obs.answers[current] = Answer(current, message, now - self.start)
            return
        if rid is not None and _json_id(rid) in self.cancelled:
            # "The sender of the cancellation notification SHOULD ignore any response to the
            # request that arrives afterward" (2025-11-25 basic/utilities/cancellation)
            self.obs.late_cancelled += 1
            return
        own = self._sender_of(rid, current)
        if own is None and rid is not None and _json_id(rid) in self.own_ids and isinstance(message.get("error"), dict):
            # an error answer, late, to a line an earlier execution sent (a malformed request under
            # this id): an error is always an acceptable answer to such a line
            self.obs.late_own_errors += 1
            return
        if own is not None and isinstance(message.get("error"), dict):
            step = self.steps[own]
            if step.kind == "request" and own in self.outstanding and own not in self.answered:
                # a request whose line carries another id than the one the fuzzer waits for (a
                # mutation): the server answered the id it read, and an error is a fine answer
                self.answered.add(own)
                self.obs.answers[own] = Answer(own, message, now - self.start)
                return
            # a malformed line's own error answer, under the id the server read in it: judged as
            # that line's answer (malformed_answer), never as an answer to nothing
            self.obs.strays.append(Answer(own, message, now - self.start))
            return
        self.obs.strays.append(Answer(self.blame if self.blame >= 0 else current, message, now - self.start))

    def _sender_of(self, rid: Any, current: int) -> int | None:
        """The last line sent (up to ``current``) that carries ``rid`` as its own id, if any."""
        if rid is None:
            return None
        for index in range(min(current, len(self.steps) - 1), -1, -1):
            step = self.steps[index]
            if step.setup:
                continue
            try:
                message = json.loads(step.line)
            except (ValueError, RecursionError, UnicodeDecodeError):
                continue
            if isinstance(message, dict) and "id" in message and same_id(message["id"], rid):
                return index
        return None

    def wait_for(self, index: int, wait: float, current: int) -> None:
        """Reads until ``index`` is answered, ``wait`` seconds pass (extended by the request's own
        progress notifications, up to :data:`PROGRESS_CAP` times), or the run's time is up."""
        started = time.monotonic()
        token = self.steps[index].progress if index >= 0 else None
        last = started
        while index not in self.answered:
            if token is not None and token in self.progressed:
                last = max(last, self.progressed[token])
            natural = min(last + wait, started + wait * PROGRESS_CAP)
            remaining = self.bounded(natural) - time.monotonic()
            if remaining <= 0:
                self.obs.cut = self.obs.cut or self.bounded(natural) < natural  # the run ended first
                return
            line = self.peer.receive(remaining)
            if line is None:
                if not self.peer.alive() or self.peer.oversized:
                    return
                continue
            self.take(line, current)


def execute(
    peer: Peer,
    steps: Sequence[Step],
    *,
    deadline: float,
    settle: float = SETTLE_S,
    barrier: Callable[[str], Step] | None = None,
    until: float | None = None,
) -> Observation:
    """Writes ``steps`` in order and records what comes back (see the module docstring).

    After each notification, malformed line or request whose answer is optional it sends
    ``barrier(id)`` (a request every server of the era answers) and waits for its answer, then
    ``settle`` more seconds, so an answer to the line is attributed to it; a null-id parse error
    that arrives while a request waits is that request's answer (JSON-RPC 2.0 §5.1: the server
    could not read it). Stops early when the server dies, stops reading, or misses a deadline (a
    hung server would make every later wait time out too). No wait goes past ``until`` (a
    ``time.monotonic()`` moment: the end of the run's budget); a wait it cut marks the observation
    ``cut`` instead of counting as a missed deadline. What the session must remember across
    executions (:func:`session_memory`: the requests cancelled, the ids malformed lines carried)
    lets a late answer to one of those be told from an answer to nothing.
    """
    # a step with fed arguments gets this session's values: a copy, so the caller's step (in a
    # finding, say) keeps what it was sent with
    steps = [dataclasses.replace(s) if s.fed else s for s in steps]
    ex = _Exchange(peer, steps, deadline, until)
    obs = ex.obs
    for index, step in enumerate(steps):
        if not peer.alive():
            obs.died_after = index - 1
            break
        if not _step(ex, index, step, settle, barrier):
            break
    else:
        if not peer.alive():
            obs.died_after = len(steps) - 1
    obs.exit_status = peer.exit_status
    obs.oversized = peer.oversized
    obs.http_failures = list(getattr(peer, "http_failures", []))
    obs.duration = time.monotonic() - ex.start
    return obs


def _step(ex: _Exchange, index: int, step: Step, settle: float, barrier: Callable[[str], Step] | None) -> bool:
    """Writes one step and waits for what it calls for; ``False`` ends the exchange."""
    peer, obs = ex.peer, ex.obs
    if step.cancels is not None:
        ex.cancelled.add(_json_id(step.cancels))
    if step.kind != "request" and not step.setup:
        carried = _line_id(step.line)
        if carried is not None:
            ex.own_ids.add(carried)
    if step.kind == "request":
        ex.outstanding[index] = step
        ex.sent_at[index] = time.monotonic()
    elif not step.setup:
        ex.blame = index
    noticed = len(ex.seen_methods)
    if step.fed:
        _feed(ex, step)
    if not _send(peer, step, ex.deadline):
        obs.write_failed = index
        if not peer.alive():
            obs.died_after = index
        return False
    unanswered = step.kind != "request" or step.answer == "optional"
    if unanswered and not step.setup and not _barrier(ex, index, step, settle, barrier):
        return False
    if step.expect is not None:
        _expect(ex, index, step, noticed)
    if step.kind == "request" and step.answer == "required":
        ex.wait_for(index, step.deadline or ex.deadline, index)
        if index not in ex.answered:
            if peer.oversized or obs.cut:
                return False  # oversized: judged as answer-shape; cut: the run's time is up
            if peer.alive():
                obs.timed_out.append(index)
            else:
                obs.died_after = index
            return False
    return True


def _feed(ex: _Exchange, step: Step) -> None:
    """Puts into a tool call the values its ``fed`` arguments name, from this session's answers (an
    id a server makes up differs from one session to the next; a replay must pass the new one)."""
    try:
        message = json.loads(step.line)
    except (ValueError, RecursionError):
        return
    arguments = (message.get("params") or {}).get("arguments") if isinstance(message, dict) else None
    if not isinstance(arguments, dict):
        return
    for arg, source, path in step.fed:
        value = resolve(ex.results.get(json.dumps(source)), path)
        if value is not None:
            arguments[arg] = value
    step.line = dumps(message)


def _barrier(ex: _Exchange, index: int, step: Step, settle: float, barrier: Callable[[str], Step] | None) -> bool:
    """After a line that gets no answer of its own: a request right behind it. Servers read in
    order, so whatever the line provoked arrives before the barrier's answer, however slow the
    server is; then ``settle`` more seconds."""
    peer, obs = ex.peer, ex.obs
    if step.kind == "request":
        ex.blame = -1  # its answer, if any, is matched by id
    if barrier is not None:
        probe = barrier(f"mcpwire-fuzz-barrier-{index}")
        probe.setup = True
        ex.outstanding[-1 - index] = probe
        if not peer.send(probe.line, timeout=ex.deadline):
            obs.write_failed = index
            if not peer.alive():
                obs.died_after = index  # the line ended it before the barrier could be written
            return False
        # a server that reads in order answers the barrier after the calls still running before
        # it: those that asked for a duration (see pace) are waited for as long as they asked
        running = [s.deadline for i, s in enumerate(ex.steps[: index + 1]) if s.deadline and i not in ex.answered]
        ex.wait_for(-1 - index, max([ex.deadline, *running]), index)
        if (-1 - index) not in ex.answered:
            if obs.cut:
                return False
            if peer.alive():
                obs.barrier_timed_out = index
            else:
                obs.died_after = index
            return False
    while (line := peer.receive(settle)) is not None:
        ex.take(line, index)
    if step.kind != "request":
        ex.blame = -1  # its window is closed: later strays are not its doing
    return True


def _expect(ex: _Exchange, index: int, step: Step, noticed: int) -> None:
    """Waits (bounded) for the notification the step calls for (subscriptions/listen's acknowledgment)."""
    until = ex.bounded(time.monotonic() + ex.deadline)
    while step.expect not in ex.seen_methods[noticed:] and (remaining := until - time.monotonic()) > 0:
        line = ex.peer.receive(remaining)
        if line is None:
            break
        ex.take(line, index)
    if step.expect not in ex.seen_methods[noticed:]:
        if ex.until is not None and time.monotonic() >= ex.until:
            ex.obs.cut = True
        else:
            ex.obs.missing_expected.append(index)
