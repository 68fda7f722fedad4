"""Requests made for another client: a proxy's relayed rounds, and who answers their questions.

Theory of operation: a proxy (mcpwire's gateway) serves MCP clients of its own and calls servers
for them. A request it makes for one of its clients carries that client with it, explicitly:
``relay=Relay(...)`` on :meth:`~mcpwire.Client.call_tool`, :meth:`~mcpwire.Client.get_prompt`,
:meth:`~mcpwire.Client.read_resource` and :meth:`~mcpwire.Client.request`, passed down by
whatever lies between the proxy and this client (a host's ``call_tool`` and its policies, which
read it too: a relayed round's result is its asker's alone and is never cached). A relay is one
request's, so two calls in flight on one connection never see each other's.

- ``round``: the proxy's client and the server both speak 2026-07-28. When such a server answers
  ``input_required``, the questions are the proxy's client's: it alone can answer them, all in
  one round, under its own capabilities, and its retry must reach the server with the server's
  ``requestState`` (2026-07-28 basic/patterns/mrtr). So the request's params get the round's
  params (``inputResponses``, ``requestState``), its ``_meta`` the round's fields over this
  client's own (the proxy's client's capabilities, which also opt it into extensions such as
  Tasks), and an answer that is the asker's to follow raises :class:`RelayedAnswer` with the
  result as the server sent it, for the proxy to pass on: :class:`InputRequested`
  (``input_required``) or :class:`TaskCreated` (SEP-2663: a ``tools/call`` answered with a task).
- ``ask``: otherwise, a 2026-07-28 server's input requests for this request are put to the proxy's
  client through ``ask`` (method, params -> result) instead of this client's handlers: the
  question belongs to the request, not to the connection.

A legacy server asks with requests of its own, read by the connection's task rather than the
caller's and naming no request they belong to: those go to the client's handlers as always (a
proxy finds their asker by other means). Without a relay nothing changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ..errors import RPCError
from ..protocol.types import JSONObject

__all__ = ["Ask", "InputRequested", "Relay", "RelayedAnswer", "RelayedRound", "TaskCreated"]

#: Answers one input request (``method``, ``params``) with its result.
Ask = Callable[[str, JSONObject], Awaitable[JSONObject]]


@dataclass(frozen=True, slots=True)
class RelayedRound:
    """One round of another client's 2026-07-28 request, relayed as it is.

    Attributes:
        params: added to the request's params (``inputResponses``, ``requestState``).
        meta: set in the request's ``_meta`` over this client's own fields (e.g.
            ``io.modelcontextprotocol/clientCapabilities``).
    """

    params: Mapping[str, object] = field(default_factory=dict)
    meta: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Relay:
    """The client a request is made for (see the module's theory of operation).

    Attributes:
        round: the asker's own round, relayed to a 2026-07-28 server (ignored by a legacy one).
        ask: answers the server's input requests for this request when it is not relayed as a
            round (``None``: this client's own handlers do).
    """

    round: RelayedRound | None = None
    ask: Ask | None = None


class RelayedAnswer(RPCError):
    """A relayed request was answered with a result that is its asker's to follow:
    :attr:`result` is that result, as the server sent it.

    It is an :class:`~mcpwire.errors.RPCError` (code 0) so that whatever lies between the proxy and
    the client treats it as what it is, an answer of a live server: a circuit breaker counts no
    failure, nothing retries it, nothing caches it.
    """

    def __init__(self, result: dict[str, object], *, what: str, method: str, server: str) -> None:
        super().__init__(0, f"{what} (relayed to the client asking)", method=method, server=server)
        self.result = result


class InputRequested(RelayedAnswer):
    """``input_required``: ``inputRequests`` and ``requestState`` for the asker to answer."""

    def __init__(self, result: dict[str, object], *, method: str, server: str) -> None:
        super().__init__(result, what="input required", method=method, server=server)


class TaskCreated(RelayedAnswer):
    """A ``CreateTaskResult`` (SEP-2663, ``resultType: "task"``): the asker polls the task."""

    def __init__(self, result: dict[str, object], *, method: str, server: str) -> None:
        super().__init__(result, what="task created", method=method, server=server)
