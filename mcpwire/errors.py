"""The exception hierarchy of mcpwire.

Every error mcpwire raises is an :class:`MCPWireError`. The tree separates whose fault a
failure is: :class:`LocalProtocolError` is a misuse of the library, :class:`RemoteProtocolError`
is a server that broke the protocol, :class:`TransportError` is the connection itself, and
:class:`RPCError` is a well-formed JSON-RPC error answer from the server. Errors are mapped once,
at the boundary where they are detected, and chain the underlying cause with ``from``.

This module imports nothing from the rest of the package, so every layer can use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ApprovalAbandoned",
    "ApprovalDenied",
    "AuthError",
    "CircuitOpen",
    "ClientClosed",
    "ConfigError",
    "ConnectError",
    "ConnectionBroken",
    "EraDetectionError",
    "FrameTooLarge",
    "HTTPStatusError",
    "HostError",
    "IncompleteBody",
    "InvalidHTTPResponse",
    "InvalidResponse",
    "LocalProtocolError",
    "MCPWireError",
    "MissingClientCapability",
    "OAuthError",
    "OutputSchemaError",
    "ProtocolError",
    "RPCError",
    "RemoteProtocolError",
    "RequestTimeout",
    "ResponseStreamLost",
    "ServerGone",
    "ServerNotFound",
    "SessionExpired",
    "ToolError",
    "ToolExecutionError",
    "TransportError",
    "UnknownTool",
    "UnsupportedVersion",
]


class MCPWireError(Exception):
    """Base class of every error raised by mcpwire."""


# -- protocol -------------------------------------------------------------------------------


class ProtocolError(MCPWireError):
    """A violation of MCP or JSON-RPC, by either side."""


class LocalProtocolError(ProtocolError):
    """Your code asked for something the protocol or the session state does not allow.

    Examples: calling a method the server did not advertise, or a request on a closed session.
    """


class RemoteProtocolError(ProtocolError):
    """The server broke the protocol: bad framing, undecodable JSON, an impossible answer."""


class FrameTooLarge(RemoteProtocolError):
    """A single message exceeded the configured maximum size.

    The stream cannot be resynchronised safely after this, so the connection is closed.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"message of at least {size} bytes exceeds the limit of {limit} bytes; "
            "raise max_message_bytes if the server legitimately sends larger messages"
        )
        self.size = size
        self.limit = limit


class InvalidResponse(RemoteProtocolError):
    """A response arrived whose shape does not match what the method returns."""


class UnsupportedVersion(RemoteProtocolError):
    """The server answered with (or only offers) protocol revisions mcpwire does not speak."""

    def __init__(self, message: str, *, offered: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.offered = tuple(offered)


class EraDetectionError(RemoteProtocolError):
    """Neither a 2026-07-28 ``server/discover`` nor a legacy ``initialize`` succeeded."""


class OutputSchemaError(RemoteProtocolError):
    """A tool's ``structuredContent`` does not validate against its ``outputSchema``."""


# -- transport ------------------------------------------------------------------------------


class TransportError(MCPWireError):
    """The connection to the server failed; details are in ``__cause__``."""


class ConnectError(TransportError):
    """The server could not be started or reached."""


class ServerNotFound(ConnectError):
    """The server's command does not exist (for example ``npx`` is not installed)."""


class ConnectionBroken(TransportError):
    """An HTTP exchange failed after its request may have reached the server: writing it or
    reading the answer failed or timed out. The server may have acted on the request.

    (A :class:`ConnectError` from an HTTP exchange means the request was not sent at all: no
    connection could be made, or none was free in time.)
    """


class InvalidHTTPResponse(ConnectionBroken):
    """The server's answer is not valid HTTP/1.1 (a malformed status line, header or chunk, a
    framing that cannot be trusted); the connection is not used again."""


class IncompleteBody(ConnectionBroken):
    """The server closed the connection before the end of the answer's body.

    Attributes:
        received: the body's bytes that arrived.
        expected: the length its ``Content-Length`` announced (None for a chunked body).
    """

    def __init__(self, message: str, *, received: int, expected: int | None = None) -> None:
        super().__init__(message)
        self.received = received
        self.expected = expected


class ServerGone(TransportError):
    """The server went away (exited, closed its output, or dropped the connection).

    Attributes:
        reason: what happened, without the stderr lines.
        server: the server's label.
        returncode: the process exit status, when the server is a subprocess that exited.
        stderr_tail: the last lines the server wrote to stderr, oldest first.
    """

    def __init__(
        self,
        message: str,
        *,
        server: str = "",
        returncode: int | None = None,
        stderr_tail: Sequence[str] = (),
    ) -> None:
        tail = tuple(stderr_tail)
        full = message
        if tail:
            full += "\nlast stderr lines:\n  " + "\n  ".join(tail[-10:])
        super().__init__(full)
        #: the message without the stderr block
        self.reason = message
        self.server = server
        self.returncode = returncode
        self.stderr_tail = tail


class ResponseStreamLost(ServerGone):
    """2026-07-28 Streamable HTTP: a request's response stream ended or broke before its answer.

    That revision has no resumption: the request is lost, and the client re-issues it once as a
    new request with a new id (HT-M12); this is raised when the re-issued one is lost too.
    """


class HTTPStatusError(TransportError):
    """An HTTP response whose status is an error and whose body carries no JSON-RPC answer."""

    def __init__(self, message: str, *, status: int, server: str = "", method: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.server = server
        self.method = method


class AuthError(HTTPStatusError):
    """401 or 403: the server wants (other) credentials.

    ``challenge`` is the ``WWW-Authenticate`` header, which names the scheme, the
    ``resource_metadata`` URL and the scope (tokens themselves never appear in errors).
    """

    def __init__(self, message: str, *, status: int, challenge: str = "", server: str = "", method: str = "") -> None:
        super().__init__(message, status=status, server=server, method=method)
        self.challenge = challenge


class OAuthError(AuthError):
    """OAuth authorization failed or was refused (discovery, registration, redirect or token step).

    ``status`` is the MCP server's HTTP status that started the flow (401 or 403); ``error`` is
    the OAuth error code when the authorization server sent one. Tokens, secrets, codes and
    verifiers never appear in messages.
    """

    def __init__(
        self, message: str, *, status: int = 401, error: str = "", challenge: str = "", server: str = ""
    ) -> None:
        super().__init__(message, status=status, challenge=challenge, server=server)
        self.error = error


class SessionExpired(TransportError):
    """The server no longer knows the session (HTTP 404 on a session id); re-initialise."""


class ClientClosed(MCPWireError):
    """The client was closed by your code (or is closing) and can send nothing more."""


class RequestTimeout(MCPWireError, TimeoutError):
    """A request got no answer within its timeout; it was cancelled on the wire."""

    def __init__(
        self,
        message: str,
        *,
        method: str = "",
        request_id: int | str | None = None,
        server: str = "",
        timeout: float | None = None,
    ) -> None:
        super().__init__(message)
        self.method = method
        self.request_id = request_id
        self.server = server
        self.timeout = timeout


# -- JSON-RPC errors ------------------------------------------------------------------------


class RPCError(MCPWireError):
    """The server answered a request with a JSON-RPC error object.

    Attributes:
        code: the integer error code (``-32601`` method not found, ...).
        message: the server's message.
        data: the optional ``data`` member, as decoded JSON.
        method: the method of the request this answers.
        server: the server's label.
        request_id: the id of the request this answers.
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: object = None,
        *,
        method: str = "",
        server: str = "",
        request_id: int | str | None = None,
    ) -> None:
        where = f" to '{method}'" if method else ""
        who = f" from server '{server}'" if server else ""
        rid = f" (id {request_id!r})" if request_id is not None else ""
        super().__init__(f"error {code}{who}{where}{rid}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        self.server = server
        self.request_id = request_id

    @property
    def is_method_not_found(self) -> bool:
        """True for ``-32601``: the server does not serve that method."""
        return self.code == -32601

    @property
    def is_not_found(self) -> bool:
        """True when the error means "no such resource": ``-32002``, or ``-32602`` with a ``uri``.

        2026-07-28 server/resources: "servers MUST return a JSON-RPC error with code -32602";
        "clients SHOULD also accept -32002 as a resource not found error" (JR-31).
        """
        if self.code == -32002:
            return True
        return self.code == -32602 and isinstance(self.data, dict) and "uri" in self.data


class MissingClientCapability(RPCError):
    """``-32021``: the server needs a client capability this client did not declare.

    ``required`` holds the server's ``data.requiredCapabilities``. Configure the matching handler
    (roots, sampling or elicitation) on the client to declare it.
    """

    @property
    def required(self) -> dict[str, object]:
        if isinstance(self.data, dict):
            req = self.data.get("requiredCapabilities")
            if isinstance(req, dict):
                return req
        return {}


class ToolError(MCPWireError):
    """A tool reported an execution failure (``isError: true``).

    Raised only by :meth:`mcpwire.ToolResult.raise_for_error`: such results are values.
    """

    def __init__(self, message: str, *, tool: str = "", server: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        self.server = server


# -- host ------------------------------------------------------------------------------------


class HostError(MCPWireError):
    """Base class of errors raised by the multi-server host."""


class ConfigError(HostError):
    """The configuration is malformed. ``problems`` lists every problem found."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class UnknownTool(HostError):
    """No server provides a tool of that name."""


class CircuitOpen(HostError):
    """The server's circuit breaker is open: calls fail fast until it cools down."""


class ApprovalDenied(HostError):
    """The approval policy (or the approver) denied the call."""


class ApprovalAbandoned(ApprovalDenied):
    """The call's caller went away while its approval waited: the approval ended as abandoned
    and the call was never sent."""


class ToolExecutionError(HostError):
    """A routed tool call failed; names server, tool and cause (``__cause__``)."""

    def __init__(self, message: str, *, tool: str = "", server: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        self.server = server
