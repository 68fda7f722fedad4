"""The one table of client->server methods: which revisions have them and what they need.

Theory of operation: before a request leaves, the session asks this table whether the negotiated
revision has the method and whether the server advertised the capability it needs. 2025-11-25
basic/lifecycle: "Both parties MUST ... Only use capabilities that were successfully negotiated"
(LC-14, LC-16). The table also says which results may be ``input_required`` (UT-R01), which
methods are paginated (UT-N06), and which may run twice without harm (an HTTP transport may send
those again when a connection broke after sending, RFC 9110 9.2.2). Methods absent from the table
(extensions, experiments) pass through :meth:`mcpwire.Client.request` unchecked.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from .versions import V2024_11_05, V2025_03_26, V2025_11_25, V2026_07_28, Revision

__all__ = ["METHODS", "MethodInfo", "check_method"]


class MethodInfo(NamedTuple):
    #: top-level server capability the method needs, or "" for none.
    capability: str = ""
    #: a flag inside that capability that must be true (``resources.subscribe``), or "".
    flag: str = ""
    #: first revision that has the method.
    since: str = V2024_11_05
    #: last revision that has it ("" = still present).
    until: str = ""
    paginated: bool = False
    #: 2026-07-28 mrtr: InputRequiredResult only on tools/call, resources/read, prompts/get.
    input_required: bool = False
    #: may run twice without harm (reads, lists, setting the same log level); never
    #: ``initialize`` (a second session) nor ``tools/call``.
    idempotent: bool = False


METHODS: Final[dict[str, MethodInfo]] = {
    "ping": MethodInfo(until=V2025_11_25, idempotent=True),
    "initialize": MethodInfo(until=V2025_11_25),
    "server/discover": MethodInfo(since=V2026_07_28, idempotent=True),
    "tools/list": MethodInfo("tools", paginated=True, idempotent=True),
    "tools/call": MethodInfo("tools", input_required=True),
    "resources/list": MethodInfo("resources", paginated=True, idempotent=True),
    "resources/templates/list": MethodInfo("resources", paginated=True, idempotent=True),
    "resources/read": MethodInfo("resources", input_required=True, idempotent=True),
    "resources/subscribe": MethodInfo("resources", "subscribe", until=V2025_11_25),
    "resources/unsubscribe": MethodInfo("resources", "subscribe", until=V2025_11_25),
    "prompts/list": MethodInfo("prompts", paginated=True, idempotent=True),
    "prompts/get": MethodInfo("prompts", input_required=True, idempotent=True),
    "completion/complete": MethodInfo("completions", idempotent=True),
    "logging/setLevel": MethodInfo("logging", until=V2025_11_25, idempotent=True),
    "subscriptions/listen": MethodInfo(since=V2026_07_28),
}


def check_method(method: str, revision: Revision, capabilities: object) -> str | None:
    """Why ``method`` may not be sent now, or ``None`` when it may.

    ``capabilities`` is the server's :class:`~mcpwire.protocol.types.ServerCapabilities`.
    """
    info = METHODS.get(method)
    if info is None:
        return None
    if not revision.at_least(info.since) or (info.until and revision.version > info.until):
        last = f" to {info.until}" if info.until else " on"
        return f"'{method}' does not exist in revision {revision.version} (it exists from {info.since}{last})"
    if info.capability:
        if info.capability == "completions" and not revision.at_least(V2025_03_26):
            return None  # 2024-11-05 had no completions capability: just try (UT-K01)
        value = getattr(capabilities, info.capability, None)
        if value is None:
            return f"the server did not advertise the '{info.capability}' capability"
        if info.flag and not (isinstance(value, dict) and value.get(info.flag) is True):
            return f"the server did not advertise '{info.capability}.{info.flag}'"
    return None
