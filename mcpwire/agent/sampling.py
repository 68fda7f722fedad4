"""Sampling: a server asks the client's model for a message (``sampling/createMessage``, and the
same request inside a 2026-07-28 ``input_required`` result), answered by the agent's provider,
subject to approval.

Theory of operation: a :class:`SamplingResponder` is the client's sampling handler; give it to
the host before it connects (``Host(client_options={"sampling": responder})``: the servers then
see the ``sampling`` capability) and to the :class:`~mcpwire.agent.Agent`, whose runs attach
themselves while they run. Each request becomes an :class:`~mcpwire.agent.tools.ApprovalTicket` of
kind ``sampling`` (MEDIUM risk: the server chooses the prompt and spends the user's tokens): with
the host's approval queue it is opened there (so it is listed, decided and audited as tool calls
are), and the run attached last is asked as well, as an
:class:`~mcpwire.agent.events.ApprovalRequired` event; the first decision wins. Without a run or a
queue to ask, ``approve="ask"`` refuses. Silence past ``timeout`` refuses.

An approved request goes to the provider with the server's messages (text and images; audio is
named, not sent), its system prompt, temperature and stop sequences, and its ``maxTokens`` capped
at ``max_tokens``; tools are not offered. A refusal is the JSON-RPC error ``-1`` the
specification's examples use ("User rejected sampling request").
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Final, Literal

import trio

from ..errors import RPCError
from ..host import ApprovalNotPending, ApprovalQueue, ApprovalState
from ..host.policies import DEFAULT_APPROVAL_TIMEOUT, ApprovalRequest, Risk
from ..protocol.types import JSONObject
from ..redaction import shorten
from .errors import ProviderError
from .messages import ImagePart, Message, ModelRequest, TextPart
from .providers.base import Provider
from .tools import APPROVE_MODES, ApprovalTicket, Decision, deprecated_none

if TYPE_CHECKING:
    from .loop import Run

__all__ = ["DEFAULT_SAMPLING_MAX_TOKENS", "SamplingResponder"]

log = logging.getLogger("mcpwire.agent.sampling")

#: the most tokens a server's sampling request may ask the model to write
DEFAULT_SAMPLING_MAX_TOKENS: Final = 4096
REJECTED_CODE: Final = -1
_STOP: Final = {
    "end_turn": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
    "tool_use": "toolUse",
}


class SamplingResponder:
    """Answers the servers' sampling requests with ``provider``.

    Args:
        provider: the model that writes the answers.
        approve: ``ask`` (a person decides, through the attached run or the queue), ``all`` or
            ``none``.
        queue: the host's approval queue (``host.approvals``), where requests are listed and
            decided like tool calls.
        timeout: seconds a decision may take; silence refuses.
        max_tokens: the cap on a request's ``maxTokens``.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        approve: Literal["ask", "all", "deny", "none"] = "ask",
        queue: ApprovalQueue | None = None,
        timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        max_tokens: int = DEFAULT_SAMPLING_MAX_TOKENS,
    ) -> None:
        if approve == "none":
            approve = deprecated_none("SamplingResponder(approve='none')")
        if approve not in APPROVE_MODES:
            raise ValueError(f"approve must be 'all', 'ask' or 'deny', not {approve!r}")
        self.provider = provider
        self.approve = approve
        self.queue = queue
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.answered = 0
        self.refused = 0
        self._runs: list[Run] = []

    def attach(self, run: Run) -> Callable[[], None]:
        """Asks ``run`` about requests while it runs; returns the function that detaches it."""
        self._runs.append(run)

        def detach() -> None:
            if run in self._runs:
                self._runs.remove(run)

        return detach

    async def __call__(self, params: JSONObject) -> JSONObject:
        """The sampling handler: the model's message, or ``RPCError(-1)`` when refused.

        Raises:
            RPCError: refused, or the provider failed (``-32603`` with its message).
        """
        request = self._request(params)
        ticket = ApprovalTicket(
            id="apv_local_" + secrets.token_urlsafe(9),
            kind="sampling",
            server="",
            tool="sampling/createMessage",
            name="sampling",
            arguments=_summary(params, request),
            risk="medium",
            reason="a server asks the model to write a message (sampling)",
        )
        decision = await self._decide(ticket)
        if not decision.approve:
            self.refused += 1
            why = f": {decision.reason}" if decision.reason else ""
            raise RPCError(REJECTED_CODE, f"User rejected sampling request{why}")
        try:
            completion = await self.provider.complete(request)
        except ProviderError as exc:
            raise RPCError(-32603, f"the client's model failed: {exc}") from exc
        self.answered += 1
        return {
            "role": "assistant",
            "content": {"type": "text", "text": completion.message.text},
            "model": completion.model or self.provider.model,
            "stopReason": _STOP.get(completion.stop_reason, completion.provider_stop_reason or "endTurn"),
        }

    def _request(self, params: JSONObject) -> ModelRequest:
        messages: list[Message] = []
        listed = params.get("messages")
        for raw in listed if isinstance(listed, list) else []:
            role: Literal["user", "assistant"]
            if isinstance(raw, dict) and raw.get("role") == "user":
                role = "user"
            elif isinstance(raw, dict) and raw.get("role") == "assistant":
                role = "assistant"
            else:
                raise RPCError(-32602, "sampling messages must be objects with role 'user' or 'assistant'")
            content = raw.get("content")
            blocks = content if isinstance(content, list) else [content]
            messages.append(
                Message(role=role, parts=tuple(_part(block) for block in blocks if isinstance(block, dict)))
            )
        if not messages:
            raise RPCError(-32602, "a sampling request needs at least one message")
        asked = params.get("maxTokens")
        max_tokens = min(asked, self.max_tokens) if isinstance(asked, int) and asked > 0 else self.max_tokens
        stops = params.get("stopSequences")
        temperature = params.get("temperature")
        system = params.get("systemPrompt")
        return ModelRequest(
            messages=tuple(messages),
            system=system if isinstance(system, str) and system else None,
            max_tokens=max_tokens,
            temperature=float(temperature) if isinstance(temperature, int | float) else None,
            stop=tuple(s for s in stops if isinstance(s, str)) if isinstance(stops, list) else (),
        )

    async def _decide(self, ticket: ApprovalTicket) -> Decision:
        if self.approve != "ask":
            return Decision(approve=self.approve == "all", by="policy", reason="sampling is refused (approve=deny)")
        run = self._runs[-1] if self._runs else None
        if self.queue is None:
            if run is None:
                return Decision(approve=False, reason="no run is active to ask, and there is no approval queue")
            with trio.move_on_after(self.timeout):
                return await run.ask(ticket)
            return Decision(approve=False, reason=f"no decision within {self.timeout:g} s")
        return await self._through_queue(self.queue, ticket, run)

    async def _through_queue(self, queue: ApprovalQueue, ticket: ApprovalTicket, run: Run | None) -> Decision:
        request = ApprovalRequest(
            server=ticket.server,
            tool=ticket.tool,
            name=ticket.name,
            arguments=ticket.arguments,
            risk=Risk.MEDIUM,
            reason=ticket.reason,
            context={"run_id": run.id} if run is not None else {},
        )
        approval = await queue.open(request, timeout=self.timeout)
        ticket = replace(ticket, id=approval.id)
        answer: list[Decision] = []

        async def relay(run: Run) -> None:
            decision = await run.ask(ticket)
            answer.append(decision)
            try:
                await queue.decide(approval.id, approve=decision.approve, reason=decision.reason, by=decision.by)
            except ApprovalNotPending:
                pass

        try:
            async with trio.open_nursery() as nursery:
                if run is not None:
                    nursery.start_soon(relay, run)
                final = await queue.wait(approval.id, timeout=self.timeout)
                nursery.cancel_scope.cancel()
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await queue.withdraw(approval.id, "the sampling request was cancelled")
            raise
        if final.state is ApprovalState.APPROVED:
            return Decision(approve=True, by=final.decided_by)
        if final.pending:
            await queue.withdraw(approval.id, f"no decision within {self.timeout:g} s")
        reason = final.reason or (answer[0].reason if answer else None) or "no decision in time"
        return Decision(approve=False, reason=reason, by=final.decided_by)


def _part(block: Mapping[str, object]) -> TextPart | ImagePart:
    kind, text, data, mime = block.get("type"), block.get("text"), block.get("data"), block.get("mimeType")
    if kind == "text" and isinstance(text, str):
        return TextPart(text=text)
    if kind == "image" and isinstance(data, str) and isinstance(mime, str):
        return ImagePart(media_type=mime, data=data)
    return TextPart(text=f"[{kind or 'unknown'} content]")


def _summary(params: JSONObject, request: ModelRequest) -> JSONObject:
    """What the person deciding sees: the request's text (shortened), not its images."""
    shown: JSONObject = {
        "messages": [
            {"role": m.role, "text": shorten(m.text, 2000), **({"images": n} if (n := _images(m)) else {})}
            for m in request.messages
        ],
        "maxTokens": request.max_tokens,
    }
    if request.system:
        shown["systemPrompt"] = shorten(request.system, 2000)
    return shown


def _images(message: Message) -> int:
    return sum(isinstance(p, ImagePart) for p in message.parts)
