"""What a run reports, as typed events that are also JSON.

Theory of operation: a run is a sequence of events, each a msgspec Struct tagged by ``type``
(``text_delta``, ``tool_call_started``...), carrying the run's id and its place in the sequence
(``seq``, from 1). ``msgspec.json.encode(event)`` is the JSON form, one line per event for
``mcpwire chat --json`` and for an HTTP stream of a run; :func:`decode_event` reads it back.

Every run ends with exactly one :class:`Final` or :class:`Failed`. :class:`StateChanged` marks each
transition of the run's state machine: ``reasoning`` (the model is answering), ``calling_tools``,
``awaiting_approval`` (a call waits for a person), then ``finished`` or ``failed``. A call that
needs approval shows as :class:`ApprovalRequired`; decide it with :meth:`ApprovalRequired.approve`
or :meth:`ApprovalRequired.deny` (or through the host's approval queue, by its id), and
:class:`ApprovalResolved` follows, whoever decided.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Literal, Protocol

import msgspec

from ..protocol.types import JSONObject
from .errors import AgentError
from .messages import Usage

__all__ = [
    "ApprovalRequired",
    "ApprovalResolved",
    "Decider",
    "Event",
    "Failed",
    "FailureKind",
    "Final",
    "RunEvent",
    "RunState",
    "StateChanged",
    "StepFinished",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStarted",
    "ToolResult",
    "decode_event",
]


class RunState(enum.Enum):
    STARTING = "starting"  #: before the first request
    REASONING = "reasoning"  #: the model is answering
    CALLING_TOOLS = "calling_tools"  #: the model's tool calls are running
    AWAITING_APPROVAL = "awaiting_approval"  #: a tool call waits for a decision
    FINISHED = "finished"  #: the model answered (:class:`Final`)
    FAILED = "failed"  #: the run ended without an answer (:class:`Failed`)


#: why a run failed: the provider, a budget (steps, tool calls, tokens), the deadline, a tool
#: failure the policy stops on, or the run was cancelled
FailureKind = Literal["provider", "budget", "deadline", "tool", "cancelled"]


class Event(msgspec.Struct, kw_only=True, tag_field="type"):
    """Fields every event has: the run's id and the event's place in it (from 1)."""

    run_id: str
    seq: int = 0


class StateChanged(Event, tag="state_changed"):
    state: RunState
    previous: RunState


class TextDelta(Event, tag="text_delta"):
    """Text the model streamed; ``thought`` is reasoning before an action in text tool mode,
    not part of the answer."""

    step: int
    text: str
    thought: bool = False


class ToolCallDelta(Event, tag="tool_call_delta"):
    """Part of a tool call the model is writing: its name first, then pieces of its arguments."""

    step: int
    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


class ToolCallStarted(Event, tag="tool_call_started"):
    """A tool call the model asked for is starting (``server`` and ``tool`` are ``None`` when no
    tool has that name). ``arguments`` is ``None`` when the model's text was not a JSON object:
    ``raw_arguments`` is that text."""

    step: int
    call_id: str
    name: str
    server: str | None
    tool: str | None
    arguments: JSONObject | None
    raw_arguments: str | None = None


class Decider(Protocol):
    """What decides the approvals of a run's events (the :class:`~mcpwire.agent.loop.Run`)."""

    def approve(
        self, approval_id: str, arguments: Mapping[str, object] | None = None, *, by: str | None = None
    ) -> None: ...

    def deny(self, approval_id: str, reason: str | None = None, *, by: str | None = None) -> None: ...


class ApprovalRequired(Event, tag="approval_required", dict=True):
    """A call waits for a person's decision.

    ``approval_id`` is the id in the host's approval queue when the host has one (a decision
    there counts too), else local to the run. A CRITICAL call is asked twice (``confirmation``
    1 then 2 of ``confirmations_needed``). ``kind`` is ``sampling`` when a server asks the model
    for a message. Undecided, it expires after the host's approval timeout (a denial).
    """

    approval_id: str
    call_id: str | None
    kind: Literal["tool", "sampling"]
    server: str
    tool: str
    name: str
    arguments: JSONObject
    risk: str
    reason: str
    confirmation: int = 1
    confirmations_needed: int = 1

    def approve(self, arguments: Mapping[str, object] | None = None, *, by: str | None = None) -> None:
        """Lets the call run (with ``arguments`` instead of the model's, when given).

        Raises:
            AgentError: the approval is no longer waiting, or this event was decoded from JSON
                (decide it through the run, or the host's queue, by its id).
        """
        self._run().approve(self.approval_id, arguments, by=by)

    def deny(self, reason: str | None = None, *, by: str | None = None) -> None:
        """Refuses the call; the model gets the refusal (and ``reason``) as the call's result.

        Raises:
            AgentError: as :meth:`approve`.
        """
        self._run().deny(self.approval_id, reason, by=by)

    def _run(self) -> Decider:
        run: Decider | None = getattr(self, "_owner", None)
        if run is None:
            raise AgentError(
                f"approval {self.approval_id} was decoded from JSON: decide it through its run or the host's "
                "approval queue"
            )
        return run


class ApprovalResolved(Event, tag="approval_resolved"):
    """An approval was decided (here, or elsewhere through the host's queue), or expired.

    ``by`` is who decided (``None`` when it was decided elsewhere or expired).
    """

    approval_id: str
    approved: bool
    by: str | None = None
    reason: str | None = None
    edited: bool = False


class ToolResult(Event, tag="tool_result"):
    """A tool call ended. ``outcome``: ``ok``; ``tool_error`` (the tool said it failed);
    ``denied`` (refused, or no decision in time); ``failed`` (the call could not be made: the
    server is gone, timed out...); ``unknown_tool``; ``invalid_arguments``; ``quarantined``.
    ``text`` is what the model gets (cut to the policy's budget when ``truncated``)."""

    step: int
    call_id: str
    name: str
    server: str | None
    tool: str | None
    outcome: str
    is_error: bool
    text: str
    truncated: bool = False
    #: the call's own time (its wait for a decision is ``wait_ms``)
    latency_ms: float = 0.0
    #: milliseconds it waited for a decision
    wait_ms: float = 0.0
    risk: str | None = None
    approval: str | None = None
    approval_id: str | None = None


class StepFinished(Event, tag="step_finished"):
    """One model request and the tool calls it asked for are done."""

    step: int
    usage: Usage
    total_usage: Usage
    model_ms: float
    tools_ms: float
    tool_calls: int
    stop_reason: str


class Final(Event, tag="final"):
    """The model's answer; the run is over."""

    text: str
    stop_reason: str
    usage: Usage
    steps: int
    tool_calls: int


class Failed(Event, tag="failed"):
    """The run ended without an answer; ``reason`` says why in one line."""

    kind: FailureKind
    reason: str
    provider: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    steps: int = 0
    tool_calls: int = 0


RunEvent = (
    StateChanged
    | TextDelta
    | ToolCallDelta
    | ToolCallStarted
    | ApprovalRequired
    | ApprovalResolved
    | ToolResult
    | StepFinished
    | Final
    | Failed
)

_decoder: msgspec.json.Decoder[RunEvent] = msgspec.json.Decoder(RunEvent)


def decode_event(data: bytes | str) -> RunEvent:
    """An event from its JSON form.

    Raises:
        msgspec.ValidationError, msgspec.DecodeError: it is not one.
    """
    return _decoder.decode(data)
