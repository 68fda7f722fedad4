"""The sans-I/O core of mcpwire: framing, JSON-RPC, the request table, eras and the session.

Nothing here awaits, logs, or imports trio or httpx: it is fed bytes and answers with messages,
events and bytes, so it runs (and is tested) on any transport, in conformance checks and in the
fuzzer alike.
"""

from .framing import DEFAULT_MAX_MESSAGE_BYTES, LineBuffer
from .jsonrpc import (
    Batch,
    ErrorResponse,
    Message,
    Notification,
    NotProtocol,
    Request,
    RequestId,
    Response,
    classify,
)
from .lifecycle import EraDetector, SessionState
from .pending import PendingRequest, RequestTable
from .session import ClientSession
from .versions import ALL_REVISIONS, LATEST, LATEST_LEGACY, LEGACY_REVISIONS, MODERN_REVISIONS, Era, Revision

__all__ = [
    "ALL_REVISIONS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "LATEST",
    "LATEST_LEGACY",
    "LEGACY_REVISIONS",
    "MODERN_REVISIONS",
    "Batch",
    "ClientSession",
    "Era",
    "EraDetector",
    "ErrorResponse",
    "LineBuffer",
    "Message",
    "NotProtocol",
    "Notification",
    "PendingRequest",
    "Request",
    "RequestId",
    "RequestTable",
    "Response",
    "Revision",
    "SessionState",
    "classify",
]
