"""The one ASGI middleware in front of every endpoint (the API, ``/events``, ``/mcp``, the probes).

Theory of operation, in the order a request meets it:

1. A trace id is taken from ``traceparent`` (W3C: its 32-hex trace id) or ``X-Trace-ID`` (when it
   is a sane token), or made; it goes into ``scope["state"]`` (with the caller's address) for the
   handlers and the gateway, into a context variable for log lines, and onto the response.
2. DNS rebinding: the ``Host`` header must name this machine (loopback names, the bound address,
   or ``allowed_hosts``) when the service listens on loopback; an ``Origin`` must be the page's
   own origin or one of ``cors_origins``. Refusals are 403 problems.
3. CORS, only for configured origins (preflights answered here).
4. Who is calling (:mod:`.identity`): a bearer credential (the service's admin token, a named
   token of the store, or a JWT of the configured identity provider) on everything but the public
   operations and the console (which has its own sessions); no credential or a bad one is a 401.
   The identity goes into ``scope["state"]``; a path that needs more than its role is a 403
   (the API's operations check their own role).
5. The body limit: ``Content-Length`` over it is a 413 at once; a chunked body is counted as it
   is read.
6. The per-client rate limit on calls (a token bucket per address; a JSON-RPC batch costs one
   token per request it carries, taken by the gateway): 429 with ``Retry-After``.
7. Durability: the response (and every later chunk of a streamed one) waits until the audit
   records written so far are committed, so nothing acknowledged can be lost.

Every response gets ``X-Trace-ID`` and ``X-Process-Time``; one access-log line per request
names method, path (terminal-safe), status, time and trace id.
"""

from __future__ import annotations

import contextvars
import logging
import math
import random
import re
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ..redaction import clean_terminal, shorten
from .identity import LOCAL, Authenticator, Identity, Role
from .problems import Problem, ProblemError
from .settings import LOOPBACK_NAMES, Settings, is_loopback

__all__ = [
    "TRACE_ID",
    "forbidden",
    "BodyTooLarge",
    "RateLimiter",
    "ServiceMiddleware",
    "TraceFilter",
    "current_trace_id",
]

log = logging.getLogger("mcpwire.service.access")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the current request's trace id, for log lines (see :class:`TraceFilter`). Log lines only: a
#: logging filter is handed a record and nothing else, so the id can reach it no other way. Calls
#: carry their trace id, caller and client as arguments (the gateway's ``context=``, ``relay=``).
TRACE_ID: Final[contextvars.ContextVar[str | None]] = contextvars.ContextVar("mcpwire_trace_id", default=None)
_TRACEPARENT: Final = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}\Z")
_TRACE_TOKEN: Final = re.compile(r"^[A-Za-z0-9._:-]{1,128}\Z")
_ZERO_TRACE: Final = "0" * 32
_encode = msgspec.json.Encoder().encode

CORS_REQUEST_HEADERS: Final = (
    "authorization, content-type, last-event-id, mcp-session-id, mcp-protocol-version, traceparent, x-trace-id"
)
CORS_EXPOSED_HEADERS: Final = "location, retry-after, x-trace-id, x-process-time, mcp-session-id"


def current_trace_id() -> str | None:
    return TRACE_ID.get()


class TraceFilter(logging.Filter):
    """Adds ``record.trace_id`` (``-`` outside a request) so formats can show it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = TRACE_ID.get() or "-"
        return True


def forbidden(identity: Identity, needed: Role) -> str:
    """The words of a 403: what the request needs and what the caller is."""
    return f"this needs the {needed.label} role; {identity.describe()} is a {identity.role.label}"


class BodyTooLarge(ProblemError):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


def trace_id_from(headers: dict[bytes, bytes]) -> str:
    """The incoming trace id, or a new one (32 lowercase hex digits, like W3C trace context)."""
    parent = headers.get(b"traceparent")
    if parent is not None:
        match = _TRACEPARENT.match(parent.decode("latin-1").strip().lower())
        if match and match.group(1) != _ZERO_TRACE:
            return match.group(1)
    given = headers.get(b"x-trace-id")
    if given is not None:
        text = given.decode("latin-1").strip()
        if _TRACE_TOKEN.match(text):
            return text
    # a trace id names a request and grants nothing, so the fast generator will do (the secrets
    # module's generator costs a system call per request)
    trace = random.getrandbits(128)
    return f"{trace or 1:032x}"  # (W3C: never all zeros)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class RateLimiter:
    """Token buckets per client: ``rate`` tokens a second, at most ``burst`` saved up.

    At most ``clients`` buckets are kept (the least recently used go first), so memory is
    bounded whoever calls.
    """

    rate: float
    burst: int
    clients: int = 10_000
    clock: Callable[[], float] = time.monotonic
    limited: int = 0
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, client: str, cost: int = 1) -> float | None:
        """Takes ``cost`` tokens; ``None`` when allowed, else the seconds until they are there
        (a cost over the burst can never be paid: it waits as long as a full bucket takes)."""
        if not self.enabled:
            return None
        now = self.clock()
        bucket = self._buckets.pop(client, None)
        if bucket is None:
            bucket = _Bucket(tokens=float(self.burst), stamp=now)
        else:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
        self._buckets[client] = bucket
        while len(self._buckets) > self.clients:
            self._buckets.popitem(last=False)
        if bucket.tokens >= cost:
            bucket.tokens -= cost
            return None
        self.limited += 1
        return (min(float(cost), float(self.burst)) - bucket.tokens) / self.rate


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end > 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class ServiceMiddleware:
    """See the module's theory of operation.

    Args:
        app: the app behind it.
        settings: limits, token, allowed hosts and origins.
        is_public: ``(method, path)`` that need no token.
        is_call: ``(method, path)`` that count against the rate limit.
        authenticator: bearer credentials to identities.
        path_role: the role ``(method, path)`` needs, or None where the handler checks it (the
            API's operations).
        barrier: waits until what was audited so far is durable; returns False when it cannot.
            Told whether other requests are under way (their records may share its commit).
        observe: ``(method, path, status, seconds)`` once per response, for metrics.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        is_public: Callable[[str, str], bool],
        is_call: Callable[[str, str], bool],
        limiter: RateLimiter,
        authenticator: Authenticator | None = None,
        path_role: Callable[[str, str], Role | None] | None = None,
        barrier: Callable[[bool], Awaitable[bool]] | None = None,
        observe: Callable[[str, str, int, float], None] | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.is_public = is_public
        self.is_call = is_call
        self.limiter = limiter
        self.authenticator = authenticator or Authenticator(settings.token, None)
        self.path_role = path_role or (lambda method, path: None)
        self.barrier = barrier
        #: HTTP requests under way, event streams (GET) aside
        self.active = 0
        self.observe = observe
        self.loopback = is_loopback(settings.host)
        names = {h.lower() for h in settings.allowed_hosts}
        if settings.host not in ("0.0.0.0", "::", ""):
            names.add(settings.host.lower())
            if ":" in settings.host and not settings.host.startswith("["):
                names.add(f"[{settings.host.lower()}]")
        self.any_host = "*" in names or (not self.loopback and not settings.allowed_hosts)
        self.host_names = frozenset(names | LOOPBACK_NAMES)
        #: Host header -> allowed, for the headers seen last
        self._hosts: dict[bytes, bool] = {}
        #: (method, path) -> public, role needed, a call: what the callables above say, kept for
        #: the paths seen last (their answers are fixed once the app is built)
        self._rules: dict[tuple[str, str], tuple[bool, Role | None, bool]] = {}
        self.cors = frozenset(settings.cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        began = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        trace_id = trace_id_from(headers)
        client = scope.get("client")
        address = client[0] if client else "unknown"
        state = scope.setdefault("state", {})
        state["trace_id"] = trace_id
        state["caller"] = state["address"] = address
        token = TRACE_ID.set(trace_id)
        origin = headers.get(b"origin", b"").decode("latin-1")
        response = _Response(self, scope, send, trace_id, began, origin if origin and origin in self.cors else None)
        # a GET is an event stream, open as long as its client likes: counted, it would make
        # every barrier wait for other calls that are not there
        counted = scope.get("method") != "GET"
        self.active += counted  # (taken back in the finally below: no count is left behind)
        try:
            if not scope.get("path", "").startswith("/"):
                # RFC 9110 §9.3.7: "OPTIONS *" asks about the server itself; no other method has
                # an asterisk-form target (RFC 9112 §3.2.4)
                await self._asterisk(response.send, scope, trace_id, began)
                return
            refusal = self._refuse(scope, headers, origin)
            if refusal is None:
                refusal = await self._identify(scope, headers, state, address)
            if refusal is None:
                refusal = self._limit(scope, address)
            if refusal is not None:
                await self._problem(response.send, scope, trace_id, began, *refusal)
                response.status = refusal[0]
            elif (
                response.cors_origin is not None
                and scope["method"] == "OPTIONS"
                and b"access-control-request-method" in headers
            ):
                await self._preflight(response.send)
            else:
                try:
                    await self.app(scope, self._limited(receive, headers), response.send)
                except BodyTooLarge as exc:
                    if response.started:
                        raise
                    await self._problem(response.send, scope, trace_id, began, exc.status, exc.detail)
        finally:
            self.active -= counted
            self._done(scope, state["caller"], response.status, time.perf_counter() - began, trace_id)
            TRACE_ID.reset(token)

    async def _asterisk(self, send: Send, scope: Scope, trace_id: str, began: float) -> None:
        """The answer to a request whose target is not a path: ``OPTIONS *`` learns the methods
        this service answers; anything else is a bad request."""
        if scope["method"] == "OPTIONS":
            headers = [(b"allow", b"GET, HEAD, POST, PATCH, DELETE, OPTIONS"), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
        else:
            await self._problem(send, scope, trace_id, began, 400, "the request target must be a path")

    @staticmethod
    async def _preflight(send: Send) -> None:
        """The answer to a CORS preflight from a configured origin."""
        await send(
            {
                "type": "http.response.start",
                "status": 204,
                "headers": [
                    (b"access-control-allow-methods", b"GET, POST, PATCH, DELETE, OPTIONS"),
                    (b"access-control-allow-headers", CORS_REQUEST_HEADERS.encode()),
                    (b"access-control-max-age", b"600"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    def _done(self, scope: Scope, caller: str, status: int, elapsed: float, trace_id: str) -> None:
        """Metrics and the access-log line of one request."""
        path = scope.get("path", "")
        if self.observe is not None:
            self.observe(scope["method"], path, status, elapsed)
        if log.isEnabledFor(logging.INFO):
            log.info(
                '%s "%s %s" %d %.1fms trace=%s',
                caller,
                scope["method"],
                clean_terminal(shorten(path, 200), newlines=False),
                status,
                elapsed * 1000,
                trace_id,
            )

    async def _identify(
        self, scope: Scope, headers: dict[bytes, bytes], state: dict[str, Any], address: str
    ) -> tuple[int, str, dict[str, str]] | None:
        """Who is calling (into ``state``), or why they may not."""
        method: str = scope["method"]
        public, needed, _ = self._rule(method, scope.get("path", ""))
        if public:
            return None
        if method == "OPTIONS" and headers.get(b"origin", b"").decode("latin-1") in self.cors:
            return None  # a CORS preflight carries no credentials
        identity: Identity | None = LOCAL
        if self.authenticator.required:
            given = headers.get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            identity = None
            if scheme.lower() == b"bearer":
                credential = value.strip().decode("latin-1")
                identity = self.authenticator.admin_of(credential) or await self.authenticator.identify(credential)
            if identity is None:
                what = "a token it does not accept" if given else "no token"
                return (
                    401,
                    f"this endpoint needs a token as 'Authorization: Bearer ...'; got {what}",
                    {"WWW-Authenticate": self.authenticator.challenge(presented=bool(given))},
                )
            state["caller"] = f"{address} {identity.describe()}"
        state["identity"] = identity
        assert identity is not None
        if needed is not None and not identity.may(needed):
            return 403, forbidden(identity, needed), {}
        return None

    def _limit(self, scope: Scope, address: str) -> tuple[int, str, dict[str, str]] | None:
        """The per-address rate limit on calls (an HTTP request is one; a batch pays the rest)."""
        if self.limiter.enabled and self._rule(scope["method"], scope.get("path", ""))[2]:
            wait = self.limiter.take(address)
            if wait is not None:
                seconds = max(1, math.ceil(wait))
                return 429, f"too many calls from {address}; retry in {seconds} s", {"Retry-After": str(seconds)}
        return None

    def _rule(self, method: str, path: str) -> tuple[bool, Role | None, bool]:
        """Whether ``(method, path)`` is public, the role it needs, and whether it is a call."""
        key = (method, path)
        rule = self._rules.get(key)
        if rule is None:
            rule = (self.is_public(method, path), self.path_role(method, path), self.is_call(method, path))
            if len(path) <= 256:
                if len(self._rules) >= 256:
                    self._rules.clear()
                self._rules[key] = rule
        return rule

    def _host_allowed(self, raw: bytes) -> bool:
        """Whether a ``Host`` header names this machine (the last verdicts are kept: a client
        sends the same one on every request)."""
        allowed = self._hosts.get(raw)
        if allowed is None:
            allowed = _host_name(raw.decode("latin-1")) in self.host_names
            if len(raw) <= 256:
                if len(self._hosts) >= 64:
                    self._hosts.clear()
                self._hosts[raw] = allowed
        return allowed

    def _refuse(self, scope: Scope, headers: dict[bytes, bytes], origin: str) -> tuple[int, str, dict[str, str]] | None:
        method: str = scope["method"]
        raw_host = headers.get(b"host", b"")
        if raw_host and not self.any_host and not self._host_allowed(raw_host):
            host = raw_host.decode("latin-1")
            return 403, f"the Host header {shorten(host, 100)!r} is not allowed here (DNS rebinding protection)", {}
        if origin and origin not in self.cors:
            host = raw_host.decode("latin-1")
            parsed = urllib.parse.urlsplit(origin)
            same = parsed.scheme in ("http", "https") and parsed.netloc.lower() == host.lower() and bool(host)
            if not same:
                return 403, f"requests from the origin {shorten(origin, 100)!r} are not allowed", {}
        if method == "OPTIONS" and origin in self.cors:
            return None
        length = headers.get(b"content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                return 400, "the Content-Length header is not a number", {}
            if size > self.settings.max_body_bytes:
                return 413, f"the request body is larger than {self.settings.max_body_bytes} bytes", {}
        return None

    def _limited(self, receive: Receive, headers: Mapping[bytes, bytes]) -> Receive:
        """``receive``, counting the body when its size is not known to be within the limit: a
        ``Content-Length`` (checked by :meth:`_refuse`) bounds it, as the HTTP server frames the
        body by it, unless ``Transfer-Encoding`` is there too."""
        if b"content-length" in headers and b"transfer-encoding" not in headers:
            return receive
        limit = self.settings.max_body_bytes
        seen = 0

        async def wrapped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        return wrapped

    async def _problem(
        self,
        send: Send,
        scope: Scope,
        trace_id: str,
        began: float,
        status: int,
        detail: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        exc = ProblemError(status, detail)
        body = _encode(
            Problem(title=exc.title, status=status, detail=detail, instance=scope.get("path"), trace_id=trace_id)
        )
        raw: Iterable[tuple[bytes, bytes]] = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": list(raw)})
        await send({"type": "http.response.body", "body": body})


class _Response:
    """The response side of one request: adds the service's headers to its start, and holds
    every part of it until the audit records written so far are durable (see the module's
    theory of operation, step 7)."""

    __slots__ = ("_send", "began", "cors_origin", "middleware", "scope", "started", "status", "swallow", "trace_id")

    def __init__(
        self,
        middleware: ServiceMiddleware,
        scope: Scope,
        send: Send,
        trace_id: str,
        began: float,
        cors_origin: str | None,
    ) -> None:
        self.middleware = middleware
        self.scope = scope
        self._send = send
        self.trace_id = trace_id
        self.began = began
        self.cors_origin = cors_origin
        self.status = 0
        self.started = False
        #: the audit barrier failed at the start: a 503 went out instead, the app's response is dropped
        self.swallow = False

    async def send(self, message: Message) -> None:
        if self.swallow:
            return
        barrier = self.middleware.barrier
        if message["type"] == "http.response.start":
            if barrier is not None and not await barrier(self.middleware.active > 1):
                self.swallow = True
                process_time = f"{time.perf_counter() - self.began:.6f}"
                await self.middleware._problem(
                    self._send,
                    self.scope,
                    self.trace_id,
                    self.began,
                    503,
                    "the audit record of this request could not be stored",
                    {"X-Trace-ID": self.trace_id, "X-Process-Time": process_time},
                )
                return
            self.status = message["status"]
            self.started = True
            extra = [
                (b"x-trace-id", self.trace_id.encode()),
                (b"x-process-time", f"{time.perf_counter() - self.began:.6f}".encode()),
            ]
            if self.cors_origin is not None:
                extra += [
                    (b"access-control-allow-origin", self.cors_origin.encode()),
                    (b"access-control-expose-headers", CORS_EXPOSED_HEADERS.encode()),
                    (b"vary", b"Origin"),
                ]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        elif (
            message["type"] == "http.response.body"
            and barrier is not None
            and message.get("body")
            and not await barrier(self.middleware.active > 1)
        ):
            raise RuntimeError("audit records could not be stored; the response is abandoned")
        await self._send(message)
