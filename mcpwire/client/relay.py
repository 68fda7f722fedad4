"""Relaying another client's 2026-07-28 input rounds through this one (MRTR passthrough).

Theory of operation: a proxy serves 2026-07-28 clients of its own and calls 2026-07-28 servers for
them. When such a server answers ``input_required``, the questions belong to the proxy's client:
it alone can answer them, all in one round, under its own capabilities, and its retry must reach
the server with the server's ``requestState`` (2026-07-28 basic/patterns/mrtr). This client would
instead answer them itself with its handlers, one at a time, under its own capabilities.

Within :func:`relaying`, the requests of the named method that the current task makes to a
2026-07-28 server are relayed rounds: their params get the round's params (``inputResponses``,
``requestState``), their ``_meta`` the round's fields over this client's own (the proxy's client's
capabilities), and an ``input_required`` answer raises :class:`InputRequested` with the result as
the server sent it, for the proxy to pass on, instead of being answered here. The scope is a
context variable, so that a proxy can relay through code between it and the client (a host's
policies) that does not know about it; legacy servers and other methods are untouched.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from ..errors import RPCError

__all__ = ["InputRequested", "RelayedRound", "relayed_round", "relaying"]


@dataclass(frozen=True, slots=True)
class RelayedRound:
    """One round of another client's request, relayed.

    Attributes:
        method: the method relayed (``tools/call``, ``prompts/get``, ``resources/read``).
        params: added to the request's params (``inputResponses``, ``requestState``).
        meta: set in the request's ``_meta`` over this client's own fields (e.g.
            ``io.modelcontextprotocol/clientCapabilities``).
    """

    method: str
    params: Mapping[str, object] = field(default_factory=dict)
    meta: Mapping[str, object] = field(default_factory=dict)


class InputRequested(RPCError):
    """A relayed request was answered with ``input_required``: :attr:`result` is that result, as
    the server sent it (``inputRequests``, ``requestState``).

    It is an :class:`~mcpwire.errors.RPCError` (code 0) so that whatever lies between the proxy and
    the client treats it as what it is, an answer of a live server: a circuit breaker counts no
    failure and nothing retries it.
    """

    def __init__(self, result: dict[str, object], *, method: str, server: str) -> None:
        super().__init__(0, "input required (relayed to the client asking)", method=method, server=server)
        self.result = result


_ROUND: Final[contextvars.ContextVar[RelayedRound | None]] = contextvars.ContextVar(
    "mcpwire_relayed_round", default=None
)


@contextmanager
def relaying(round_: RelayedRound) -> Iterator[None]:
    """Relay the current task's requests of ``round_.method`` (see the module's theory of
    operation) until the block ends."""
    token = _ROUND.set(round_)
    try:
        yield
    finally:
        _ROUND.reset(token)


def relayed_round(method: str) -> RelayedRound | None:
    """The round a request of ``method`` made now relays, if any."""
    current = _ROUND.get()
    return current if current is not None and current.method == method else None
