"""What each oracle cites, per revision and transport: the rule a finding breaks, in the text of
the revision the session spoke.

Theory of operation: an oracle's rule often has the same meaning in every revision but lives on
another page, under another heading, or in other words (2024-11-05 has ``basic/messages``,
2025-03-26 moved it to ``basic/index``, 2025-11-25 split "Responses" into result and error
responses, 2026-07-28 moved stdio to a page of its own and timeouts to the cancellation pattern).
:data:`CITATIONS` holds, per oracle, :class:`Citation` entries oldest first; the one in force for a
revision is the last whose ``since`` is not after it (and whose transports include the session's).
A rule that is JSON-RPC 2.0's, not MCP's, names no page (``page=None``). Where a rule is weaker in
an older revision (a SHOULD, or no rule at all), :data:`SEVERITY` lowers the finding to a warning
there. ``tests/fuzz/test_fuzz_citations.py`` checks every page and section against the page list of
each revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["CITATIONS", "SEVERITY", "Citation", "citation", "severity"]

REVISIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
ANY_TRANSPORT: Final = frozenset({"stdio", "streamable-http", "sse"})
HTTP: Final = frozenset({"streamable-http", "sse"})


@dataclass(frozen=True, slots=True)
class Citation:
    """One rule: where it is (``page`` of the revision, ``section``) and what it says (``quote``).

    ``revision`` pins the page to one revision (a rule defined only there); otherwise the page is
    the session's revision's. ``page=None``: a rule of JSON-RPC 2.0 (``section`` names it)."""

    since: str
    page: str | None
    section: str
    quote: str
    transports: frozenset[str] = ANY_TRANSPORT
    revision: str | None = None
    #: the checklist ids of the rule (``SV-02``...), for the reader who knows them
    ids: str = ""

    def text(self, revision: str) -> str:
        if self.page is None:
            where = self.section
        else:  # no section: the page's opening text
            where = f"{self.revision or revision} {self.page}" + (f" §{self.section}" if self.section else "")
        out = f'{where}: "{self.quote}"'
        return f"{out}; {self.ids}" if self.ids else out


_RPC_EVERY_REQUEST = Citation(
    "2024-11-05",
    None,
    "JSON-RPC 2.0 §5",
    "When a rpc call is made, the Server MUST reply with a Response, except for in the case of Notifications.",
    ids="(§5.1: -32700 Parse error, -32600 Invalid Request for a message it cannot read); SV-02",
)
_RPC_CODES = Citation(
    "2024-11-05",
    None,
    "JSON-RPC 2.0 §5.1",
    "-32700 Parse error: Invalid JSON was received by the server. -32600 Invalid Request: The JSON sent is not a "
    "valid Request object.",
    ids="ST-08",
)
_TOOLS_SECURITY = (
    "Servers MUST: Validate all tool inputs, Implement proper access controls, Rate limit tool invocations, "
    "Sanitize tool outputs"
)

CITATIONS: Final[dict[str, tuple[Citation, ...]]] = {
    "server-alive": (_RPC_EVERY_REQUEST,),
    "answer-deadline": (_RPC_EVERY_REQUEST,),
    "answer-slow": (
        Citation(
            "2024-11-05",
            "basic/lifecycle",
            "Error Handling",
            "Implementations SHOULD implement appropriate timeouts for all requests, to prevent hung connections "
            "and resource exhaustion.",
        ),
        Citation(
            "2025-03-26",
            "basic/lifecycle",
            "Timeouts",
            "Implementations SHOULD establish timeouts for all sent requests, to prevent hung connections and "
            "resource exhaustion.",
        ),
        Citation(
            "2026-07-28",
            "basic/patterns/cancellation",
            "Timeouts",
            "Implementations SHOULD establish timeouts for all sent requests, to prevent hung connections and "
            "resource exhaustion.",
        ),
    ),
    "one-answer": (
        Citation(
            "2024-11-05",
            "basic/messages",
            "Responses",
            "Responses MUST include the same ID as the request they correspond to.",
            ids="JSON-RPC 2.0 §5; SV-02",
        ),
        Citation(
            "2025-03-26",
            "basic/index",
            "Responses",
            "Responses MUST include the same ID as the request they correspond to.",
            ids="JSON-RPC 2.0 §5; SV-02",
        ),
        Citation(
            "2025-11-25",
            "basic/index",
            "Result Responses",
            "Result responses MUST include the same ID as the request they correspond to.",
            ids="JSON-RPC 2.0 §5; SV-02",
        ),
    ),
    "notification-silence": (
        Citation(
            "2024-11-05",
            None,
            "JSON-RPC 2.0 §4.1",
            "The Server MUST NOT reply to a Notification, including those that are within a batch request.",
            ids="SV-04",
        ),
        Citation("2025-03-26", "basic/index", "Notifications", "The receiver MUST NOT send a response.", ids="SV-04"),
    ),
    "malformed-input": (_RPC_CODES,),
    "malformed-code": (_RPC_CODES,),
    "answer-shape": (
        Citation(
            "2024-11-05",
            "basic/messages",
            "Responses",
            "Either a result or an error MUST be set. A response MUST NOT set both.",
            ids="and the revision's schema.json; SV-03, SV-06",
        ),
        Citation(
            "2025-03-26",
            "basic/index",
            "Responses",
            "Either a result or an error MUST be set. A response MUST NOT set both.",
            ids="and the revision's schema.json; SV-03, SV-06",
        ),
        Citation(
            "2025-11-25",
            "basic/index",
            "Result Responses",
            "Result responses MUST include a result field.",
            ids="§Error Responses, and the revision's schema.json; SV-03, SV-06",
        ),
    ),
    "error-code": (
        Citation(
            "2024-11-05",
            None,
            "JSON-RPC 2.0 §5.1",
            "The error codes from and including -32768 to -32000 are reserved for pre-defined errors. Any code "
            "within this range, but not defined explicitly below is reserved for future use.",
            ids="JR-30",
        ),
        Citation(
            "2026-07-28",
            "basic/index",
            "Error Codes",
            "Implementations MUST NOT emit any code from this sub-range that is not defined by this specification",
            ids="JR-30, JR-32",
        ),
    ),
    "output-schema": (
        Citation(
            "2024-11-05",
            "server/tools",
            "Output Schema",
            "Servers MUST provide structured results that conform to this schema.",
            revision="2025-06-18",
            ids="SV-30",
        ),
        Citation(
            "2025-06-18",
            "server/tools",
            "Output Schema",
            "Servers MUST provide structured results that conform to this schema.",
            ids="SV-30",
        ),
    ),
    "stdout-clean": (
        Citation(
            "2024-11-05",
            "basic/transports",
            "stdio",
            "The server MUST NOT write anything to its stdout that is not a valid MCP message.",
            frozenset({"stdio"}),
            ids="SV-01",
        ),
        Citation(
            "2024-11-05",
            "basic/transports",
            "HTTP with SSE",
            "Server messages are sent as SSE message events, with the message content encoded as JSON in the "
            "event data.",
            frozenset({"sse"}),
            revision="2024-11-05",
            ids="SV-01",
        ),
        Citation(
            "2025-03-26",
            "basic/transports",
            "Sending Messages to the Server",
            "If the input contains any number of JSON-RPC requests, the server MUST either return Content-Type: "
            "text/event-stream, to initiate an SSE stream, or Content-Type: application/json, to return one JSON "
            "object.",
            frozenset({"streamable-http"}),
            ids="SV-01",
        ),
        Citation(
            "2026-07-28",
            "basic/transports/stdio",
            "",
            "The server MUST NOT write anything to its stdout that is not a valid MCP message.",
            frozenset({"stdio"}),
            ids="SV-01",
        ),
        Citation(
            "2026-07-28",
            "basic/transports/streamable-http",
            "Sending Messages",
            "If the body is a JSON-RPC request, the server MUST return either Content-Type: application/json (a "
            "single JSON object) or Content-Type: text/event-stream (an SSE response stream).",
            frozenset({"streamable-http"}),
            ids="SV-01",
        ),
    ),
    "list-stable": (
        Citation(
            "2024-11-05",
            "server/tools",
            "List Changed Notification",
            "When the list of available tools changes, servers that declared the listChanged capability SHOULD "
            "send a notification",
            ids="no notifications/*/list_changed came; SV-34 (a MUST from 2026-07-28)",
        ),
        Citation(
            "2026-07-28",
            "server/tools",
            "Capabilities",
            "MUST NOT vary per-connection or as a side effect of other requests on the connection",
            ids="SV-34",
        ),
    ),
    "http-status": (
        Citation(
            "2024-11-05",
            "basic/transports",
            "HTTP with SSE",
            "All subsequent client messages MUST be sent as HTTP POST requests to this endpoint.",
            ids="a 5xx is the server failing, not refusing the input (JSON-RPC 2.0 §5); HT-04",
        ),
        Citation(
            "2025-03-26",
            "basic/transports",
            "Sending Messages to the Server",
            "If the server cannot accept the input, it MUST return an HTTP error status code (e.g., 400 Bad Request).",
            ids="a 5xx is the server failing, not refusing the input; HT-04, SV-20, SV-21",
        ),
        Citation(
            "2026-07-28",
            "basic/transports/streamable-http",
            "Sending Messages",
            "If the server cannot accept it, it MUST return an HTTP error status code (e.g., 400 Bad Request).",
            ids="a 5xx is the server failing, not refusing the input; HT-04, SV-20, SV-21",
        ),
    ),
    "subscription-ack": (
        Citation(
            "2026-07-28",
            "basic/patterns/subscriptions",
            "Acknowledgment",
            "The server MUST send notifications/subscriptions/acknowledged as the first message",
            revision="2026-07-28",
            ids="SV-37, UT-S02",
        ),
    ),
    "tool-schema": (
        Citation(
            "2024-11-05",
            "server/tools",
            "Tool",
            "inputSchema: JSON Schema defining expected parameters",
            ids="SV-29",
        ),
        Citation(
            "2025-11-25",
            "server/tools",
            "Tool",
            "inputSchema: JSON Schema defining expected parameters [...] MUST be a valid JSON Schema object (not null)",
            ids="SV-29",
        ),
    ),
    "invalid-args-refused": (
        Citation("2024-11-05", "server/tools", "Security Considerations", _TOOLS_SECURITY, ids="SV-31"),
    ),
    "leak": (
        Citation(
            "2024-11-05",
            "server/tools",
            "Security Considerations",
            _TOOLS_SECURITY,
            ids="stack traces, source paths and secrets are internal details, not output for a client",
        ),
    ),
    "sse-endpoint": (
        Citation(
            "2024-11-05",
            "basic/transports",
            "HTTP with SSE",
            "When a client connects, the server MUST send an endpoint event containing a URI for the client to "
            "use for sending messages.",
            revision="2024-11-05",
            ids="a URI on another origin, with userinfo or a fragment is refused as the SDKs refuse it (HS-02, "
            "SEC-08): it would send the client's messages and credentials elsewhere",
        ),
    ),
}

#: (first revision, severity) per oracle, oldest first, where an older revision's rule is weaker
SEVERITY: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    # before 2026-07-28 a list may change, with (SHOULD) a list_changed notification
    "list-stable": (("2024-11-05", "warning"), ("2026-07-28", "error")),
}


def citation(oracle: str, revision: str, transport: str = "stdio") -> str:
    """The text an ``oracle``'s finding cites in a ``revision`` session over ``transport``."""
    chosen: Citation | None = None
    for entry in CITATIONS[oracle]:
        if entry.since <= revision and transport in entry.transports:
            chosen = entry
    if chosen is None:  # a rule newer than the session (e.g. subscriptions): the page that defines it
        chosen = next((c for c in CITATIONS[oracle] if transport in c.transports), CITATIONS[oracle][0])
        return chosen.text(chosen.since)
    return chosen.text(revision)


def severity(oracle: str, revision: str, default: str) -> str:
    """The severity of an ``oracle``'s finding in a ``revision`` session (``default``: the oracle's own)."""
    level = default
    for first, entry in SEVERITY.get(oracle, ()):
        if revision >= first:
            level = entry
    return level
