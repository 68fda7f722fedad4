"""The loop of one run: ask the model, run the tools it asks for, repeat until it answers.

Theory of operation: a :class:`Run` is an async context manager and an async iterator of events
(:mod:`mcpwire.agent.events`). Entering it starts the loop in a nursery of its own; events reach
the caller through a bounded channel, so a caller that reads slowly slows the loop rather than
piling events up. Each step sends the conversation to the provider (streamed text and tool-call
fragments become :class:`~mcpwire.agent.events.TextDelta` and
:class:`~mcpwire.agent.events.ToolCallDelta`), appends the model's message, and, when it asked for
tools, runs them through the :class:`~mcpwire.agent.tools.ToolSurface` (concurrently when the
policy allows) and appends their results; a message without tool calls is the answer. Every tool
outcome - an error, a refusal, a broken connection, malformed arguments - goes back to the model
as that call's result and the loop goes on, unless the policy stops on tool failures.

A call that needs a person's decision pauses in ``awaiting_approval``: the surface asks the run,
the run emits :class:`~mcpwire.agent.events.ApprovalRequired` and waits for :meth:`Run.approve`
or :meth:`Run.deny` (the host bounds the wait by its approval timeout, and the host's queue may
decide it too). A denial goes back to the model with its reason.

Budgets end a run with :class:`~mcpwire.agent.events.Failed` and a reason: the steps (model
requests), the tool calls, the tokens, and the deadline (wall-clock seconds for the whole run).
A provider failure ends it too, naming the provider. Leaving the ``async with`` block cancels
whatever is in flight: the model request, tool calls (cancelled on the wire by the client) and
approvals (withdrawn from the queue); nothing is left running.
"""

from __future__ import annotations

import enum
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Literal, Protocol, Self

import trio

from ..redaction import shorten
from . import react
from .errors import AgentError, ProviderError
from .events import (
    ApprovalRequired,
    ApprovalResolved,
    Event,
    Failed,
    FailureKind,
    RunEvent,
    RunState,
    StateChanged,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    ToolResult,
)
from .events import Final as FinalEvent
from .messages import Completion, Message, ModelRequest, TextPart, ToolCall, ToolResultPart, ToolSpec, Usage
from .providers.base import Chunk, Provider, TextChunk
from .tools import APPROVE_MODES, ApprovalTicket, Decision, ToolOutcome, ToolSurface, deprecated_none

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_MAX_STEPS", "DEFAULT_MAX_TOOL_CALLS", "AgentPolicy", "Run"]

log = logging.getLogger("mcpwire.agent")

DEFAULT_MAX_STEPS: Final = 20
DEFAULT_MAX_TOOL_CALLS: Final = 50
#: seconds a whole run may take
DEFAULT_DEADLINE: Final = 600.0
#: events waiting for the caller before the loop waits for it
EVENT_BUFFER: Final = 256


class ToolMode(enum.Enum):
    NATIVE = "native"  #: the provider's own tool calling
    REACT = "react"  #: Thought / Action / Action Input / Observation in text


@dataclass(frozen=True, slots=True)
class AgentPolicy:
    """How a run behaves beyond what the host's policies decide.

    Attributes:
        approve: calls the host says need approval: ``ask`` (an
            :class:`~mcpwire.agent.events.ApprovalRequired` event each), ``all`` (approved at
            once) or ``deny`` (denied at once; the model is told). ``none``, the old word for
            ``deny``, is taken with a deprecation warning.
        max_tool_calls: tool calls a run may make in all.
        max_tokens: tokens (input and output, summed over requests) a run may use; ``None``
            for no bound.
        max_output_tokens: the bound of each answer the model writes.
        temperature: the model's temperature (its default when ``None``).
        result_chars: a tool result longer than this is cut, with a marker saying so.
        max_images: images of one result passed on (providers that take them).
        parallel_tool_calls: run the calls of one step concurrently.
        stop_on_tool_failure: end the run when a call cannot be made (server gone, timeout),
            instead of telling the model.
        tool_timeout: seconds per tool call instead of each server's configured timeout.
        tool_mode: ``native`` tool calling, or ``react`` for models without it.
    """

    approve: Literal["ask", "all", "deny", "none"] = "ask"
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_tokens: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    result_chars: int = 16_000
    max_images: int = 4
    parallel_tool_calls: bool = True
    stop_on_tool_failure: bool = False
    tool_timeout: float | None = None
    tool_mode: Literal["native", "react"] = "native"

    def __post_init__(self) -> None:
        if self.approve == "none":
            object.__setattr__(self, "approve", deprecated_none("AgentPolicy(approve='none')"))
        if self.approve not in APPROVE_MODES:
            raise ValueError(f"approve must be 'all', 'ask' or 'deny', not {self.approve!r}")
        if self.tool_mode not in ("native", "react"):
            raise ValueError(f"tool_mode must be 'native' or 'react', not {self.tool_mode!r}")
        if self.max_tool_calls < 0 or self.result_chars < 100:
            raise ValueError("max_tool_calls must be 0 or more, and result_chars at least 100")


class Attachable(Protocol):
    """What a run tells it is running (the sampling responder asks the run attached last)."""

    def attach(self, run: Run) -> Callable[[], None]: ...


class _Stop(Exception):
    """Ends a run with a :class:`Failed` event."""

    def __init__(self, kind: FailureKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: FailureKind = kind
        self.reason = reason


@dataclass(slots=True)
class _Slot:
    ticket: ApprovalTicket
    call_id: str | None
    done: trio.Event = field(default_factory=trio.Event)
    decision: Decision | None = None


class Run:
    """One run of the loop; see the module docstring. Made by :meth:`Agent.run
    <mcpwire.agent.Agent.run>`.

    Attributes:
        id: the run's id (``run_...``), in every event and every audit record of its calls.
        messages: the conversation: what the run was given, then what it added. Pass it to the
            next run to continue the conversation.
        state: where the run is (:class:`~mcpwire.agent.events.RunState`).
        outcome: the :class:`~mcpwire.agent.events.Final` or
            :class:`~mcpwire.agent.events.Failed` event, once the run is over.
        usage: tokens used so far.
    """

    def __init__(
        self,
        tools: ToolSurface,
        provider: Provider,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        policy: AgentPolicy | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        deadline: float | None = DEFAULT_DEADLINE,
        run_id: str | None = None,
        context: Mapping[str, str] | None = None,
        caller: str = "agent",
        sampling: Attachable | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps!r}")
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be a positive number of seconds, not {deadline!r}")
        self.id = run_id or "run_" + secrets.token_urlsafe(12)
        self.tools = tools
        self.provider = provider
        self.system = system
        self.policy = policy or AgentPolicy()
        self.max_steps = max_steps
        self.deadline = deadline
        self.messages: list[Message] = list(messages)
        self.context = {"caller": caller, **(context or {}), "run_id": self.id}
        self.state = RunState.STARTING
        self.outcome: FinalEvent | Failed | None = None
        self.usage = Usage()
        self.steps = 0
        self.tool_calls = 0
        self._seq = 0
        self._pending: dict[str, _Slot] = {}
        self._send, self._receive = trio.open_memory_channel[RunEvent](EVENT_BUFFER)
        self._stack: AsyncExitStack | None = None
        self._entered = False
        self._sampling = sampling

    # -- lifetime ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Starts the loop. Cancellation: nothing is left running."""
        if self._entered:
            raise AgentError(f"run {self.id} was started already; make a new run to continue the conversation")
        self._entered = True
        stack = AsyncExitStack()
        nursery = await stack.enter_async_context(trio.open_nursery())
        self._stack = stack
        stack.callback(nursery.cancel_scope.cancel)  # leaving the block ends the loop
        if self._sampling is not None:
            stack.callback(self._sampling.attach(self))
        nursery.start_soon(self._main)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Cancels what is still running and waits for it (tool calls are cancelled on the wire)."""
        stack, self._stack = self._stack, None
        if stack is None:
            return None
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # the body's own exception propagates as itself, not wrapped in a group
            if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                return False
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            if self.outcome is None:
                self.outcome = Failed(
                    run_id=self.id, kind="cancelled", reason="the run was cancelled", usage=self.usage
                )
                self.state = RunState.FAILED

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RunEvent:
        # An event already waiting is taken without a pass through the scheduler: a step emits
        # about ten events, and a scheduler pass for each was most of the loop's own cost per
        # step (bench/agent_overhead.py). Cancellation is still seen here, and the bounded
        # buffer makes the reader wait (and yield) once it is empty.
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            return self._receive.receive_nowait()
        except trio.WouldBlock:
            pass
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def result(self) -> FinalEvent | Failed:
        """Reads the remaining events and returns the outcome. Approvals asked meanwhile are
        not answered here: decide them elsewhere (the host's queue) or iterate instead."""
        async for _ in self:
            pass
        assert self.outcome is not None
        return self.outcome

    # -- approvals --------------------------------------------------------------------------------

    def pending_approvals(self) -> list[ApprovalTicket]:
        """The approvals this run waits for."""
        return [slot.ticket for slot in self._pending.values()]

    def approve(
        self, approval_id: str, arguments: Mapping[str, object] | None = None, *, by: str | None = None
    ) -> None:
        """Approves a waiting call (with ``arguments`` instead of the model's, when given).

        Raises:
            AgentError: no approval with that id is waiting in this run.
        """
        self._decide(approval_id, Decision(approve=True, arguments=arguments, by=by))

    def deny(self, approval_id: str, reason: str | None = None, *, by: str | None = None) -> None:
        """Refuses a waiting call; the model gets the refusal and ``reason`` as its result.

        Raises:
            AgentError: no approval with that id is waiting in this run.
        """
        self._decide(approval_id, Decision(approve=False, reason=reason, by=by))

    def _decide(self, approval_id: str, decision: Decision) -> None:
        slot = self._pending.get(approval_id)
        if slot is None or slot.decision is not None:
            waiting = ", ".join(self._pending) or "none"
            raise AgentError(f"no approval {approval_id!r} is waiting in run {self.id} (waiting: {waiting})")
        slot.decision = decision
        slot.done.set()

    async def ask(self, ticket: ApprovalTicket, *, call_id: str | None = None) -> Decision:
        """Asks the run's caller about ``ticket`` as the policy says (used by tool surfaces and
        the sampling responder). Cancellation: the question is withdrawn."""
        mode = self.policy.approve
        if mode != "ask":
            decision = Decision(approve=mode == "all", by="policy", reason=None if mode == "all" else "approve=deny")
            await self._resolved(ticket.id, decision.approve, by="policy", reason=decision.reason)
            return decision
        slot = _Slot(ticket, call_id)
        self._pending[ticket.id] = slot
        try:
            await self._set_state(RunState.AWAITING_APPROVAL)
            event = ApprovalRequired(
                run_id=self.id,
                approval_id=ticket.id,
                call_id=call_id,
                kind=ticket.kind,
                server=ticket.server,
                tool=ticket.tool,
                name=ticket.name,
                arguments=ticket.arguments,
                risk=ticket.risk,
                reason=ticket.reason,
                confirmation=ticket.confirmation,
                confirmations_needed=ticket.confirmations_needed,
            )
            event._owner = self  # type: ignore[attr-defined]  # dict=True: not part of the JSON
            await self._emit(event)
            await slot.done.wait()
            assert slot.decision is not None
            decision = slot.decision
        finally:
            if self._pending.get(ticket.id) is slot:
                del self._pending[ticket.id]
        edited = decision.arguments is not None and dict(decision.arguments) != ticket.arguments
        await self._resolved(ticket.id, decision.approve, by=decision.by, reason=decision.reason, edited=edited)
        if not self._pending:
            await self._set_state(RunState.CALLING_TOOLS)
        return decision

    # -- events -----------------------------------------------------------------------------------

    async def _resolved(
        self,
        approval_id: str,
        approved: bool,
        *,
        by: str | None = None,
        reason: str | None = None,
        edited: bool = False,
    ) -> None:
        """Tells the caller an approval of this run was decided (``by`` whom, when known)."""
        await self._emit(
            ApprovalResolved(
                run_id=self.id, approval_id=approval_id, approved=approved, by=by, reason=reason, edited=edited
            )
        )

    async def _emit(self, event: Event) -> None:
        self._seq += 1
        event.seq = self._seq
        # as in __anext__: no scheduler pass while the buffer has room; a full one makes the
        # loop wait for its reader
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._send.send_nowait(event)  # type: ignore[arg-type]
        except trio.WouldBlock:
            await self._send.send(event)  # type: ignore[arg-type]

    async def _set_state(self, state: RunState) -> None:
        if state is self.state:
            return
        previous, self.state = self.state, state
        await self._emit(StateChanged(run_id=self.id, state=state, previous=previous))

    # -- the loop ---------------------------------------------------------------------------------

    async def _main(self) -> None:
        async with self._send:
            outcome: FinalEvent | Failed
            try:
                with trio.move_on_after(self.deadline if self.deadline is not None else float("inf")) as scope:
                    outcome = await self._loop()
                if scope.cancelled_caught:
                    outcome = self._failed(
                        "deadline", f"the run did not finish within its deadline of {self.deadline:g} s"
                    )
            except ProviderError as exc:
                outcome = self._failed("provider", str(exc), provider=exc.provider)
            except _Stop as stop:
                outcome = self._failed(stop.kind, stop.reason)
            final_state = RunState.FINISHED if isinstance(outcome, FinalEvent) else RunState.FAILED
            self.outcome = outcome
            await self._set_state(final_state)
            await self._emit(outcome)
            log.info(
                "run %s: %s after %d steps, %d tool calls", self.id, final_state.value, self.steps, self.tool_calls
            )

    def _failed(self, kind: FailureKind, reason: str, *, provider: str | None = None) -> Failed:
        return Failed(
            run_id=self.id,
            kind=kind,
            reason=reason,
            provider=provider,
            usage=self.usage,
            steps=self.steps,
            tool_calls=self.tool_calls,
        )

    async def _loop(self) -> FinalEvent:
        mode = ToolMode(self.policy.tool_mode)
        for step in range(1, self.max_steps + 1):
            self.steps = step
            await self._set_state(RunState.REASONING)
            specs = self.tools.specs()
            started = trio.current_time()
            completion = await self._ask_model(step, specs, mode)
            model_time = trio.current_time() - started
            self.usage += completion.usage
            self.messages.append(completion.message)
            if mode is ToolMode.REACT:
                done = await self._react_step(step, completion, specs, model_time)
            else:
                done = await self._native_step(step, completion, model_time)
            if done is not None:
                return done
        raise _Stop("budget", f"the model did not answer within the step budget of {self.max_steps} requests")

    async def _ask_model(self, step: int, specs: list[ToolSpec], mode: ToolMode) -> Completion:
        native = mode is ToolMode.NATIVE
        request = ModelRequest(
            messages=tuple(self.messages),
            system=self.system if native else react.system_prompt(self.system, specs),
            tools=tuple(specs) if native else (),
            max_tokens=self.policy.max_output_tokens,
            temperature=self.policy.temperature,
            stop=() if native else react.STOP,
        )
        splitter = react.ThoughtSplitter() if not native else None

        async def on_chunk(chunk: Chunk) -> None:
            if isinstance(chunk, TextChunk):
                pieces = splitter.feed(chunk.text) if splitter is not None else [(chunk.text, False)]
                for text, thought in pieces:
                    await self._emit(TextDelta(run_id=self.id, step=step, text=text, thought=thought))
            else:
                await self._emit(
                    ToolCallDelta(
                        run_id=self.id,
                        step=step,
                        index=chunk.index,
                        call_id=chunk.id,
                        name=chunk.name,
                        arguments_delta=chunk.arguments_delta,
                    )
                )

        completion = await self.provider.complete(request, on_chunk)
        if splitter is not None:
            for text, thought in splitter.flush():
                await self._emit(TextDelta(run_id=self.id, step=step, text=text, thought=thought))
        return completion

    def _check_budgets(self, calls: int) -> None:
        """Before running ``calls`` more tool calls: is there room for them and their results?"""
        if self.steps >= self.max_steps:
            raise _Stop(
                "budget",
                f"the step budget of {self.max_steps} requests is spent and the model still asks for tools",
            )
        if self.tool_calls + calls > self.policy.max_tool_calls:
            raise _Stop(
                "budget",
                f"the model asked for {calls} more tool call(s) after {self.tool_calls}; the budget is "
                f"{self.policy.max_tool_calls} per run",
            )
        limit = self.policy.max_tokens
        if limit is not None and self.usage.total >= limit:
            raise _Stop("budget", f"the run used {self.usage.total} tokens; the budget is {limit}")

    async def _native_step(self, step: int, completion: Completion, model_time: float) -> FinalEvent | None:
        calls = completion.message.tool_calls
        if not calls:
            await self._step_finished(step, completion, model_time, 0.0, 0)
            return self._final(completion.message.text, completion.stop_reason)
        self._check_budgets(len(calls))
        await self._set_state(RunState.CALLING_TOOLS)
        started = trio.current_time()
        results: list[ToolResultPart | None] = [None] * len(calls)

        async def one(index: int, call: ToolCall) -> None:
            results[index] = await self._call(step, call)

        if self.policy.parallel_tool_calls and len(calls) > 1:
            async with trio.open_nursery() as nursery:
                for index, call in enumerate(calls):
                    nursery.start_soon(one, index, call)
        else:
            for index, call in enumerate(calls):
                await one(index, call)
        parts = tuple(r for r in results if r is not None)
        self.messages.append(Message(role="tool", parts=parts))
        await self._step_finished(step, completion, model_time, trio.current_time() - started, len(calls))
        return None

    async def _react_step(
        self, step: int, completion: Completion, specs: list[ToolSpec], model_time: float
    ) -> FinalEvent | None:
        reply = react.parse_reply(completion.message.text, {s.name for s in specs})
        if isinstance(reply, react.FinalAnswer):
            await self._step_finished(step, completion, model_time, 0.0, 0)
            return self._final(reply.text, completion.stop_reason)
        if isinstance(reply, react.Malformed):
            self._check_budgets(0)
            self.messages.append(
                Message.user(react.observation(f"Your reply did not follow the format: {reply.problem}"))
            )
            await self._step_finished(step, completion, model_time, 0.0, 0)
            return None
        self._check_budgets(1)
        await self._set_state(RunState.CALLING_TOOLS)
        started = trio.current_time()
        call = ToolCall(id=f"react_{step}", name=reply.name, raw_arguments=reply.raw_input, arguments=reply.arguments)
        part = await self._call(step, call)
        self.messages.append(Message(role="user", parts=(TextPart(text=react.observation(part.text)),)))
        await self._step_finished(step, completion, model_time, trio.current_time() - started, 1)
        return None

    async def _call(self, step: int, call: ToolCall) -> ToolResultPart:
        """One tool call, from its start event to its result for the model."""
        self.tool_calls += 1
        located = self.tools.locate(call.name)
        server, tool = located if located is not None else (None, None)
        await self._emit(
            ToolCallStarted(
                run_id=self.id,
                step=step,
                call_id=call.id,
                name=call.name,
                server=server,
                tool=tool,
                arguments=call.arguments,
                raw_arguments=None if call.arguments is not None else call.raw_arguments,
            )
        )
        started = trio.current_time()
        asked: list[str] = []
        resolved: list[str] = []
        if call.arguments is None:
            outcome = ToolOutcome(
                text=f"not run: {call.error}. Call the tool again with its arguments as one JSON object that "
                "matches its input schema.",
                outcome="invalid_arguments",
                is_error=True,
                server=server,
                tool=tool,
            )
        else:

            async def ask(ticket: ApprovalTicket) -> Decision:
                asked.append(ticket.id)
                decision = await self.ask(ticket, call_id=call.id)
                resolved.append(ticket.id)
                return decision

            outcome = await self.tools.call(call.name, call.arguments, context=self.context, ask=ask)
        await self._resolved_elsewhere(asked, resolved, outcome)
        text, truncated = _cut(outcome.text, self.policy.result_chars)
        await self._emit(
            ToolResult(
                run_id=self.id,
                step=step,
                call_id=call.id,
                name=call.name,
                server=outcome.server or server,
                tool=outcome.tool or tool,
                outcome=outcome.outcome,
                is_error=outcome.is_error,
                text=text,
                truncated=truncated,
                latency_ms=round(_call_time(outcome, trio.current_time() - started) * 1000, 3),
                wait_ms=round(outcome.approval_wait * 1000, 3),
                risk=outcome.risk,
                approval=outcome.approval,
                approval_id=outcome.approval_id,
            )
        )
        if outcome.outcome == "failed" and self.policy.stop_on_tool_failure:
            raise _Stop(
                "tool", f"tool call {call.name!r} failed and the policy stops on failures: {shorten(text, 300)}"
            )
        images = outcome.images[: self.policy.max_images] if self.provider.supports_tool_images else ()
        return ToolResultPart(
            call_id=call.id, name=call.name, content=(TextPart(text=text), *images), is_error=outcome.is_error
        )

    async def _resolved_elsewhere(self, asked: list[str], resolved: list[str], outcome: ToolOutcome) -> None:
        """A question of this call that nobody here answered (the host's queue decided it, or it
        expired) still gets its resolution event, from the call's outcome."""
        if len(asked) > len(resolved):
            approved = outcome.approval in ("approved", "approved_modified")
            await self._resolved(asked[-1], approved, reason=None if approved else shorten(outcome.text, 300))
        if asked and not self._pending:
            await self._set_state(RunState.CALLING_TOOLS)

    def _final(self, text: str, stop_reason: str) -> FinalEvent:
        return FinalEvent(
            run_id=self.id,
            text=text,
            stop_reason=stop_reason,
            usage=self.usage,
            steps=self.steps,
            tool_calls=self.tool_calls,
        )

    async def _step_finished(
        self, step: int, completion: Completion, model_time: float, tools_time: float, calls: int
    ) -> None:
        await self._emit(
            StepFinished(
                run_id=self.id,
                step=step,
                usage=completion.usage,
                total_usage=self.usage,
                model_ms=round(model_time * 1000, 3),
                tools_ms=round(tools_time * 1000, 3),
                tool_calls=calls,
                stop_reason=completion.stop_reason,
            )
        )


def _call_time(outcome: ToolOutcome, elapsed: float) -> float:
    """Seconds the call itself took: the surface's figure, else the time it took here less its
    wait for a decision (a person's time is not the tool's)."""
    if outcome.latency is not None:
        return outcome.latency
    return max(0.0, elapsed - outcome.approval_wait)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text, False
    marker = f"\n[... cut: the result has {len(text):,} characters; only the first {{kept:,}} are shown]"
    kept = max(0, limit - len(marker.format(kept=limit)))
    return text[:kept] + marker.format(kept=kept), True
