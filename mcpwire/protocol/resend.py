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

Below the request loop, an HTTP transport sends one message's POST again on some statuses, with
the same id (the server did not answer it), as :data:`STATUS_RESEND` says and
:func:`status_resend` decides: a 503 (RFC 9110 15.6.4, the server did not handle the request)
and a 429 (RFC 6585 section 4, it refused to) were not processed, so any message goes again; a
502 or 504 comes from a gateway that may have passed the request on, so only an idempotent one
does. A ``Retry-After`` is waited out when it fits: at most :data:`MAX_RETRY_AFTER` seconds per
wait, and never past the call's deadline; a longer one is not waited for, and the status is the
call's answer. A 429 without ``Retry-After`` says nothing of when to come back, and is answered
at once; a 502, 503 or 504 without one is sent again after the transport's own backoff.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, NamedTuple

__all__ = [
    "MAX_RETRY_AFTER",
    "RESEND",
    "STATUS_RESEND",
    "Outcome",
    "Resend",
    "Rule",
    "StatusRule",
    "Step",
    "next_step",
    "status_resend",
]


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


# -- HTTP statuses: the same POST again ---------------------------------------------------------

#: the longest ``Retry-After`` waited out, in seconds; a longer one ends the call with the status
MAX_RETRY_AFTER: Final = 30.0


class StatusRule(NamedTuple):
    #: the server did not process the request: any message may go again (else idempotent ones)
    unprocessed: bool
    #: sent again only when the answer says when (``Retry-After``)
    needs_retry_after: bool
    #: the rule's source, for readers of this table.
    source: str


STATUS_RESEND: Final[Mapping[int, StatusRule]] = {
    429: StatusRule(True, True, "RFC 6585 4"),
    502: StatusRule(False, False, "RFC 9110 15.6.3"),
    503: StatusRule(True, False, "RFC 9110 15.6.4"),
    504: StatusRule(False, False, "RFC 9110 15.6.5"),
}


class Resend(NamedTuple):
    #: seconds to wait first: the ``Retry-After`` (None: the transport's own backoff)
    wait: float | None


def status_resend(
    status: int, retry_after: float | None, *, idempotent: bool, remaining: float | None
) -> Resend | None:
    """Whether a POST answered with ``status`` goes again (see the module's theory of operation);
    None when not: the status answers the call. The caller bounds the attempts.

    Args:
        retry_after: the seconds the answer's ``Retry-After`` asks for (None: none, or unreadable).
        idempotent: the message may run twice without harm.
        remaining: the seconds left before the call's deadline (None: no deadline).
    """
    rule = STATUS_RESEND.get(status)
    if rule is None or not (rule.unprocessed or idempotent):
        return None
    if retry_after is None:
        return None if rule.needs_retry_after else Resend(None)
    if retry_after > MAX_RETRY_AFTER or (remaining is not None and retry_after >= remaining):
        return None
    return Resend(retry_after)
