"""When a request is sent again: one table, keyed by what became of the previous attempt.

Theory of operation: a request's answer is not always its end. The transport may lose it (a
2026-07-28 response stream that broke, a legacy session the server forgot), the server may refuse
the revision or the mirrored headers, or a 2026-07-28 result may ask for input first. Each of
these has one remedy and one bound, written down here as data; the client's request loop
classifies each attempt's outcome, looks it up in :data:`RESEND` and carries out the step, and
never decides a re-send anywhere else. Bounds count per outcome and per call: a request whose
stream breaks twice fails on the second loss, whatever else happened in between.

- Stream lost before the answer (2026-07-28 Streamable HTTP): HT-M12, "A broken response stream
  loses the in-flight request; clients MUST re-issue it as a new request with a new request ID".
- Session expired (legacy Streamable HTTP, a 404 on the session id): HT-L12, "When a client
  receives HTTP 404 in response to a request containing an MCP-Session-Id, it MUST start a new
  session"; the request is then sent on the new session.
- Header mismatch (-32020 on ``tools/call``): HT-M09, "the client SHOULD call tools/list to check
  for changes to the tool's inputSchema, then retry the original request".
- Unsupported revision (-32022 in 2026-07-28): LC-24, "The client SHOULD select a mutually
  supported version from the supported list and retry the request".
- Input required (2026-07-28 multi round-trip requests, UT-R02..UT-R07): answer the input
  requests and send the request again with a new id, echoing ``requestState``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, NamedTuple

__all__ = ["RESEND", "Outcome", "Rule", "Step", "next_step"]


class Outcome(enum.Enum):
    """What became of one attempt of a request, as far as re-sending is concerned."""

    #: a result (complete): the call is done.
    ANSWERED = "answered"
    #: a 2026-07-28 result of type ``input_required``.
    INPUT_REQUIRED = "input required"
    #: a 2026-07-28 response stream ended or broke before the answer.
    STREAM_LOST = "stream lost before an answer"
    #: the server no longer knows the legacy session (HTTP 404).
    SESSION_EXPIRED = "session expired"
    #: ``-32020``: the mirrored headers do not match the body (``tools/call``).
    HEADER_MISMATCH = "header mismatch"
    #: ``-32022`` in 2026-07-28: the server does not speak the request's revision.
    UNSUPPORTED_REVISION = "unsupported revision"
    #: anything else: an error answer or a failure that no re-send can mend.
    FAILED = "failed"


class Step(enum.Enum):
    """What the request loop does next."""

    #: hand the result to the caller.
    RETURN = "return"
    #: raise the attempt's error.
    RAISE = "raise"
    #: send the same request again as a new request (a new id).
    REISSUE = "reissue"
    #: open a new legacy session (once for all the calls that lost it), then re-send.
    RENEW_SESSION = "renew the session"
    #: list the tools again (their header annotations may have changed), then re-send.
    RELIST_TOOLS = "list the tools again"
    #: switch to a revision both sides speak, then re-send.
    SWITCH_REVISION = "switch the revision"
    #: answer the input requests, then re-send with the responses and the request state.
    FULFIL_INPUT = "answer the input requests"


class Rule(NamedTuple):
    step: Step
    #: how many times this outcome may lead to a re-send within one call; -1: the caller's bound
    #: (``max_input_rounds`` for input rounds).
    limit: int
    #: the rule's source, for readers of this table.
    source: str


RESEND: Final[Mapping[Outcome, Rule]] = {
    Outcome.STREAM_LOST: Rule(Step.REISSUE, 1, "HT-M12"),
    Outcome.SESSION_EXPIRED: Rule(Step.RENEW_SESSION, 1, "HT-L12"),
    Outcome.HEADER_MISMATCH: Rule(Step.RELIST_TOOLS, 1, "HT-M09"),
    Outcome.UNSUPPORTED_REVISION: Rule(Step.SWITCH_REVISION, 1, "LC-24"),
    Outcome.INPUT_REQUIRED: Rule(Step.FULFIL_INPUT, -1, "UT-R02..UT-R07"),
}


def next_step(outcome: Outcome, counts: dict[Outcome, int], *, input_rounds: int = 10) -> Step:
    """The step after an attempt ended in ``outcome``; ``counts`` holds the re-sends this call
    has already made per outcome, and is updated when the step is a re-send."""
    if outcome is Outcome.ANSWERED:
        return Step.RETURN
    rule = RESEND.get(outcome)
    if rule is None:
        return Step.RAISE
    limit = input_rounds if rule.limit < 0 else rule.limit
    done = counts.get(outcome, 0)
    if done >= limit:
        return Step.RAISE
    counts[outcome] = done + 1
    return rule.step
