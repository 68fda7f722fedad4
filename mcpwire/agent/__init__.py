"""An agent loop on the host: a model calls your servers' tools, a person approves the risky ones.

The ``agent`` extra (``pip install -e '.[agent]'`` in a clone). Providers are small httpx clients
for two wire formats (OpenAI Chat Completions and its compatibles: OpenAI, Ollama, vLLM, DeepSeek,
Zhipu; Anthropic Messages); the tools are the host's namespaced tools behind its policies and
audit log; a run is a stream of typed events (:mod:`mcpwire.agent.events`)::

    provider = OpenAIProvider("gpt-4o-mini")          # the key from OPENAI_API_KEY
    async with Host.from_config("mcp.json") as host:
        agent = Agent(host, provider, system="Be brief.")
        async with agent.run("What time is it in Tokyo?") as run:
            async for event in run:
                if isinstance(event, TextDelta):
                    print(event.text, end="")
                elif isinstance(event, ApprovalRequired):
                    event.approve()                   # or event.deny("not now")
"""

from __future__ import annotations

from .agent import Agent
from .errors import AgentError, PresetError, ProviderError
from .events import (
    ApprovalRequired,
    ApprovalResolved,
    Event,
    Failed,
    Final,
    RunEvent,
    RunState,
    StateChanged,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    ToolResult,
    decode_event,
)
from .loop import AgentPolicy, Run
from .messages import Completion, ImagePart, Message, ModelRequest, TextPart, ToolCall, ToolResultPart, ToolSpec, Usage
from .presets import Preset, load_presets
from .providers import AnthropicProvider, OpenAIProvider, Provider, make_provider
from .sampling import SamplingResponder
from .tools import ApprovalTicket, Decision, HostTools, ToolOutcome, ToolSurface

__all__ = [
    "Agent",
    "AgentError",
    "AgentPolicy",
    "AnthropicProvider",
    "ApprovalRequired",
    "ApprovalResolved",
    "ApprovalTicket",
    "Completion",
    "Decision",
    "Event",
    "Failed",
    "Final",
    "HostTools",
    "ImagePart",
    "Message",
    "ModelRequest",
    "OpenAIProvider",
    "Preset",
    "PresetError",
    "Provider",
    "ProviderError",
    "Run",
    "RunEvent",
    "RunState",
    "SamplingResponder",
    "StateChanged",
    "StepFinished",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStarted",
    "ToolOutcome",
    "ToolResult",
    "ToolResultPart",
    "ToolSpec",
    "ToolSurface",
    "Usage",
    "decode_event",
    "load_presets",
    "make_provider",
]
