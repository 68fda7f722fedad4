"""Call policies, composable per server and per tool.

Applied in the order audit -> approval -> cache -> breaker -> retry -> timeout -> client, by
:class:`PolicyStack`; each policy lives in its own module. Times come from
``trio.current_time()``, so tests drive them with trio's autojump clock.
"""

from __future__ import annotations

from .approval import (
    DEFAULT_APPROVAL_TIMEOUT,
    DEFAULT_ASK_AT,
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    annotation_risk,
    classify_risk,
    name_risk,
)
from .audit import (
    DEFAULT_SECRET_KEYS,
    ArgumentsMode,
    AuditLog,
    AuditRecord,
    AuditSink,
    audit_arguments,
    hash_arguments,
    redact,
    summarize_arguments,
)
from .breaker import BreakerState, CircuitBreaker
from .cache import ResultCache, hinted_ttl
from .context import CallContext, Caller, Decision, Risk, Verdict
from .metrics import Metrics, ToolStatistics
from .retry import RetryPolicy, is_transient
from .stack import PolicyStack
from .timeout import DEFAULT_TIMEOUT, run_with_timeout

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "DEFAULT_ASK_AT",
    "DEFAULT_SECRET_KEYS",
    "DEFAULT_TIMEOUT",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "ArgumentsMode",
    "AuditLog",
    "AuditRecord",
    "AuditSink",
    "BreakerState",
    "CallContext",
    "Caller",
    "CircuitBreaker",
    "Decision",
    "Metrics",
    "PolicyStack",
    "ResultCache",
    "RetryPolicy",
    "Risk",
    "ToolStatistics",
    "Verdict",
    "annotation_risk",
    "audit_arguments",
    "classify_risk",
    "hash_arguments",
    "hinted_ttl",
    "is_transient",
    "name_risk",
    "redact",
    "run_with_timeout",
    "summarize_arguments",
]
