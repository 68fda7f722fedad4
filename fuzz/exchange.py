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

import itertools
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .wire import Peer, decode_line

__all__ = [
    "CLIENT_INFO",
    "MODERN_REVISION",
    "Answer",
    "Deep",
    "Observation",
    "Profile",
    "Step",
    "dumps",
    "execute",
    "notification",
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
    #: this request's own deadline (the session's first request also waits for the server to start)
    deadline: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("request_id", "method", "tool", "valid", "cancels", "expect"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
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
        )

    def chunks(self) -> list[bytes]:
        """The pieces to write: the line cut at ``split`` (a raw step carries its own terminator)."""
        data = self.line if self.raw else self.line + b"\n"
        cuts = [0, *sorted(i for i in self.split if 0 < i < len(data)), len(data)]
        return [data[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def request(
    rid: int | str, method: str, params: dict[str, Any] | None, *, tool: str | None = None, valid: bool | None = None
) -> Step:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return Step(dumps(message), "request", rid, method, tool, valid)


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


def execute(
    peer: Peer,
    steps: Sequence[Step],
    *,
    deadline: float,
    settle: float = SETTLE_S,
    barrier: Callable[[str], Step] | None = None,
) -> Observation:
    """Writes ``steps`` in order and records what comes back (see the module docstring).

    After each notification, malformed line or request whose answer is optional it sends
    ``barrier(id)`` (a request every server of the era answers) and waits for its answer, then
    ``settle`` more seconds, so an answer to the line is attributed to it; a null-id parse error
    that arrives while a request waits is that request's answer (JSON-RPC 2.0 §5.1: the server
    could not read it). Stops early when the server dies, stops reading, or misses a deadline (a
    hung server would make every later wait time out too).
    """
    obs = Observation(list(steps))
    start = time.monotonic()
    outstanding: dict[int, Step] = {}
    answered: set[int] = set()
    blame: list[int] = [-1]  # the last non-request step since the last answered request
    seen_methods: list[str] = []

    def take(line: bytes, current: int) -> None:
        """Files one line received while ``current`` is the step in progress."""
        message = decode_line(line)
        if not isinstance(message, dict):
            if isinstance(message, list) and message:  # a batch (2025-03-26): file each element
                for item in message:
                    take(dumps(item), current)
                return
            obs.noise.append(line)
            return
        if "method" in message:
            if "id" in message:
                obs.server_requests.append(message)
                _answer_server_request(peer, message, deadline)
            else:
                obs.notifications.append(message)
                seen_methods.append(str(message.get("method")))
            return
        rid = message.get("id")
        now = time.monotonic() - start
        for index, step in outstanding.items():
            if index not in answered and same_id(step.request_id, rid):
                answered.add(index)
                if index >= 0:
                    obs.answers[index] = Answer(index, message, now)
                    blame[0] = -1
                return
        pending = steps[current].kind == "request" and current not in answered
        code = message.get("error", {}).get("code") if isinstance(message.get("error"), dict) else None
        refused = code in (-32700, -32600) or (code is not None and not peer.stream_framing)
        if rid is None and pending and blame[0] < 0 and refused:
            # JSON-RPC 2.0 §5.1: a request the server could not read (depth, size) gets a null-id error;
            # over HTTP the error comes in the response to that very POST, whatever its code
            answered.add(current)
            obs.answers[current] = Answer(current, message, now)
            return
        obs.strays.append(Answer(blame[0] if blame[0] >= 0 else current, message, now))

    def wait_for(index: int, until: float, current: int) -> None:
        while index not in answered and (remaining := until - time.monotonic()) > 0:
            line = peer.receive(remaining)
            if line is None:
                if not peer.alive() or peer.oversized:
                    return
                continue
            take(line, current)

    for index, step in enumerate(steps):
        if not peer.alive():
            obs.died_after = index - 1
            break
        if step.kind == "request":
            outstanding[index] = step
        elif not step.setup:
            blame[0] = index
        noticed = len(seen_methods)
        if not _send(peer, step, deadline):
            obs.write_failed = index
            if not peer.alive():
                obs.died_after = index
            break
        needs_barrier = (step.kind != "request" or step.answer == "optional") and not step.setup
        if needs_barrier:
            if step.kind == "request":
                blame[0] = -1  # its answer, if any, is matched by id
            if barrier is not None:
                # a request right behind it: servers read in order, so whatever the line provoked
                # arrives before the barrier's answer, however slow the server is
                probe = barrier(f"mcpwire-fuzz-barrier-{index}")
                probe.setup = True
                outstanding[-1 - index] = probe
                if not peer.send(probe.line, timeout=deadline):
                    obs.write_failed = index
                    break
                wait_for(-1 - index, time.monotonic() + deadline, index)
                if (-1 - index) not in answered:
                    if peer.alive():
                        obs.barrier_timed_out = index
                    else:
                        obs.died_after = index
                    break
            while (line := peer.receive(settle)) is not None:
                take(line, index)
            if step.kind != "request":
                blame[0] = -1  # its window is closed: later strays are not its doing
        if step.expect is not None:
            until = time.monotonic() + deadline
            while step.expect not in seen_methods[noticed:] and (remaining := until - time.monotonic()) > 0:
                line = peer.receive(remaining)
                if line is None:
                    break
                take(line, index)
            if step.expect not in seen_methods[noticed:]:
                obs.missing_expected.append(index)
        if step.kind == "request" and step.answer == "required":
            wait_for(index, time.monotonic() + (step.deadline or deadline), index)
            if index not in answered:
                if peer.oversized:
                    break  # judged as answer-shape: the line was over the limit
                if peer.alive():
                    obs.timed_out.append(index)
                else:
                    obs.died_after = index
                break
    else:
        last = len(steps) - 1
        if not peer.alive():
            obs.died_after = last
    obs.exit_status = peer.exit_status
    obs.oversized = peer.oversized
    obs.http_failures = list(getattr(peer, "http_failures", []))
    obs.duration = time.monotonic() - start
    return obs
