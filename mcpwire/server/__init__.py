"""The server side of MCP on trio: both eras, stdio and Streamable HTTP (+ HTTP+SSE).

- :class:`Server` (:mod:`.core`): what is served: identity, capabilities, method handlers,
  and the broadcasts (list changes, resource updates) every connected client may want.
- :class:`RequestContext` (:mod:`.context`): one request as its handler sees it: era,
  revision, client capabilities, progress, logging, server-to-client requests, cancellation.
- :class:`Connection` (:mod:`.connection`): one peer: admission by era, the legacy session,
  dispatch, cancellation, 2025-03-26 batches, ``server/discover``, ``subscriptions/listen``.
- :func:`serve_stdio` (:mod:`.stdio`), :class:`StreamableHTTPApp` (:mod:`.asgi`, an ASGI
  app: sessions, SSE response streams, resumability) and :func:`serve_http` (:mod:`.http`:
  the built-in HTTP/1.1 server of :mod:`.http1server`, or hypercorn's trio worker).

The sans-I/O rules (classification, ``_meta`` admission, version negotiation, the 2026-07-28
HTTP header checks) are :mod:`mcpwire.protocol.serving`.
"""

from .connection import Connection
from .context import ClientRequestError, RequestContext
from .core import EraMode, InputRequired, JSONObject, Listen, Notify, Outlet, RequestError, Server
from .stdio import serve_stdio
from .streamable_app import LOOPBACK_HOSTS, StreamableHTTPApp
from .streams import EventStream

__all__ = [
    "LOOPBACK_HOSTS",
    "ClientRequestError",
    "Connection",
    "EraMode",
    "EventStream",
    "InputRequired",
    "JSONObject",
    "Listen",
    "Notify",
    "Outlet",
    "RequestContext",
    "RequestError",
    "Server",
    "StreamableHTTPApp",
    "serve_http",
    "serve_stdio",
]


def __getattr__(name: str) -> object:
    if name == "serve_http":  # imports the server (or hypercorn): only when serving HTTP
        from .http import serve_http

        return serve_http
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
