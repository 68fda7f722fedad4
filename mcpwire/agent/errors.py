"""What the agent raises. A run reports most failures as a ``Failed`` event; these exceptions
are what providers raise to the loop, and what the library raises for misuse."""

from __future__ import annotations

from ..errors import ConfigError, MCPWireError

__all__ = ["AgentError", "PresetError", "ProviderError"]


class AgentError(MCPWireError):
    """Something the agent could not do (a provider failed, a budget ran out)."""


class ProviderError(AgentError):
    """A model provider failed: its answer, its stream, or the connection to it.

    Attributes:
        provider: the provider's label (its wire format and model).
        status: the HTTP status when the provider answered with an error, else ``None``.
        retryable: the failure is of a kind that may pass (rate limits, overload, a dropped
            connection); the provider has retried it as often as it was allowed to already.
    """

    def __init__(self, message: str, *, provider: str, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable


class PresetError(ConfigError):
    """A preset (or the options naming a provider) is invalid; the message names the field."""
