""":class:`Agent`: a provider, a set of tools and a policy, from which runs are made.

Theory of operation: an agent holds what every run shares - the provider, the tool surface
(the host's namespaced tools, narrowed to some servers and tool globs when asked), the system
prompt, the policy and the budgets - and makes a :class:`~mcpwire.agent.loop.Run` per
conversation turn. It keeps no conversation itself: a run starts from the messages it is given
and leaves the whole conversation in ``run.messages`` for the next one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from ..host import Host
from .errors import AgentError
from .events import ApprovalRequired, Failed
from .events import Final as FinalEvent
from .loop import DEFAULT_DEADLINE, DEFAULT_MAX_STEPS, DEFAULT_MAX_TOOL_CALLS, AgentPolicy, Run
from .messages import Message
from .presets import Preset, provider_for
from .providers.base import Provider
from .sampling import SamplingResponder
from .tools import HostTools, ToolSurface

__all__ = ["Agent"]


class Agent:
    """A model that calls tools, with a person in the loop for the risky ones.

    Args:
        tools: a running :class:`~mcpwire.host.Host` (its namespaced tools, through its
            policies and audit log), or any :class:`~mcpwire.agent.tools.ToolSurface`.
        provider: the model (:mod:`mcpwire.agent.providers`).
        system: the system prompt.
        policy: approvals, budgets, result size, tool mode (:class:`AgentPolicy`).
        max_steps: model requests a run may make.
        deadline: seconds a run may take (``None``: no bound beyond each wait's own).
        servers: only the tools of these servers (with a host).
        allowed_tools: only tools whose namespaced name (or ``server/tool``) matches one of
            these globs (with a host).
        caller: who the runs' calls come from, in approvals and audit records.
        sampling: answers the servers' sampling requests; runs attach to it while they run.

    Example::

        async with agent.run("What time is it in Tokyo?") as run:
            async for event in run:
                if isinstance(event, ApprovalRequired):
                    event.approve()
        print(run.outcome)
    """

    def __init__(
        self,
        tools: Host | ToolSurface,
        provider: Provider,
        *,
        system: str | None = None,
        policy: AgentPolicy | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        deadline: float | None = DEFAULT_DEADLINE,
        servers: Sequence[str] | None = None,
        allowed_tools: Sequence[str] | None = None,
        caller: str = "agent",
        sampling: SamplingResponder | None = None,
    ) -> None:
        self.policy = policy or AgentPolicy()
        if isinstance(tools, Host):
            self.tools: ToolSurface = HostTools(
                tools, servers=servers, allowed=allowed_tools, timeout=self.policy.tool_timeout
            )
        elif servers is not None or allowed_tools is not None:
            raise ValueError("servers and allowed_tools narrow a host's tools; narrow your own surface yourself")
        else:
            self.tools = tools
        self.provider = provider
        self.system = system
        self.max_steps = max_steps
        self.deadline = deadline
        self.caller = caller
        self.sampling = sampling

    @classmethod
    def from_preset(
        cls,
        host: Host,
        preset: Preset,
        *,
        provider: Provider | None = None,
        caller: str = "agent",
        sampling: SamplingResponder | None = None,
        tool_timeout: float | None = None,
    ) -> Agent:
        """The agent a preset describes, over ``host`` (its servers and tool globs, system prompt,
        approval mode, tool mode and budgets; the host's own rules are the host's business);
        ``tool_timeout`` bounds each tool call instead of each server's configured timeout.

        Raises:
            PresetError, ValueError: the preset's provider cannot be made (no key, a bad option).
        """
        policy = AgentPolicy(
            approve=preset.approve,
            tool_mode=preset.tool_mode,
            max_tool_calls=preset.max_tool_calls or DEFAULT_MAX_TOOL_CALLS,
            max_tokens=preset.max_tokens,
            max_output_tokens=preset.max_output_tokens,
            temperature=preset.temperature,
            tool_timeout=tool_timeout,
        )
        return cls(
            host,
            provider if provider is not None else provider_for(preset),
            system=preset.system,
            policy=policy,
            max_steps=preset.max_steps or DEFAULT_MAX_STEPS,
            deadline=preset.deadline or DEFAULT_DEADLINE,
            servers=preset.servers,
            allowed_tools=preset.tools,
            caller=caller,
            sampling=sampling,
        )

    def run(
        self,
        messages: str | Message | Sequence[Message],
        *,
        run_id: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> Run:
        """A run over ``messages`` (a user's text, a message, or a whole conversation); use it
        as ``async with agent.run(...) as run: async for event in run: ...``.

        ``context`` (``trace_id``...) goes into every approval and audit record of the run,
        with its ``run_id``.
        """
        if isinstance(messages, str):
            conversation: list[Message] = [Message.user(messages)]
        elif isinstance(messages, Message):
            conversation = [messages]
        else:
            conversation = list(messages)
        if not conversation:
            raise ValueError("a run needs at least one message")
        return Run(
            self.tools,
            self.provider,
            conversation,
            system=self.system,
            policy=self.policy,
            max_steps=self.max_steps,
            deadline=self.deadline,
            run_id=run_id,
            context=context,
            caller=self.caller,
            sampling=self.sampling,
        )

    async def respond(
        self,
        messages: str | Message | Sequence[Message],
        *,
        on_approval: Callable[[ApprovalRequired], Awaitable[None]] | None = None,
    ) -> FinalEvent:
        """Runs to the end and returns the answer; ``on_approval`` decides the approvals asked
        (without it they wait for the host's queue, or expire).

        Raises:
            AgentError: the run failed (the message is its reason).
        """
        async with self.run(messages) as run:
            async for event in run:
                if isinstance(event, ApprovalRequired) and on_approval is not None:
                    await on_approval(event)
        outcome = run.outcome
        if isinstance(outcome, Failed) or outcome is None:
            raise AgentError(outcome.reason if outcome is not None else "the run ended without an outcome")
        return outcome
