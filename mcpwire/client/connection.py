"""Establishing a connection: the transport, the era, the session, and keeping them.

Theory of operation: :meth:`Connector.connect` starts the transport actor and runs the sans-I/O
:class:`~mcpwire.protocol.lifecycle.EraDetector` to a verdict: this module only performs its
actions (send the probe, send ``initialize``, restart the server, switch to HTTP+SSE) and feeds it
what comes back. Verdicts are remembered in an injected :class:`~mcpwire.client.eracache.EraCache`;
a remembered verdict that fails is dropped and detection runs again, once (LC-44).

A legacy session over HTTP lives on in :class:`~mcpwire.protocol.legacy_session.LegacySession`:
when a call finds it expired (HT-L12) or the HTTP+SSE stream reconnects (HS-04), the connector
performs the renewal the machine asks for, then restores what belonged to the old session
(HT-L13). Era parity (:meth:`Connector.cross_check_legacy`) moves a connection whose 2026-07-28
lists are hollow to the legacy era.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import msgspec
import trio

from ..actors.base import Transport
from ..actors.stdio import StdioTransport
from ..errors import (
    AuthError,
    ClientClosed,
    ConnectError,
    ConnectionBroken,
    EraDetectionError,
    FrameTooLarge,
    HTTPStatusError,
    InvalidResponse,
    MCPWireError,
    RemoteProtocolError,
    RPCError,
    ServerGone,
    TransportError,
    UnsupportedVersion,
)
from ..protocol.jsonrpc import ErrorResponse, Response
from ..protocol.legacy_session import Action, Fail, LegacySession, OpenServerStream, Resubscribe, SetLogLevel
from ..protocol.lifecycle import (
    Decided,
    EraDetector,
    Failed,
    Restart,
    SendDiscover,
    SendInitialize,
    SessionState,
    UseSSE,
)
from ..protocol.pending import PendingRequest
from ..protocol.types import META_SERVER_INFO, DiscoverResult, Implementation, InitializeResult
from ..protocol.versions import LEGACY_REVISIONS, MODERN_REVISIONS, Era, era_of
from ..redaction import redact_url
from ..transports import HttpServer, StdioServer
from .dispatch import Dispatcher
from .engine import Engine, decode
from .eracache import DEFAULT_ERA_CACHE, EraCache, HttpKind, server_key
from .groups import reraise_alone, single_exception
from .options import declared_capabilities
from .pages import LISTS
from .state import Link
from .waiters import Waiter
from .wire import headers_for, send

__all__ = ["Connector"]

log = logging.getLogger(__name__)


class Connector:
    """Connects one client and keeps its session (see the module's theory of operation).

    Args:
        link: the connection's shared state.
        sink: where transports deliver what they read (the dispatcher).
        engine: the request engine (its idempotence rule goes to HTTP transports; era parity lists
            through it).
    """

    def __init__(self, link: Link, sink: Dispatcher, engine: Engine) -> None:
        self.link = link
        self._sink = sink
        self._engine = engine
        options = link.options
        self.cache: EraCache | None = DEFAULT_ERA_CACHE if options.era_cache is True else (options.era_cache or None)
        self.http_kind: HttpKind = "streamable-http"
        #: the HTTP transport came from the cache (so a failure re-runs detection)
        self._kind_cached = False
        spec = link.spec
        if isinstance(spec, HttpServer):
            if spec.transport != "auto":
                self.http_kind = spec.transport
            elif self.cache is not None and (cached := self.cache.http_kind(spec.url)) is not None:
                self.http_kind = cached
                self._kind_cached = True
        #: the last DiscoverResult (2026-07-28)
        self.discovered: DiscoverResult | None = None
        #: an auto-detected 2026-07-28 connection whose empty lists are not yet cross-checked
        self.parity_pending = False

    @property
    def _auto(self) -> bool:
        options = self.link.options
        return options.protocol_version is None and options.era == "auto"

    def _key(self) -> tuple[object, ...]:
        return server_key(self.link.spec)

    # -- connecting ------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Starts the server and detects the era. Bounded by ``connect_timeout``."""
        link = self.link
        link.session.begin_connecting()
        mode, legacy, modern = self._detection_mode()
        cached_era = mode != link.options.era and link.options.protocol_version is None
        kind = self.http_kind if link.is_http else "stdio"
        # A cached HTTP transport that fails may fail anywhere: starting it (the 2024-11-05 GET
        # of a server that moved to Streamable HTTP answers 400) or in the handshake.
        retry_on: tuple[type[BaseException], ...] = (EraDetectionError, UnsupportedVersion)
        if self._kind_cached:
            retry_on += (HTTPStatusError, ConnectError, ConnectionBroken, ServerGone)
        try:
            await self.start_transport()
            decided = await self.detect(mode, legacy, modern)
        except retry_on as exc:
            if (not cached_era and not self._kind_cached) or isinstance(exc, AuthError):
                raise  # a 401 is a challenge, not an era signal (LC-46)
            # LC-44: "re-probing if the cached assumption later fails".
            log.info("%s: the cached verdict (%s era, %s) failed: %s; detecting again", link.label, mode, kind, exc)
            if self.cache is not None:
                self.cache.forget(self._key())
            if self._kind_cached:
                self.http_kind = "streamable-http"  # where detection starts (LC-46 step 1)
            self._kind_cached = False
            await self.restart_transport()
            decided = await self.detect(*self._detection_mode())
        await self.establish(decided)
        cache = self.cache
        self.parity_pending = (
            self._auto and decided.era is Era.MODERN and not (cache is not None and cache.parity_checked(self._key()))
        )
        if cache is not None and self._auto:
            cache.remember_era(self._key(), decided.era)
            if isinstance(link.spec, HttpServer) and link.spec.transport == "auto":
                cache.remember_http_kind(link.spec.url, self.http_kind)
        info = link.session.server_info
        log.info(
            "%s: connected, era %s, revision %s, server %s",
            link.label,
            decided.era.value,
            decided.version,
            info.name if info else "?",
        )

    def _detection_mode(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        options = self.link.options
        version = options.protocol_version
        if version is not None:
            if era_of(version) is Era.MODERN:
                return "modern", LEGACY_REVISIONS, (version,)
            return "legacy", (version,), MODERN_REVISIONS
        mode: str = options.era
        if self.link.is_http and self.http_kind == "sse":
            # HTTP+SSE belongs to 2024-11-05, but a server may answer a newer revision: offer the
            # newest first, as for any legacy server.
            return "legacy", LEGACY_REVISIONS, MODERN_REVISIONS
        if mode == "auto" and self.cache is not None:
            cached = self.cache.era(self._key())
            if cached is not None:
                mode = cached.value
        return mode, LEGACY_REVISIONS, MODERN_REVISIONS

    async def start_transport(self) -> None:
        link = self.link
        spec = link.spec
        options = link.options
        transport: Transport
        if isinstance(spec, StdioServer):
            transport = StdioTransport(spec, self._sink, max_message_bytes=options.max_message_bytes, label=link.label)
        elif self.http_kind == "sse":
            from ..actors.legacy_sse import LegacySSETransport

            transport = LegacySSETransport(
                spec,
                self._sink,
                http_client=options.http_client,
                max_message_bytes=options.max_message_bytes,
                label=link.label,
            )
        else:
            from ..actors.streamable_http import StreamableHTTPTransport

            transport = StreamableHTTPTransport(
                spec,
                self._sink,
                http_client=options.http_client,
                max_message_bytes=options.max_message_bytes,
                label=link.label,
                idempotent=self._engine.is_idempotent,
            )
        link.lost = None
        try:
            link.transport = await link.nursery.start(transport.run)
        except BaseExceptionGroup as group:
            # the actor failed before it was ready, inside its own nursery: its error, as itself
            single = single_exception(group)
            if single is group:
                raise
            reraise_alone(single)

    async def restart_transport(self, *, count: bool = True) -> None:
        link = self.link
        if count:
            link.counters.restarts += 1
        if link.transport is not None:
            await link.transport.aclose()
        for entry in link.session.table.fail_all():
            entry.waiter.outcome = ClientClosed("restarting the server")
            entry.waiter.set()
        await self.start_transport()

    # -- era detection ---------------------------------------------------------------------------------

    async def detect(
        self, mode: str, legacy: tuple[str, ...], modern: tuple[str, ...], *, sse_fallback: bool = True
    ) -> Decided:
        """Runs an :class:`EraDetector` to a verdict: performs its actions (send the probe and
        ``initialize``, restart the server, switch to HTTP+SSE) and feeds it what comes back.
        Bounded by ``connect_timeout``."""
        link = self.link
        spec = link.spec
        http_auto = isinstance(spec, HttpServer) and spec.transport == "auto" and self.http_kind != "sse"
        detector = EraDetector(mode, legacy, modern, http_ladder=http_auto and sse_fallback)
        send_channel, receive = trio.open_memory_channel[Waiter](math.inf)
        roles: dict[int, tuple[str, PendingRequest[Waiter]]] = {}
        probe_deadline: float | None = None

        async def perform(actions: list[Any]) -> Decided | None:
            nonlocal probe_deadline
            for action in actions:
                if isinstance(action, Decided):
                    return action
                if isinstance(action, Failed):
                    msg = f"cannot connect to server '{link.label}': {action.reason}"
                    if action.unsupported:
                        raise UnsupportedVersion(msg, offered=action.offered)
                    raise EraDetectionError(msg)
                if isinstance(action, Restart | UseSSE):
                    if isinstance(action, Restart):
                        log.info("%s: the server exited on the server/discover probe; restarting it", link.label)
                        await self.restart_transport()
                    else:
                        log.info("%s: initialize answered HTTP %s; trying HTTP+SSE", link.label, action.status)
                        await self._use_sse(action.status)
                    roles.clear()
                    _drain(receive)
                elif isinstance(action, SendDiscover):
                    link.session.capabilities = declared_capabilities(link.options, action.version)
                    entry = await self._send_handshake("server/discover", {}, send_channel, meta_version=action.version)
                    roles[id(entry.waiter)] = ("discover", entry)
                    if mode == "auto" and probe_deadline is None and not link.is_http:
                        probe_deadline = trio.current_time() + link.options.probe_timeout
                elif isinstance(action, SendInitialize):
                    link.session.capabilities = declared_capabilities(link.options, action.version)
                    params = link.session.initialize_params(action.version)
                    entry = await self._send_handshake("initialize", params, send_channel)
                    roles[id(entry.waiter)] = ("initialize", entry)
            return None

        with trio.move_on_after(link.options.connect_timeout) as timeout_scope:
            decided = await perform(detector.start())
            while decided is None:
                waiter: Waiter | None = None
                if probe_deadline is not None:
                    with trio.move_on_at(probe_deadline):
                        waiter = await receive.receive()
                    if waiter is None:
                        probe_deadline = None
                        decided = await perform(detector.on_probe_timeout())
                        continue
                else:
                    waiter = await receive.receive()
                role, entry = roles.pop(id(waiter))
                if role == "discover":
                    probe_deadline = None
                decided = await perform(self._handshake_outcome(detector, role, entry, waiter.outcome))
        if decided is None or timeout_scope.cancelled_caught:
            tail = link.transport.stderr_tail() if link.transport else []
            detail = "; ".join(detector.errors) or "no answer"
            raise ConnectError(
                f"server '{link.label}' did not complete the handshake within {link.options.connect_timeout:g}s "
                f"({detail})" + ("\nlast stderr lines:\n  " + "\n  ".join(tail[-10:]) if tail else "")
            )
        # Abandon whatever handshake request is still open (the other era's answer, LC-45).
        for _role, entry in roles.values():
            link.session.table.abandon(entry.id)
        return decided

    def _handshake_outcome(
        self,
        detector: EraDetector,
        role: str,
        entry: PendingRequest[Waiter],
        outcome: Response | ErrorResponse | BaseException | None,
    ) -> list[Any]:
        """Feeds one handshake answer (or failure) to the detector; raises what is no era signal."""
        label = self.link.label
        discover = role == "discover"
        if isinstance(outcome, Response):
            if not discover:
                return detector.on_initialize_result(decode(outcome.result, InitializeResult, "initialize", label))
            try:
                result = decode(outcome.result, DiscoverResult, "server/discover", label)
            except InvalidResponse as exc:
                # Some legacy servers answer any method with an empty result: that is "any other
                # answer", not a modern server (LC-41).
                return detector.on_discover_error(0, f"not a DiscoverResult ({exc})", None)
            self.discovered = result
            return detector.on_discover_result(result)
        if isinstance(outcome, ErrorResponse):
            data = outcome.data_value()
            if discover:
                return detector.on_discover_error(outcome.code, outcome.message, data)
            return detector.on_initialize_error(outcome.code, outcome.message, data)
        if isinstance(outcome, ServerGone) and isinstance(outcome.__cause__, FrameTooLarge):
            # ST-07: the connection broke on an oversized answer; the server did not exit on the
            # probe, so no LC-45 restart: name the limit.
            raise ServerGone(
                f"server '{label}' answered '{entry.method}' during the handshake with {outcome.__cause__}",
                server=label,
                returncode=outcome.returncode,
                stderr_tail=outcome.stderr_tail,
            ) from outcome.__cause__
        if isinstance(outcome, AuthError):
            raise outcome  # a challenge, not an era signal (LC-46)
        if isinstance(outcome, RemoteProtocolError):  # an answer that cannot be read
            if discover:
                return detector.on_discover_error(0, str(outcome), None)
            return detector.on_initialize_error(0, str(outcome), None)
        if isinstance(outcome, HTTPStatusError):
            if discover:
                return detector.on_discover_status(outcome.status)
            return detector.on_initialize_status(outcome.status, str(outcome))
        if isinstance(outcome, ServerGone):
            actions = detector.on_exit()
            if not actions or isinstance(actions[-1], Failed):
                raise ServerGone(
                    self._exit_during_handshake(outcome, detector),
                    server=label,
                    returncode=outcome.returncode,
                    stderr_tail=outcome.stderr_tail,
                ) from outcome
            return actions
        if isinstance(outcome, TransportError):
            raise outcome
        raise ClientClosed(f"the connection to '{label}' closed during the handshake")

    async def _use_sse(self, status: int) -> None:
        """LC-46 step 3 / HS-06: ``initialize`` said this is not Streamable HTTP; reconnect with
        the 2024-11-05 HTTP+SSE transport. Nothing answering there either is a wrong URL, and
        the error says so, naming the POST's status first (the transport that was asked for)."""
        link = self.link
        assert isinstance(link.spec, HttpServer)
        self.http_kind = "sse"
        try:
            await self.restart_transport(count=False)
        except HTTPStatusError as exc:
            if isinstance(exc, AuthError):
                raise
            raise HTTPStatusError(
                f"server '{link.label}' answered the POST of 'initialize' to {redact_url(link.spec.url)} with "
                f"HTTP {status}, and the HTTP+SSE GET with HTTP {exc.status}: no MCP endpoint answers at that URL "
                "(is the path right? Streamable HTTP servers often serve /mcp, HTTP+SSE ones /sse)",
                status=status,
                server=link.label,
                method="initialize",
            ) from exc

    def _exit_during_handshake(self, gone: ServerGone, detector: EraDetector) -> str:
        """Why connecting failed when the server exited: a server that wrote nothing at all to
        stdout crashed on start (its stderr, attached, says why), whatever it was sent."""
        link = self.link
        transport = link.transport
        if isinstance(link.spec, StdioServer) and transport is not None and transport.bytes_received == 0:
            status = f" with status {gone.returncode}" if gone.returncode is not None else ""
            again = (
                " (started twice: a restart, in case the server/discover probe had made it exit, ended the same way)"
                if detector.restarted
                else ""
            )
            return f"server '{link.label}' crashed on start: it exited{status} before answering anything{again}"
        return f"server '{link.label}' exited during the handshake" + (
            f" ({'; '.join(detector.errors)})" if detector.errors else ""
        )

    async def _send_handshake(
        self,
        method: str,
        params: Mapping[str, object],
        channel: trio.MemorySendChannel[Waiter],
        *,
        meta_version: str | None = None,
    ) -> PendingRequest[Waiter]:
        link = self.link
        waiter = Waiter(channel=channel)
        entry, payload = link.session.prepare_request(
            method, params, waiter, check=False, handshake=True, meta_version=meta_version
        )
        link.counters.requests_sent += 1
        headers = headers_for(link, method, params, meta_version=meta_version, handshake=True)
        try:
            await send(link, payload, request_id=entry.id, headers=headers, opens_session=method == "initialize")
        except TransportError as exc:
            # Deliver the failure through the same channel as answers.
            if link.session.table.resolve(entry.id) is not None:
                waiter.outcome = exc
                channel.send_nowait(waiter)
        return entry

    async def establish(self, decided: Decided, *, open_stream: bool = True) -> None:
        link = self.link
        session = link.session
        session.capabilities = declared_capabilities(link.options, decided.version)
        if decided.era is Era.MODERN:
            result = decided.discover
            assert result is not None
            info = None
            raw_info = (result.meta or {}).get(META_SERVER_INFO)
            if isinstance(raw_info, dict):
                try:
                    info = msgspec.convert(raw_info, Implementation)
                except msgspec.ValidationError:
                    info = None
            session.established(decided.version, result.capabilities, info, result.instructions)
            link.legacy = None
            if link.transport is not None:
                link.transport.negotiated(decided.version, True)
            return
        init = decided.initialize
        assert init is not None
        session.established(decided.version, init.capabilities, init.server_info, init.instructions)
        if link.is_http and link.legacy is None:
            link.legacy = LegacySession(server_stream=link.options.server_stream)
        if link.transport is not None:
            link.transport.negotiated(decided.version, False)
        # LC-03: "the client MUST send an initialized notification".
        await send(
            link,
            session.encode_notification("notifications/initialized"),
            headers=headers_for(link, "notifications/initialized", None),
        )
        if open_stream and link.options.server_stream:
            await self.open_server_stream()

    async def open_server_stream(self) -> None:
        """Legacy Streamable HTTP: the optional GET stream for server-initiated messages.

        Opened right after the handshake unless ``server_stream=False`` (then on demand: when
        notifications are iterated or a subscription starts), and waited for, so no request
        races with it.
        """
        link = self.link
        if link.legacy is not None:
            link.legacy.server_stream = True
        open_get = getattr(link.transport, "open_get_stream", None)
        if open_get is not None and link.session.state is SessionState.READY:
            await open_get()

    # -- the legacy session's life ---------------------------------------------------------------------

    async def renew(self, generation: int) -> None:
        """A call found legacy session ``generation`` gone (HT-L12): renew it, once for all the
        calls that found it gone; a call that finds it being renewed waits for that (bounded).

        Raises:
            MCPWireError: the renewal failed (the connection is then lost).
        """
        legacy = self.link.legacy
        if legacy is None:
            return
        if not legacy.lost(generation):
            with trio.move_on_after(self.link.options.connect_timeout):
                await self.link.session_ready.wait()
            return
        await self._renewal(self._begin_renewal())

    def session_lost(self, exc: BaseException) -> None:
        """HTTP+SSE reconnected with a new session (HS-04): renew it in the background; calls
        made meanwhile wait for it."""
        legacy = self.link.legacy
        if legacy is not None and legacy.lost(legacy.generation):
            self.link.nursery.start_soon(self._background_renewal, self._begin_renewal())

    def _begin_renewal(self) -> trio.Event:
        ready = trio.Event()
        self.link.session_ready = ready  # calls made from now on wait for the new session
        return ready

    async def _background_renewal(self, ready: trio.Event) -> None:
        """Its failure is data: the connection is marked lost and every later call says why,
        nothing escapes into the nursery."""
        try:
            await self._renewal(ready)
        except MCPWireError:
            pass

    async def _renewal(self, ready: trio.Event) -> None:
        """Performs :class:`Renew` and what follows it (see :class:`LegacySession`)."""
        link = self.link
        legacy = link.legacy
        assert legacy is not None
        try:
            try:
                await self._initialize_again()
            except MCPWireError as exc:
                if not link.closing:
                    self._perform_after_renewal(legacy.renewal_failed(str(exc)), exc)
                raise
            actions = legacy.renewed()
            if OpenServerStream() in actions:
                await self.open_server_stream()
        finally:
            ready.set()
        self._perform_after_renewal(actions, None)

    def _perform_after_renewal(self, actions: list[Action], cause: BaseException | None) -> None:
        link = self.link
        restore = [a for a in actions if isinstance(a, SetLogLevel | Resubscribe)]
        if restore:
            link.nursery.start_soon(self._restore_session_state, restore)
        for action in actions:
            if isinstance(action, Fail) and link.lost is None:
                gone = ServerGone(
                    f"server '{link.label}' lost its session and a new one could not be initialised: {action.reason}",
                    server=link.label,
                )
                gone.__cause__ = cause
                self._sink.connection_lost(gone)

    async def _restore_session_state(self, actions: list[SetLogLevel | Resubscribe]) -> None:
        """HT-L13: the log level and the resource subscriptions, sent again on the new session
        (in the background: the call that found the session gone is re-sent meanwhile)."""
        try:
            for action in actions:
                if isinstance(action, SetLogLevel):
                    await self._engine.answer("logging/setLevel", {"level": action.level}, timeout=None)
                elif isinstance(action, Resubscribe):
                    await self._engine.answer("resources/subscribe", {"uri": action.uri}, timeout=None)
        except MCPWireError as exc:  # data, not a crash: the subscriptions simply stay quiet
            if not self.link.closing:
                log.warning("%s: could not restore the session's state on the new session: %s", self.link.label, exc)

    async def _initialize_again(self) -> None:
        link = self.link
        revision = link.session.revision
        if revision is None or revision.modern:
            return
        log.info("%s: the session was lost; initialising a new one", link.label)
        channel, receive = trio.open_memory_channel[Waiter](1)
        params = link.session.initialize_params(revision.version)
        await self._send_handshake("initialize", params, channel)
        with trio.move_on_after(link.options.connect_timeout):
            waiter = await receive.receive()
            outcome = waiter.outcome
            if isinstance(outcome, Response):
                init = decode(outcome.result, InitializeResult, "initialize", link.label)
                if init.protocol_version != revision.version:
                    raise UnsupportedVersion(
                        f"server '{link.label}' answered the new session with {init.protocol_version!r}, "
                        f"not {revision.version!r}"
                    )
                await self.establish(Decided(Era.LEGACY, revision.version, initialize=init), open_stream=False)
                return
            if isinstance(outcome, ErrorResponse):
                raise RPCError(
                    outcome.code, outcome.message, outcome.data_value(), method="initialize", server=link.label
                )
            assert isinstance(outcome, BaseException)
            raise outcome
        raise ConnectError(f"server '{link.label}' did not answer initialize for a new session")

    # -- era parity ---------------------------------------------------------------------------------

    async def cross_check_legacy(self, listed: str, timeout: float | None) -> bool:
        """Era parity: True when this connection switched to the legacy era, so that the caller
        lists again.

        Some dual-era servers answer ``server/discover`` but serve nothing in 2026-07-28: a proxy
        whose backend connects only for handshake sessions (FastMCP 4.1's) lists no tools,
        prompts or resources there, and every one of them with a pinned legacy revision. Users
        expect the same tools in auto mode as with a legacy pin, so the first time an
        auto-detected 2026-07-28 connection lists nothing for a capability the server declares,
        the client looks at the other declared lists; when they are all empty too, it sends
        ``initialize``. A server that accepts it carries on in the legacy era, and that verdict
        is cached for the server like any era verdict (the next connection starts in the legacy
        era); a server that refuses it is a 2026-07-28 server with nothing to list, and stays as
        it was. Over stdio the server is restarted for the handshake. Once per connection, and
        once per server per process when the era cache is on; never with a pinned era or
        revision, and never while other requests or subscriptions are in flight (the check
        waits for a quieter moment).
        """
        link = self.link
        if not self.parity_pending or link.session.era is not Era.MODERN:
            return False
        if len(link.session.table) or self._sink.subscriptions:
            return False
        self.parity_pending = False
        caps = link.session.server_capabilities
        others = [
            (m, kind, key) for m, (cap, kind, key) in LISTS.items() if m != listed and getattr(caps, cap) is not None
        ]
        for method, kind, key in others:
            if await self._engine.pages(method, kind, key, timeout):
                self._parity_checked()
                return False  # it serves this era: it simply has none of what was listed
        return await self._switch_to_legacy(listed)

    def _parity_checked(self) -> None:
        if self.cache is not None:
            self.cache.mark_parity_checked(self._key())

    async def _switch_to_legacy(self, listed: str) -> bool:
        """Sends ``initialize`` (over stdio to a restarted server, over HTTP as a new session); on
        success the connection goes on in the legacy era. Calls made meanwhile wait for the
        outcome (bounded)."""
        link = self.link
        session = link.session
        revision = session.revision
        assert revision is not None
        saved = (revision.version, session.server_capabilities, session.server_info, session.instructions)
        ready = self._begin_renewal()
        session.begin_connecting()
        try:
            try:
                if isinstance(link.spec, StdioServer):
                    # A fresh process: a stdio server may refuse a handshake on a connection that
                    # already served 2026-07-28 requests (FastMCP's does, with -32022).
                    await self.restart_transport()
                elif link.transport is not None:
                    link.transport.negotiated(LEGACY_REVISIONS[0], False)  # its answer opens a session
                decided = await self.detect("legacy", LEGACY_REVISIONS, MODERN_REVISIONS, sse_fallback=False)
            except (RemoteProtocolError, TransportError) as exc:
                if isinstance(exc, ServerGone) or link.lost is not None:
                    session.state = SessionState.CLOSED  # the connection died meanwhile
                    self._sink.connection_lost(exc)
                    raise
                log.debug("%s: no legacy session to compare with: %s", link.label, exc)
                session.capabilities = declared_capabilities(link.options, saved[0])
                session.established(*saved)
                if link.transport is not None:
                    link.transport.negotiated(saved[0], True)
                self._parity_checked()
                return False
            await self.establish(decided)
        finally:
            ready.set()
        log.info(
            "%s: the server listed nothing for '%s' in %s but accepts %s; using the legacy era",
            link.label,
            listed,
            saved[0],
            decided.version,
        )
        if self.cache is not None:
            self.cache.remember_era(self._key(), Era.LEGACY)
        return True


def _drain(channel: trio.MemoryReceiveChannel[Waiter]) -> None:
    """Drops what a channel holds (the failed waiters of a connection that was replaced)."""
    while True:
        try:
            channel.receive_nowait()
        except trio.WouldBlock:
            return
