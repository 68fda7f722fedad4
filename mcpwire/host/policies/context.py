"""What one call through the policies is: :class:`CallContext`, the :class:`Risk` levels, and what
an approver is asked (:class:`ApprovalRequest`).

Theory of operation: the host builds a context per call from the tool's annotations and the
server's (and tool's) configured settings; each policy reads what it needs and the stack writes
back what happened (``decision``, ``outcome``), which the audit log and the metrics record.
``None`` in a setting means "not configured": each policy then applies its own default.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = ["DEFAULT_APPROVAL_TIMEOUT", "ApprovalRequest", "Approver", "CallContext", "Decision", "Kind", "Risk"]

#: seconds a decision may take before silence denies the call
DEFAULT_APPROVAL_TIMEOUT: Final = 300.0

Kind = Literal["tool", "resource", "prompt", "list"]
Decision = Literal["allow", "deny", "ask"]


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


#: An approver answers True (approve), False (deny), or a mapping: approve with these arguments.
Approver = Callable[[ApprovalRequest], Awaitable[bool | Mapping[str, object]]]


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
    decision: Decision | None = None
    risk: Risk | None = None
    #: calls at or above this risk are asked (``None``: the policy's threshold)
    ask_at: Risk | None = None
    #: asked instead of the host's approver, for this call only
    approver: Approver | None = None
    #: where the call comes from: ``trace_id``, ``run_id``, ``caller``... (audit and approvals)
    context: Mapping[str, str] = field(default_factory=dict)
    #: the server's era ("legacy", "modern"), for caching hints
    era: str | None = None
    # written by the stack
    approval: str = ""  #: allow, approved, approved_modified, denied
    approval_id: str | None = None  #: the queue's approval, when one was opened
    outcome: str = ""  #: ok, tool_error, cache_hit, error, denied, cancelled
