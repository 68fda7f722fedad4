"""What one call through the policies is: :class:`CallContext`, and the :class:`Risk` levels.

Theory of operation: the host builds a context per call from the tool's annotations and the
server's (and tool's) configured settings; each policy reads what it needs and the stack writes
back what happened (``decision``, ``outcome``), which the audit log and the metrics record.
``None`` in a setting means "not configured": each policy then applies its own default.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CallContext", "Decision", "Kind", "Risk"]

Kind = Literal["tool", "resource", "list"]
Decision = Literal["allow", "deny", "ask"]


class Risk(enum.IntEnum):
    """How much harm a call can do; the approval policy asks at or above a threshold."""

    LOW = 0  #: reads nothing outside the server's own data
    MEDIUM = 1  #: reads or searches, possibly the outside world
    HIGH = 2  #: creates or changes things
    CRITICAL = 3  #: deletes, executes, moves money


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
    #: the server's era ("legacy", "modern"), for caching hints
    era: str | None = None
    # written by the stack
    approval: str = ""  #: allow, approved, approved_modified, denied
    outcome: str = ""  #: ok, tool_error, cache_hit, error, denied, cancelled
