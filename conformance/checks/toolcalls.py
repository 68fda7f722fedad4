"""Calling a server's tools for the checks that need a call (no checks here: helpers only).

``call_each`` calls tools with arguments synthesized from their ``inputSchema``
(:func:`~conformance.context.example_arguments`); ``canned_answer`` answers what the server asks
the client meanwhile (sampling, elicitation, roots, ping) with harmless values, so a tool that asks
the client does not hang. The tool policy was applied by the caller
(:meth:`~conformance.context.Context.callable_tools`).
"""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, example_arguments
from ..harness import NoAnswer, WireBase, canned_answer

__all__ = ["MAX_CALLS", "call_each", "canned_answer"]

#: tools one check calls at most
MAX_CALLS: Final = 25


async def call_each(
    ctx: Context,
    wire: WireBase,
    tools: list[dict[str, Any]],
    *,
    capabilities: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    token_prefix: str | None = None,
    limit: int = MAX_CALLS,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Call each tool once (at most ``limit``); the (tool, response) pairs of the answered calls.

    A call with no answer within the context's timeout is noted and left out.
    """
    wire.responder = canned_answer
    out = []
    for n, tool in enumerate(tools[:limit]):
        extra = dict(meta or {})
        if token_prefix is not None:
            extra["progressToken"] = f"{token_prefix}-{n}"
        params: dict[str, Any] = {"name": tool.get("name"), "arguments": example_arguments(tool.get("inputSchema"))}
        if extra:
            params["_meta"] = extra
        try:
            answer = await ctx.call(wire, "tools/call", params, capabilities=capabilities)
        except NoAnswer as exc:
            ctx.note(f"{tool.get('name')}: {exc}")
            continue
        out.append((tool, answer))
    return out
