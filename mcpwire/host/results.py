"""What a host call gives back: the result of a tool call as the host returns it, and the errors
that belong to the host's calls (a quarantined tool, a tool error the host raises)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import HostError, ToolExecutionError
from ..protocol.types import ToolResult
from .policies import Risk

__all__ = ["HostToolResult", "ToolQuarantined", "ToolResultError"]


class ToolQuarantined(HostError):
    """The tool's definition changed since it was pinned; approve it with ``Host.approve_pin``."""

    def __init__(self, message: str, *, server: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


@dataclass(frozen=True, slots=True)
class HostToolResult:
    """What :meth:`Host.call_tool` returns: the tool's result and its text for a model."""

    name: str  #: the namespaced name called
    server: str
    tool: str  #: the tool's name on its server
    result: ToolResult
    text: str  #: :func:`~mcpwire.host.render.render_result` of ``result``
    cached: bool = False
    risk: Risk | None = None
    approval: str = "allow"
    approval_id: str | None = None
    #: seconds the call took, without its wait for a decision
    latency: float = 0.0
    #: seconds it waited for a decision (0 when none was needed)
    approval_wait: float = 0.0

    @property
    def is_error(self) -> bool:
        """The tool reported failure (``isError``): a value for the model, not an exception."""
        return self.result.is_error


class ToolResultError(ToolExecutionError):
    """The tool reported failure (``isError``) and the host raises those (``raise_tool_errors``).

    ``result`` is what :meth:`Host.call_tool` would have returned.
    """

    def __init__(self, message: str, *, result: HostToolResult) -> None:
        super().__init__(message, tool=result.tool, server=result.server)
        self.result = result
