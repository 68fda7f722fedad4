"""The approval policy: risk levels, allow/deny/ask rules, and an async approver.

Theory of operation: each tool call gets a :class:`Risk`. Annotations (``readOnlyHint``,
``destructiveHint``, ``idempotentHint``, ``openWorldHint``) give one level, the words of the
tool's name another (delete/remove/drop/exec/shell/transfer/payment: CRITICAL; write/update/
create/upload: HIGH; list/search/fetch: MEDIUM). Annotations are untrusted hints (2025-11-25
server/tools: "clients MUST consider tool annotations to be untrusted unless they come from
trusted servers", TL-05), so they may raise the risk but not lower it below the name's, unless the
server is configured as trusted. Rules decide allow/deny/ask per server and tool glob (the first
match wins); without a matching rule, calls at or above ``ask_at`` are asked. The approver
answers True, False, or new arguments; no answer within ``timeout`` is a denial.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import trio

from ...errors import ApprovalDenied
from .context import CallContext, Decision, Risk

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "annotation_risk",
    "classify_risk",
    "name_risk",
]

log = logging.getLogger("mcpwire.host.policies.approval")

DEFAULT_APPROVAL_TIMEOUT: Final = 300.0

_KEYWORDS: Final[tuple[tuple[Risk, tuple[str, ...]], ...]] = (
    (
        Risk.CRITICAL,
        (
            "delete", "remove", "drop", "exec", "execute", "shell", "transfer", "payment", "pay", "kill",
            "destroy", "purge", "wipe", "truncate", "erase", "rm", "sudo", "eval",
        ),
    ),
    (
        Risk.HIGH,
        (
            "write", "update", "create", "upload", "edit", "modify", "move", "rename", "insert", "send",
            "post", "put", "patch", "set", "add", "push", "commit", "merge", "install", "deploy", "publish",
        ),
    ),
    (Risk.MEDIUM, ("list", "search", "fetch", "get", "read", "query", "find", "browse", "download", "view")),
)  # fmt: skip
_WORDS: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _words(name: str) -> list[str]:
    """``deleteFile``, ``delete_file``, ``delete-file`` and ``files.delete`` -> words."""
    return [w.lower() for w in _WORDS.findall(name)]


_SUFFIXES: Final = ("", "s", "es", "d", "ed", "ing", "er", "ers")


def _forms(keyword: str) -> list[str]:
    # "deletes", "deleted", "creating", "deletion" match; "settings", "address", "dropbox" do not
    forms = [keyword + suffix for suffix in _SUFFIXES]
    if keyword.endswith("e"):
        forms += [keyword[:-1] + "ing", keyword[:-1] + "ion"]
    return forms


#: every word form -> the highest risk of a keyword it comes from
_WORD_RISK: Final[dict[str, Risk]] = {}
for _risk, _keywords in reversed(_KEYWORDS):
    for _keyword in _keywords:
        _WORD_RISK.update(dict.fromkeys(_forms(_keyword), _risk))


@functools.lru_cache(maxsize=4096)
def name_risk(tool: str) -> Risk | None:
    """The risk the words of a tool's name suggest, or ``None`` when no keyword matches."""
    risks = [r for w in _words(tool) if (r := _WORD_RISK.get(w)) is not None]
    return max(risks) if risks else None


def annotation_risk(
    *,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> Risk | None:
    """The risk the annotations claim, or ``None`` without annotations.

    Defaults as in the schema: ``destructiveHint`` true and ``openWorldHint`` true when absent,
    ``destructiveHint`` meaningful only when ``readOnlyHint`` is false.
    """
    if read_only is None and destructive is None and idempotent is None and open_world is None:
        return None
    if read_only:
        return Risk.MEDIUM if open_world else Risk.LOW
    if destructive is False:
        return Risk.HIGH
    if destructive is True or read_only is False:
        return Risk.CRITICAL
    return None


def classify_risk(
    tool: str,
    *,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    trust_annotations: bool = False,
) -> Risk:
    """A tool's risk from its annotations and its name (MEDIUM when neither says anything).

    Untrusted annotations only raise the risk above the name's; trusted ones decide alone.
    """
    by_name = name_risk(tool)
    by_hints = annotation_risk(
        read_only=read_only, destructive=destructive, idempotent=idempotent, open_world=open_world
    )
    if by_hints is None:
        return Risk.MEDIUM if by_name is None else by_name
    if trust_annotations or by_name is None:
        return by_hints
    return max(by_hints, by_name)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approver is asked about."""

    server: str
    tool: str  #: the tool's name on its server
    name: str  #: the namespaced name
    arguments: Mapping[str, object]
    risk: Risk
    reason: str  #: why approval is needed (a rule, or the risk threshold)


#: An approver answers True (approve), False (deny), or a mapping: approve with these arguments.
Approver = Callable[[ApprovalRequest], Awaitable[bool | Mapping[str, object]]]


@dataclass(slots=True)
class ApprovalPolicy:
    """Decides whether a call may run.

    Args:
        rules: ``(server glob, tool glob, decision)``; the first match wins. A per-tool decision
            from the server's config (``CallContext.decision``) comes first.
        approver: asked when the decision is ``ask``; without one, such calls are denied.
        ask_at: calls without a matching rule are asked at or above this risk, allowed below.
        timeout: seconds the approver has to answer; then the call is denied.
        trust_annotations: the server is trusted: its annotations may lower a tool's risk.
    """

    rules: Sequence[tuple[str, str, Decision]] = ()
    approver: Approver | None = None
    ask_at: Risk = Risk.CRITICAL
    timeout: float = DEFAULT_APPROVAL_TIMEOUT
    trust_annotations: bool = False

    def risk(self, ctx: CallContext) -> Risk:
        if ctx.risk is not None:
            return ctx.risk
        return classify_risk(
            ctx.tool,
            read_only=ctx.read_only,
            destructive=ctx.destructive,
            idempotent=ctx.idempotent,
            open_world=ctx.open_world,
            trust_annotations=self.trust_annotations,
        )

    def decide(self, ctx: CallContext, risk: Risk) -> tuple[Decision, str]:
        """The decision and its reason."""
        if ctx.decision is not None:
            return ctx.decision, f"the server's approval setting for {ctx.tool!r}"
        for server_glob, tool_glob, decision in self.rules:
            if fnmatch.fnmatchcase(ctx.server, server_glob) and fnmatch.fnmatchcase(ctx.tool, tool_glob):
                return decision, f"the rule ({server_glob!r}, {tool_glob!r})"
        if risk >= self.ask_at:
            return "ask", f"risk {risk.name} is at or above {self.ask_at.name}"
        return "allow", f"risk {risk.name} is below {self.ask_at.name}"

    async def check(self, ctx: CallContext) -> tuple[str, Mapping[str, object]]:
        """Returns ``(decision, arguments)``: ``allow``, ``approved`` or ``approved_modified``
        and the arguments to send. Sets ``ctx.risk``.

        Raises:
            ApprovalDenied: a rule, the approver, or the approver's silence denied the call.

        Cancellation: cancels the approver.
        """
        if ctx.kind != "tool":
            return "allow", ctx.arguments
        risk = ctx.risk = self.risk(ctx)
        decision, reason = self.decide(ctx, risk)
        where = f"tool {ctx.tool!r} on server {ctx.server!r}"
        if decision == "allow":
            return "allow", ctx.arguments
        if decision == "deny":
            raise ApprovalDenied(f"{where} is denied by {reason} (risk {risk.name})")
        if self.approver is None:
            raise ApprovalDenied(
                f"{where} needs approval ({reason}) but no approver is configured; "
                "pass approver= to the Host, or add an 'allow' rule"
            )
        request = ApprovalRequest(ctx.server, ctx.tool, ctx.name or ctx.tool, dict(ctx.arguments), risk, reason)
        answer: bool | Mapping[str, object] = False
        with trio.move_on_after(self.timeout) as scope:
            try:
                answer = await self.approver(request)
            except Exception as exc:
                raise ApprovalDenied(f"{where}: the approver failed ({type(exc).__name__}: {exc}); denied") from exc
        if scope.cancelled_caught:
            raise ApprovalDenied(f"{where}: no approval within {self.timeout:g}s; denied")
        if answer is True:
            return "approved", ctx.arguments
        if isinstance(answer, Mapping) and not isinstance(answer, bool):
            return "approved_modified", dict(answer)
        raise ApprovalDenied(f"{where} was denied by the approver (risk {risk.name})")
