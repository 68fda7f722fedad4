"""The gateway's relay between its clients and the backends: calls, questions, requestStates.

Theory of operation: a backend may need its client while a call runs: ``sampling/createMessage``,
``elicitation/create`` and ``roots/list`` (server-to-client requests in the legacy era, input
requests of an ``input_required`` result in 2026-07-28), and the host's approval policy may need
a decision ("ask"). The host's connections are the backends' clients. Every gateway call is a
:class:`Pending` and names its client explicitly on its way down (:meth:`GatewayRelay.relay_for`
gives the host's call a :class:`~mcpwire.client.relay.Relay`, which the host's policies pass to
the connection's request), and gets an approver of its own; both end in :meth:`GatewayRelay.ask`,
which puts the question to that call's client:

- a 2026-07-28 backend's input requests belong to the request they answer, so the connection
  hands them to that request's relay: the call is known;
- a legacy backend asks with a request of its own, read by the connection's task and naming no
  call, so it comes through the forwarding handlers every connection gets
  (:meth:`GatewayRelay.client_options`, through ``Host.client_options_for``) and goes to the one
  call to that backend in flight (with several, the gateway cannot tell which and the backend
  gets an error). The same handlers refuse a 2026-07-28 backend's questions for a call that is
  not the gateway's (the service's API, an agent's run): no MCP client waits for those;
- a legacy gateway client is asked with a server-to-client request on its session;
- a 2026-07-28 gateway client cannot be asked mid-request: the call is a :class:`Pending` that
  runs in the gateway's own nursery, and when it needs input the gateway answers the client's
  request with ``input_required`` (one input request, and a ``requestState`` signed by the
  gateway that names the pending call and the round). The client's retry carries the answer in
  ``inputResponses``; :meth:`GatewayRelay.resume` verifies the state, hands the answer to the waiting
  question and waits for what comes next (the result, or the next question). A call waits for
  its retry at most ``input_timeout`` seconds; then it is cancelled. Pending calls live in one
  process: behind a load balancer a retry must reach the same instance (as legacy sessions do).

When the gateway's client and the backend both speak 2026-07-28, a tool call's input rounds are
not the gateway's: the call is relayed (:mod:`mcpwire.client.relay`), so the backend sees the
client's own capabilities and inputResponses, and its ``input_required`` result reaches the client
as the backend sent it (its keys, every request in one round). Only its ``requestState`` is wrapped
(:meth:`GatewayRelay.wrap_state`): signed with the server's name, so that the retry goes back to the
backend that issued it and a forged one reaches no other.

A question the gateway's client cannot answer (it did not declare the capability, the era does
not allow it, nobody is asking) fails cleanly: the backend gets a JSON-RPC error naming why.

The approval policy's "ask" is not the client's to answer: someone other than the caller decides
(the console, the API). Only where a tool's approval setting is ``ask-caller`` is the client's
user asked too, through elicitation (:meth:`GatewayRelay.approver`). While a call waits for a decision,
:class:`GatewayCaller` tells the policy whether its client still waits: a cancelled request
(``notifications/cancelled``; in 2026-07-28 a closed response stream), an ended legacy session, or
a legacy stream left unread longer than the grace (the client may resume it with
``Last-Event-ID`` meanwhile: 2025-11-25 basic/transports, "Disconnection MAY occur at any time
... it SHOULD NOT be interpreted as the client cancelling its request") abandon the approval.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar, cast

import trio

from ..client.relay import Relay, RelayedRound
from ..errors import RPCError
from ..host.config import ServerConfig
from ..host.policies import ApprovalRequest
from ..protocol.serving import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY
from ..protocol.types import JSONObject as WireObject
from ..protocol.versions import V2025_06_18, V2025_11_25
from ..server import ClientRequestError, InputRequired, JSONObject, RequestContext, RequestError

__all__ = [
    "DEFAULT_CALLER_GRACE",
    "DEFAULT_INPUT_TIMEOUT",
    "GatewayCaller",
    "GatewayRelay",
    "Pending",
    "Unanswerable",
    "b64",
    "unb64",
]

log = logging.getLogger("mcpwire.service.gateway")
T = TypeVar("T")

#: Seconds a call waits for its client's answer (a legacy request, or a 2026-07-28 retry).
DEFAULT_INPUT_TIMEOUT: Final = 300.0
#: Seconds a legacy client may stay disconnected from a call waiting for approval before the
#: approval is abandoned (it resumes the call's stream within them to keep it).
DEFAULT_CALLER_GRACE: Final = 30.0
#: Seconds a legacy request's stream must stay unread to count as its client being away (its
#: response starts a moment after the request: it waits for a quick answer first).
AWAY_AFTER: Final = 1.0
#: Calls waiting for a 2026-07-28 retry at once; the oldest is cancelled to make room.
MAX_PENDING: Final = 1000
#: the client capability each question needs
_NEEDS: Final = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
#: the prefix of a backend's requestState wrapped by the gateway (a pending call's has none)
_RELAYED: Final = "relayed."


class Unanswerable(RPCError):
    """A backend's question the gateway's client cannot answer (the backend gets this error)."""


@dataclass(slots=True, eq=False)
class _Question:
    key: str
    request: JSONObject
    answered: trio.Event = field(default_factory=trio.Event)
    answer: object = None


@dataclass(slots=True, eq=False)
class Pending:
    """One gateway call on its way through the host, and the gateway request it answers now."""

    id: str
    server: str
    context: RequestContext
    rounds: int = 0
    question: _Question | None = None
    done: bool = False
    outcome: object = None
    error: BaseException | None = None
    #: set when the call ends or asks (made when someone waits for that: see :meth:`changes`)
    changed: trio.Event | None = None
    #: the call's own scope, when it runs in the gateway's nursery
    scope: trio.CancelScope | None = None
    #: the answer to the gateway's client instead of the call's outcome (a capability it lacks)
    refusal: RequestError | None = None
    expires: float = 0.0
    #: the backend's log messages for this call's client, waiting to be relayed (in order)
    logs: list[JSONObject] = field(default_factory=list)
    #: held while the logs are relayed (made by the first relaying: most calls log nothing)
    log_lock: trio.Lock | None = None
    #: why the client stopped waiting for the call (a 2026-07-28 stream closed), once it did
    gone: str | None = None

    def changes(self) -> trio.Event:
        """What is set when the call next ends or asks."""
        if self.changed is None:
            self.changed = trio.Event()
        return self.changed

    def cancel(self) -> None:
        """Cancels a call that runs in the gateway's nursery."""
        if self.scope is not None:
            self.scope.cancel()

    def _wake(self) -> None:
        if self.changed is not None:
            self.changed.set()
            self.changed = None


class GatewayRelay:
    """The gateway's calls, and the questions of backends put to the gateway's clients.

    Args:
        nursery: where calls of 2026-07-28 clients run (they outlive the request that started
            them while they wait for input); a callable, so that it can be late-bound.
        input_timeout: seconds a call waits for its client's answer.
        caller_grace: seconds a legacy client may stay away from a call waiting for approval.
        era_of: the era a backend's connection speaks now (``"modern"`` for 2026-07-28).
    """

    def __init__(
        self,
        nursery: Callable[[], Awaitable[trio.Nursery]],
        *,
        input_timeout: float = DEFAULT_INPUT_TIMEOUT,
        caller_grace: float = DEFAULT_CALLER_GRACE,
        era_of: Callable[[str], str | None] = lambda server: None,
    ) -> None:
        if not caller_grace >= 0:
            raise ValueError(f"caller_grace must be a number of seconds >= 0, not {caller_grace!r}")
        self._nursery = nursery
        self._era_of = era_of
        self.input_timeout = input_timeout
        self.caller_grace = caller_grace
        self._key = secrets.token_bytes(32)
        self._by_server: dict[str, set[Pending]] = {}
        self._parked: dict[str, Pending] = {}
        self._serial = itertools.count(1)

    # -- running calls ------------------------------------------------------------------------------

    async def call(self, context: RequestContext, server: str, work: Callable[[Pending], Awaitable[T]]) -> T:
        """Run ``work`` for the gateway request ``context``; its questions go to that client.

        A legacy request runs the work in its own task. A 2026-07-28 request runs it in the
        gateway's nursery and raises :class:`InputRequired` when it needs input (the retry
        continues it through :meth:`resume`).

        Cancellation: cancelling the request cancels the work, unless it waits for input.
        """
        if context.modern:
            _ = context.input_responses  # "malformed input is a protocol error" (-32602), even unasked
        if not context.modern or not context.client_capabilities or not any(_can_ask(context, m) for m in _NEEDS):
            # a legacy client is asked on its session; a 2026-07-28 client that can answer
            # nothing is never asked, so its call cannot wait for a retry: both run here. Such a
            # call is never parked, so its id never reaches a requestState: a serial number does
            # (no random bytes from the system per call).
            pending = Pending(f"call-{next(self._serial)}", server, context)
            self._by_server.setdefault(server, set()).add(pending)
            try:
                outcome = await work(pending)
            except Exception:
                if pending.refusal is not None:
                    raise pending.refusal from None
                raise
            finally:
                self._by_server[server].discard(pending)
            if pending.refusal is not None:
                raise pending.refusal
            return outcome
        pending = Pending(secrets.token_urlsafe(16), server, context, scope=trio.CancelScope())
        nursery = await self._nursery()
        nursery.start_soon(self._run, pending, work)
        return await self._follow(pending)  # type: ignore[return-value]

    async def resume(self, context: RequestContext) -> object:
        """Continue the pending call named by the retry's ``requestState``.

        Raises:
            RequestError: -32602 for a state that does not verify, names no pending call (it
                expired, or another instance holds it), or comes with an answer of the wrong shape.
            InputRequired: the call needs more input (or this retry lacked the answer).
        """
        pending = self._verify(context.params.get("requestState"))
        question = pending.question
        assert question is not None  # parked calls always wait on a question
        pending.context = context
        responses = context.input_responses
        if question.key in responses:
            answer = responses[question.key]
            if not _fits(str(question.request["method"]), answer):
                raise RequestError(
                    INVALID_PARAMS,
                    f"Invalid params: inputResponses[{question.key!r}] is not a valid "
                    f"{question.request['method']} result",
                )
            del self._parked[pending.id]
            question.answer = answer
            question.answered.set()
        return await self._follow(pending)

    async def _run(self, pending: Pending, work: Callable[[Pending], Awaitable[object]]) -> None:
        self._by_server.setdefault(pending.server, set()).add(pending)
        scope = pending.scope
        assert scope is not None  # (made with it by call)
        with scope:
            try:
                pending.outcome = await work(pending)
            except Exception as exc:
                pending.error = exc
        self._by_server[pending.server].discard(pending)
        self._parked.pop(pending.id, None)
        if scope.cancelled_caught and pending.error is None:
            pending.error = RequestError(INTERNAL_ERROR, "the call was cancelled while it waited for input")
        pending.done = True
        pending._wake()

    async def _follow(self, pending: Pending) -> object:
        """Wait until the call ends or asks; cancelled (the client went away), cancel the call
        unless it is waiting for a retry."""
        try:
            while not pending.done and pending.id not in self._parked:
                await pending.changes().wait()
        except trio.Cancelled:
            if not pending.done and pending.id not in self._parked:
                pending.gone = pending.gone or _STREAM_CLOSED
                pending.cancel()
            raise
        if pending.done:
            if pending.refusal is not None:
                raise pending.refusal
            if pending.error is not None:
                raise pending.error
            return pending.outcome
        question = pending.question
        assert question is not None
        raise InputRequired({question.key: question.request}, self._sign(pending))

    # -- questions --------------------------------------------------------------------------------

    def relay_for(self, pending: Pending, round_: RelayedRound | None = None) -> Relay:
        """The call's client, for the host's call (see :mod:`mcpwire.client.relay`): its own
        2026-07-28 round when the backend speaks 2026-07-28 too (``round_``), and who answers the
        backend's input requests otherwise (this call's client, through :meth:`ask`)."""

        async def ask(method: str, params: WireObject) -> WireObject:
            answer = await self.ask(pending.server, method, dict(params), pending=pending)
            return cast(WireObject, answer)  # the client's answer, JSON as it came

        return Relay(round=round_, ask=ask)

    def client_options(self, config: ServerConfig) -> Mapping[str, object]:
        """The forwarding handlers for the host's connection to one server: a legacy backend's
        requests (its 2026-07-28 input requests come through each call's relay instead)."""
        server = config.name

        async def sampling(params: JSONObject) -> JSONObject:
            return await self._forward(server, "sampling/createMessage", params)

        async def elicitation(params: JSONObject) -> JSONObject:
            return await self._forward(server, "elicitation/create", params)

        async def roots() -> list[JSONObject]:
            result = await self._forward(server, "roots/list", {})
            listed = result.get("roots")
            return [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []

        return {"sampling": sampling, "elicitation": elicitation, "roots": roots}

    def caller(self, pending: Pending) -> GatewayCaller:
        """The call's client as its approval follows it."""
        return GatewayCaller(pending, self.caller_grace)

    def approver(self, pending: Pending) -> Callable[[ApprovalRequest], Awaitable[bool | Mapping[str, object]]] | None:
        """An approver that asks the call's client (an elicitation), when its client can answer
        one; the host asks it only where the tool's approval setting is ``ask-caller``."""
        if not _can_ask(pending.context, "elicitation/create"):
            return None

        async def approve(request: ApprovalRequest) -> bool:
            shown = ", ".join(f"{k}={v!r}" for k, v in list(request.arguments.items())[:8])
            step = (
                f" (confirmation {request.confirmation} of {request.confirmations_needed})"
                if request.confirmations_needed > 1
                else ""
            )
            params: JSONObject = {
                "message": f"Allow the tool {request.tool!r} on server {request.server!r} ({request.risk.name} risk: "
                f"{request.reason}) with {shown or 'no arguments'}?{step}",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"approve": {"type": "boolean", "title": "Approve", "default": False}},
                    "required": ["approve"],
                },
            }
            answer = await self.ask(pending.server, "elicitation/create", params, pending=pending)
            content = answer.get("content")
            return answer.get("action") == "accept" and isinstance(content, dict) and content.get("approve") is True

        return approve

    async def _forward(self, server: str, method: str, params: JSONObject) -> JSONObject:
        """A question that came through a connection's handlers, not a call's relay: a legacy
        backend's request goes to the one call to it in flight; a 2026-07-28 backend's belongs
        to a call the gateway did not make (no client of the gateway can answer it).

        Raises:
            RPCError: nobody can answer it (the backend gets this error).
        """
        if self._era_of(server) == "modern":
            raise Unanswerable(
                METHOD_NOT_FOUND,
                f"the gateway has no client to ask '{method}' for: the call asking it did not come from "
                "one of the gateway's MCP clients",
            )
        return await self.ask(server, method, params, pending=self._only(server), guessed=True)

    async def ask(
        self, server: str, method: str, params: JSONObject, *, pending: Pending | None, guessed: bool = False
    ) -> JSONObject:
        """Put a backend's question to the client of the call it belongs to (``pending``); its
        answer. ``guessed``: the question is a legacy backend's, taken to belong to its one call
        in flight; it may be the backend's own (``roots/list`` when it starts), so a client that
        cannot answer it only refuses it, and its call is not failed for it.

        Raises:
            RPCError: nobody can answer it (the backend gets this error).
        """
        if pending is None:
            raise Unanswerable(
                METHOD_NOT_FOUND,
                f"the gateway has no client to ask '{method}' for: the question came outside a call "
                "from an MCP client, or while several calls to this server were in flight",
            )
        context = pending.context
        if not _can_ask(context, method):
            if context.modern and not guessed:
                # 2026-07-28 basic: a request that needs a capability the client did not declare
                # gets MissingRequiredClientCapabilityError; the backend's question fails meanwhile
                capability = _NEEDS[method]
                pending.refusal = RequestError(
                    MISSING_CLIENT_CAPABILITY,
                    f"Missing required client capability: {capability} (a server behind the gateway asked for it)",
                    {"requiredCapabilities": {capability: {}}},
                )
            raise Unanswerable(
                METHOD_NOT_FOUND,
                f"the gateway's client cannot answer '{method}' (it did not declare the capability, "
                f"or its protocol revision {context.revision} has no such request)",
            )
        if context.modern:
            return await self._park(pending, method, params)
        try:
            result = await context.request(method, _adapt(context, method, params), timeout=self.input_timeout)
        except ClientRequestError as exc:
            error = exc.error or {}
            code = error.get("code")
            raise RPCError(code if isinstance(code, int) else INTERNAL_ERROR, str(error.get("message") or exc)) from exc
        if not isinstance(result, dict):
            raise RPCError(INTERNAL_ERROR, f"the gateway's client answered '{method}' with a {type(result).__name__}")
        return result

    async def _park(self, pending: Pending, method: str, params: JSONObject) -> JSONObject:
        pending.rounds += 1
        question = _Question(f"{_NEEDS[method]}-{pending.rounds}", {"method": method, "params": params})
        pending.question = question
        pending.expires = time.monotonic() + self.input_timeout
        self._parked[pending.id] = pending
        while len(self._parked) > MAX_PENDING:
            oldest = self._parked.pop(next(iter(self._parked)))
            log.warning("too many calls wait for input; cancelling the oldest (%s)", oldest.server)
            oldest.cancel()
        pending._wake()
        with trio.move_on_after(self.input_timeout):
            await question.answered.wait()
        if not question.answered.is_set():
            self._parked.pop(pending.id, None)
            raise RPCError(
                INTERNAL_ERROR, f"the gateway's client did not answer '{method}' within {self.input_timeout:g} s"
            )
        pending.question = None
        answer = question.answer
        assert isinstance(answer, dict)  # checked by resume
        return answer

    def calls_to(self, server: str, *, parked: bool = True) -> list[Pending]:
        """The gateway calls to ``server`` in flight (``parked=False``: not those waiting for a
        2026-07-28 client's retry with its answer, whose backend waits for that answer)."""
        calls = self._by_server.get(server) or ()
        return [c for c in calls if parked or c.id not in self._parked]

    def _only(self, server: str) -> Pending | None:
        """The one call to ``server`` whose backend may be asking (a call waiting for a 2026-07-28
        client's retry does not count: its backend waits for that answer)."""
        calls = self.calls_to(server, parked=False)
        return calls[0] if len(calls) == 1 else None

    # -- a backend's own state, relayed --------------------------------------------------------------

    def wrap_state(self, server: str, state: str) -> str:
        """A backend's ``requestState`` as the gateway hands it to its client: bound to that server
        by the gateway's key, so that a retry reaches the backend that issued it and no other."""
        body = f"{_RELAYED}{b64(server)}.{b64(state)}"
        return f"{body}.{self._mac(body)}"

    def unwrap_state(self, server: str, token: str) -> str:
        """The backend's ``requestState`` inside a wrapped one (see :meth:`wrap_state`).

        Raises:
            RequestError: -32602 for a state that does not verify or was issued for another server.
        """
        parts = token.removeprefix(_RELAYED).split(".")
        if len(parts) != 3 or not hmac.compare_digest(parts[2], self._mac(token.rsplit(".", 1)[0])):
            # 2026-07-28 basic/patterns/mrtr: "Servers MUST reject state that fails verification"
            raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' failed verification")
        if _unb64(parts[0]) != server:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' was issued for a call to another server")
        return _unb64(parts[1])

    @staticmethod
    def is_wrapped(state: object) -> bool:
        """Whether a retry's ``requestState`` is a backend's, wrapped (else it is a pending call's)."""
        return isinstance(state, str) and state.startswith(_RELAYED)

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()

    # -- the state of a pending call ---------------------------------------------------------------

    def _sign(self, pending: Pending) -> str:
        body = f"{pending.id}.{pending.rounds}"
        return f"{body}.{self._mac(body)}"

    def _verify(self, state: object) -> Pending:
        parts = state.split(".") if isinstance(state, str) else []
        if len(parts) != 3:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' is not one this gateway issued")
        if not hmac.compare_digest(parts[2], self._mac(f"{parts[0]}.{parts[1]}")):
            # 2026-07-28 basic/patterns/mrtr: "Servers MUST reject state that fails verification"
            raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' failed verification")
        pending = self._parked.get(parts[0])
        if pending is None or str(pending.rounds) != parts[1] or pending.question is None:
            raise RequestError(
                INVALID_PARAMS,
                "Invalid params: 'requestState' names no call waiting for input here (it expired, was "
                "answered already, or another gateway instance holds it)",
            )
        return pending


#: why a 2026-07-28 call ended when its client closed the request's stream
_STREAM_CLOSED: Final = "the client closed the request's stream (in 2026-07-28 that cancels the request)"


class GatewayCaller:
    """Whether a gateway call's client still waits for its answer (see
    :class:`~mcpwire.host.policies.Caller`): gone once its request was cancelled or its session
    ended, or when its legacy stream stayed unread past the grace (at once when the stream cannot
    be resumed)."""

    __slots__ = ("_away_since", "grace", "pending")

    def __init__(self, pending: Pending, grace: float) -> None:
        self.pending = pending
        self.grace = grace
        self._away_since: float | None = None

    def _unread_for(self) -> float:
        """Seconds the request's stream has been unread (0 while a response reads it)."""
        if self.pending.context.listening:
            self._away_since = None
            return 0.0
        now = trio.current_time()
        if self._away_since is None:
            self._away_since = now
        return now - self._away_since

    def present(self) -> bool:
        return self.gone() is None and self._unread_for() < AWAY_AFTER

    def gone(self, *, cancelled: bool = False) -> str | None:
        pending, context = self.pending, self.pending.context
        if pending.gone is not None:
            return pending.gone
        if context.ended is not None:
            return context.ended
        if context.connection.closed:
            return context.connection.ended or "the client's session ended"
        if cancelled and context.modern:
            return _STREAM_CLOSED
        unread = self._unread_for()
        if unread >= AWAY_AFTER and not context.resumable:
            return "the client's connection closed, and its response cannot be resumed"
        if unread >= AWAY_AFTER + self.grace:
            return f"the client's connection closed and it did not resume the call's stream within {self.grace:g} s"
        return None


def b64(text: str) -> str:
    """``text`` as unpadded URL-safe base64 (the parts of what the gateway wraps)."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def unb64(text: str) -> str | None:
    """The text :func:`b64` made; None for anything else."""
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return None


def _unb64(text: str) -> str:
    decoded = unb64(text)
    if decoded is None:  # pragma: no cover - the MAC verified it
        raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' failed verification")
    return decoded


def _can_ask(context: RequestContext, method: str) -> bool:
    caps = context.client_capabilities
    if method == "elicitation/create":
        # 2025-06-18 introduced elicitation; an empty object means form mode (2025-11-25)
        declared = caps.get("elicitation")
        return context.since(V2025_06_18) and isinstance(declared, dict) and (not declared or "form" in declared)
    return isinstance(caps.get(_NEEDS.get(method, "")), dict)


def _adapt(context: RequestContext, method: str, params: JSONObject) -> JSONObject:
    """A question in the form the client's revision knows (elicitation modes are 2025-11-25's)."""
    if method == "elicitation/create" and not context.since(V2025_11_25) and "mode" in params:
        return {k: v for k, v in params.items() if k != "mode"}
    return params


def _fits(method: str, answer: object) -> bool:
    """Whether an input response has the shape of ``method``'s result."""
    if not isinstance(answer, dict):
        return False
    if method == "elicitation/create":
        return answer.get("action") in ("accept", "decline", "cancel")
    if method == "sampling/createMessage":
        return "content" in answer
    return isinstance(answer.get("roots"), list)
