"""Putting a message on the wire: the transport's ``send``, with the headers that mirror it.

Theory of operation: transports never parse payloads, so the headers an HTTP transport sends
beside a message are computed here from the sans-I/O session (HT-L08, HT-M03..HT-M09): the
2026-07-28 ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` (from the
tool's ``x-mcp-header`` annotations), or the legacy ``MCP-Protocol-Version`` from 2025-06-18 on.
A failed send becomes the transport's error, or :class:`~mcpwire.errors.ClientClosed` when the
client's own closing broke it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

from ..errors import ClientClosed, TransportError
from ..protocol.http import HeaderSpec, mirrored_headers
from ..protocol.jsonrpc import RequestId
from ..protocol.versions import V2025_06_18
from .state import Link

__all__ = ["headers_for", "raise_send_failure", "send"]


async def send(
    link: Link,
    payload: bytes,
    *,
    request_id: RequestId | None = None,
    headers: Mapping[str, str] | None = None,
    opens_session: bool = False,
) -> None:
    """Sends one encoded message on the current transport.

    Raises:
        ClientClosed: the client is closed (or its closing broke the send).
        ServerGone, TransportError: the connection is lost or the send failed.
    """
    transport = link.transport
    if transport is None or link.lost is not None:
        raise link.gone_error()
    try:
        await transport.send(payload, request_id=request_id, headers=headers, opens_session=opens_session)
    except TransportError as exc:
        raise_send_failure(link, exc, request_id)


def raise_send_failure(link: Link, exc: TransportError, request_id: RequestId | None) -> NoReturn:
    if link.closing:  # our own aclose() broke the write: not the server's doing (LC-54)
        what = f"request id {request_id}" if request_id is not None else "a notification"
        raise ClientClosed(f"the client of server '{link.label}' closed while sending {what}") from exc
    raise exc


def headers_for(
    link: Link,
    method: str,
    params: Mapping[str, object] | None,
    *,
    meta_version: str | None = None,
    handshake: bool = False,
) -> dict[str, str] | None:
    """Headers mirroring the body, for HTTP transports (HT-L08, HT-M03..HT-M09); ``None`` for
    transports that take none."""
    transport = link.transport
    if transport is None or not transport.wants_headers:
        return None
    if meta_version is not None:
        return mirrored_headers(method, params, meta_version, modern=True)
    revision = link.session.revision
    if revision is None or handshake:
        return None  # no version header on initialize itself (AMB-07)
    if revision.modern:
        spec: HeaderSpec = ()
        if method == "tools/call" and params is not None:
            spec = link.tool_headers.get(str(params.get("name")), ())
        return mirrored_headers(method, params, revision.version, modern=True, tool_headers=spec)
    if revision.at_least(V2025_06_18):
        return {"MCP-Protocol-Version": revision.version}
    return None
