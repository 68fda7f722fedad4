"""What one call through the policies is: :class:`CallContext`, the :class:`Risk` levels, and what
an approver is asked (:class:`ApprovalRequest`).

Theory of operation: the host builds a context per call from the tool's annotations and the
server's (and tool's) configured settings; each policy reads what it needs and the stack writes
back what happened (``decision``, ``outcome``), which the audit log and the metrics record.
``None`` in a setting means "not configured": each policy then applies its own default.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable

from ...client.relay import Relay

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "ApprovalRequest",
    "Approver",
    "CallContext",
    "Caller",
    "Decision",
    "Kind",
    "Risk",
    "Verdict",
]

#: seconds a decision may take before silence denies the call
DEFAULT_APPROVAL_TIMEOUT: Final = 300.0

Kind = Literal["tool", "resource", "prompt", "list"]
#: ``ask``: someone other than the caller decides (a person at the console or the API, the host's
#: approver); ``ask-caller``: the calling client's user may decide too (a gateway client's
#: elicitation), except for CRITICAL calls, which always need someone else
Decision = Literal["allow", "deny", "ask", "ask-caller"]


class Risk(enum.IntEnum):
    """How much harm a call can do; the approval policy asks at or above a threshold."""

    LOW = 0  #: reads nothing outside the server's own data
    MEDIUM = 1  #: reads or searches, possibly the outside world
    HIGH = 2  #: creates or changes things
    CRITICAL = 3  #: deletes, executes, moves money


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is asked about.

    ``id`` names the :class:`~mcpwire.host.approvals.Approval` in the host's queue (``None``
    without a queue). A CRITICAL call asks twice: ``confirmation`` counts from 1 up to
    ``confirmations_needed``; a later confirmation shows the arguments as edited so far.
    """

    server: str
    tool: str  #: the tool's name on its server
    name: str  #: the namespaced name
    arguments: Mapping[str, object]
    risk: Risk
    reason: str  #: why approval is needed (a rule, or the risk threshold)
    id: str | None = None
    confirmation: int = 1
    confirmations_needed: int = 1
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """An approver's answer with who gave it (an approver may also answer a plain bool or the
    arguments to approve with).

    ``by`` names who decided (a person, a token, a prompt); it is recorded as the approval's
    ``decided_by``.
    """

    approve: bool
    arguments: Mapping[str, object] | None = None
    reason: str | None = None
    by: str | None = None


#: An approver answers True (approve), False (deny), a mapping (approve with these arguments) or a
#: :class:`Verdict`.
Approver = Callable[[ApprovalRequest], Awaitable[bool | Mapping[str, object] | Verdict]]


@runtime_checkable
class Caller(Protocol):
    """Who waits for a call's answer, as the approval of the call follows it.

    The approval policy asks both while a call waits for a decision (a few times a second): a
    caller that is not :meth:`present` shows as away on its approval; once :meth:`gone` gives a
    reason, the approval ends as abandoned and the call never runs. A transport decides what
    either means (a gateway: a closed stream, a cancelled request, an ended session, a
    connection that did not resume in time).
    """

    def present(self) -> bool:
        """Whether the answer could reach the caller now."""
        ...

    def gone(self, *, cancelled: bool = False) -> str | None:
        """Why the caller is gone for good, as a sentence; ``None`` while it may still take the
        answer. ``cancelled``: the call is being cancelled, and the caller may know why."""
        ...


@dataclass(slots=True)
class CallContext:
    """One call going through the policies."""

    server: str
    tool: str  #: the tool's name on its server, the resource URI for reads, or the list method
    arguments: Mapping[str, object]
    kind: Kind = "tool"
    name: str = ""  #: the namespaced name the caller used
    # the tool's annotations (untrusted hints; None when absent)
    read_only: bool | None = None
    idempotent: bool | None = None
    destructive: bool | None = None
    open_world: bool | None = None
    # settings (None: the policy's default)
    timeout: float = 30.0
    retries: int | None = None
    retryable: bool | None = None
    cacheable: bool | None = None
    cache_ttl: float | None = None
    #: the cached results a call of this tool drops: ``"server"``, ``"none"`` or globs of cached
    #: tool names and resource URIs (``None``: ``"server"`` unless the tool is read-only)
    invalidates: str | tuple[str, ...] | None = None
    decision: Decision | None = None
    risk: Risk | None = None
    #: calls at or above this risk are asked (``None``: the policy's threshold)
    ask_at: Risk | None = None
    #: asked instead of the host's approver, for this call only
    approver: Approver | None = None
    #: asks the caller itself (a gateway client's user): only where the decision is
    #: ``ask-caller``, and never enough for a CRITICAL call
    caller_approver: Approver | None = None
    #: follows whoever waits for the answer (``None``: the calling task itself, whose
    #: cancellation is its going away)
    caller: Caller | None = None
    #: answer from the server even when the cache holds a fresh result (the result is cached)
    fresh: bool = False
    #: the client the call is made for, when a proxy makes it (a gateway's client): passed down
    #: to the request as it is (see :mod:`mcpwire.client.relay`)
    relay: Relay | None = None
    #: where the call comes from: ``trace_id``, ``run_id``, ``caller``... (audit and approvals)
    context: Mapping[str, str] = field(default_factory=dict)
    #: the server's era ("legacy", "modern"), for caching hints
    era: str | None = None
    # written by the stack
    approval: str = ""  #: allow, approved, approved_modified, denied, abandoned
    approval_id: str | None = None  #: the queue's approval, when one was opened
    #: seconds the call waited for a decision (not part of its latency)
    approval_wait: float = 0.0
    outcome: str = ""  #: ok, tool_error, cache_hit, error, denied, abandoned, cancelled
    #: the current attempt's hard end on trio's clock (set by the timeout policy; ``inf`` between)
    deadline: float = math.inf
