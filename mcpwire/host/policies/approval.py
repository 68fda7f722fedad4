"""The approval policy: risk levels, allow/deny/ask rules, confirmations and approvers.

Theory of operation: each tool call gets a :class:`Risk`, by this rule:

1. a ``risk`` configured for the tool (``policy.tools.<glob>.risk``) decides;
2. else the tool's annotations, when it has a deciding hint: ``readOnlyHint: true`` is LOW, or
   MEDIUM when ``openWorldHint`` is not false (the schema's default is true: it may read the
   outside world); otherwise ``destructiveHint: false`` is HIGH, and ``destructiveHint: true``
   (or absent, the schema's default, with ``readOnlyHint: false``) is CRITICAL;
3. else the words of the tool's name (``deleteFile``, ``delete_file``, ``delete-file`` and
   ``files.delete`` all give ``delete``), the highest one found: CRITICAL for deleting,
   executing and paying (delete, remove, drop, exec, shell, kill, purge, reset, transfer,
   payment...), HIGH for changing things (create, write, update, edit, move, send, post, set,
   commit, install, enable, disable, toggle, run, schedule, add...), MEDIUM for reaching the outside
   world (fetch, download, browse, crawl, http, web, url, query) and LOW for local reads and pure
   computation (get, list, read, search, find, show, status, diff, log, convert, calculate...).
   Two refinements keep pure tools low: a changing word after a read word is a noun when it is
   not a bare verb or is a word that is also a noun (``list_posts``, ``get_commit``,
   ``read_deleted``), and ``add`` is LOW when every other word is a value or a read word
   (``add``, ``add_time``, ``add_numbers``; ``add_task`` stays HIGH). One raises: a changing word
   with a word naming code (query, sql, script, code, command) is CRITICAL (``write_query``,
   ``run_script``): the tool runs whatever it is given;
4. a name with no such word, and no annotations, is MEDIUM.

Annotations are untrusted hints (2025-11-25 server/tools: "clients MUST consider tool
annotations to be untrusted unless they come from trusted servers", TL-05): unless the server is
configured as trusted (``policy.trust_annotations``), a name with a CRITICAL word is never put
below HIGH by its annotations.

Rules decide allow/deny/ask per server and tool glob (the first match wins); without a matching
rule, calls at or above ``ask_at`` are asked (HIGH by default; MEDIUM when configured). Asking
goes to the call's own approver, else the host's, else to the host's approval queue, where the
call waits for a decision; a CRITICAL call needs ``critical_confirmations`` approvals (2). With
neither an approver nor a queue, a call that must be asked is denied at once. Silence past
``timeout`` denies.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import trio

from ...errors import ApprovalDenied
from .context import DEFAULT_APPROVAL_TIMEOUT, ApprovalRequest, Approver, CallContext, Decision, Risk

if TYPE_CHECKING:  # the queue module imports Risk from this package (whose __init__ imports this module)
    from ..approvals import Approval, ApprovalQueue

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "DEFAULT_ASK_AT",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "annotation_risk",
    "classify_risk",
    "name_risk",
]

log = logging.getLogger("mcpwire.host.policies.approval")

DEFAULT_ASK_AT: Final = Risk.HIGH
#: seconds a cancelled call may take to mark its approval expired
WITHDRAW_TIMEOUT: Final = 5.0

_KEYWORDS: Final[tuple[tuple[Risk, tuple[str, ...]], ...]] = (
    (
        Risk.CRITICAL,
        (
            "delete", "remove", "drop", "exec", "execute", "shell", "bash", "cmd", "sudo", "eval", "transfer",
            "payment", "pay", "purchase", "buy", "kill", "destroy", "purge", "wipe", "truncate", "erase", "rm",
            "reset", "revoke", "terminate", "uninstall", "overwrite",
        ),
    ),
    (
        Risk.HIGH,
        (
            "write", "update", "create", "upload", "edit", "modify", "move", "rename", "insert", "send", "post",
            "put", "patch", "set", "push", "commit", "merge", "install", "deploy", "publish", "append", "save",
            "store", "apply", "enable", "disable", "toggle", "start", "stop", "restart", "schedule", "trigger",
            "run", "launch", "invoke", "submit", "approve", "assign", "invite", "archive", "import", "register",
            "configure", "checkout", "clone", "replace", "change", "grant", "email", "reply", "comment", "add",
        ),
    ),
    (Risk.MEDIUM, ("fetch", "download", "browse", "crawl", "scrape", "http", "https", "web", "url", "curl", "query")),
    (
        Risk.LOW,
        (
            "get", "list", "read", "search", "find", "show", "view", "describe", "status", "info", "count",
            "lookup", "check", "diff", "log", "tree", "inspect", "explain", "summarize", "calculate", "compute",
            "convert", "format", "parse", "validate", "echo", "open", "ping", "help", "version", "subtract",
            "multiply", "divide", "sum",
        ),
    ),
)  # fmt: skip
#: changing words that are also nouns: after a read word they name a thing (``get_commit``)
_NOUNS: Final = frozenset(
    {
        "post", "comment", "patch", "commit", "set", "schedule", "update", "email", "push", "merge", "move",
        "change", "transfer", "payment", "run", "drop", "save", "store", "archive", "import", "reply",
        "checkout", "clone", "exec", "shell", "cmd", "log",
    }
)  # fmt: skip
#: words naming values, with which ``add`` is arithmetic (``add_time``)
_VALUES: Final = frozenset(
    {
        "time", "times", "date", "dates", "datetime", "timestamp", "duration", "durations", "interval",
        "offset", "delta", "day", "days", "hour", "hours", "minute", "minutes", "second", "seconds", "week",
        "weeks", "month", "months", "year", "years", "number", "numbers", "num", "nums", "int", "ints",
        "integer", "integers", "float", "floats", "decimal", "decimals", "value", "values", "two", "vector",
        "vectors", "matrix", "matrices", "timezone", "tz", "unit", "units", "percent", "percentage", "a", "b",
        "x", "y", "and", "to", "with",
    }
)  # fmt: skip
#: words naming code to run: with a changing word, the tool runs whatever it is given
_CODE: Final = frozenset({"query", "sql", "script", "scripts", "code", "command", "commands"})
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


#: every word form -> (the highest risk of a keyword it comes from, that keyword)
_WORD_RISK: Final[dict[str, tuple[Risk, str]]] = {}
for _risk, _keywords in reversed(_KEYWORDS):
    for _keyword in _keywords:
        _WORD_RISK.update(dict.fromkeys(_forms(_keyword), (_risk, _keyword)))


def _is_read(word: str) -> bool:
    entry = _WORD_RISK.get(word)
    return entry is not None and entry[0] is Risk.LOW


@functools.lru_cache(maxsize=4096)
def name_risk(tool: str) -> Risk | None:
    """The risk the words of a tool's name suggest, or ``None`` when no keyword matches."""
    words = _words(tool)
    risks: list[Risk] = []
    after_read = False
    for word in words:
        entry = _WORD_RISK.get(word)
        if entry is None:
            continue
        risk, keyword = entry
        if risk >= Risk.HIGH and after_read and (word != keyword or keyword in _NOUNS):
            continue  # "list_posts", "get_commit", "read_deleted": a thing, not an action
        if keyword == "add" and all(w in _VALUES or _is_read(w) for w in words if w != word):
            risk = Risk.LOW  # arithmetic: "add", "add_time"
        after_read = after_read or risk is Risk.LOW
        risks.append(risk)
    if not risks:
        return None
    if max(risks) is Risk.HIGH and any(w in _CODE for w in words):
        return Risk.CRITICAL  # changing or running code: "write_query", "run_script", "run_command"
    return max(risks)


def annotation_risk(
    *,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> Risk | None:
    """The risk the annotations claim, or ``None`` when no hint decides.

    Defaults as in the schema: ``openWorldHint`` and ``destructiveHint`` are true when absent,
    and ``destructiveHint`` means something only when ``readOnlyHint`` is false.
    """
    if read_only:
        return Risk.LOW if open_world is False else Risk.MEDIUM
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
    """A tool's risk: its annotations first, the words of its name second, MEDIUM when neither
    says anything. Untrusted annotations cannot put a name with a CRITICAL word below HIGH."""
    by_hints = annotation_risk(
        read_only=read_only, destructive=destructive, idempotent=idempotent, open_world=open_world
    )
    by_name = name_risk(tool)
    if by_hints is None:
        return Risk.MEDIUM if by_name is None else by_name
    if not trust_annotations and by_name is Risk.CRITICAL and by_hints < Risk.HIGH:
        return Risk.HIGH
    return by_hints


@dataclass(slots=True)
class ApprovalPolicy:
    """Decides whether a call may run.

    Args:
        rules: ``(server glob, tool glob, decision)``; the first match wins. A per-tool decision
            from the server's config (``CallContext.decision``) comes first.
        approver: asked when the decision is ``ask`` (a call's own approver comes first).
        ask_at: calls without a matching rule are asked at or above this risk, allowed below
            (``CallContext.ask_at``, from the server's config, comes first).
        timeout: seconds a decision may take; then the call is denied.
        trust_annotations: the server is trusted: its annotations may lower a tool's risk.
        queue: where asked calls become :class:`~mcpwire.host.approvals.Approval` objects and
            wait for a decision (from the approver, or from anyone deciding on the queue).
        critical_confirmations: approvals a CRITICAL call needs.
    """

    rules: Sequence[tuple[str, str, Decision]] = ()
    approver: Approver | None = None
    ask_at: Risk = DEFAULT_ASK_AT
    timeout: float = DEFAULT_APPROVAL_TIMEOUT
    trust_annotations: bool = False
    queue: ApprovalQueue | None = None
    critical_confirmations: int = 2

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
        ask_at = self.ask_at if ctx.ask_at is None else ctx.ask_at
        if risk >= ask_at:
            return "ask", f"risk {risk.name} is at or above {ask_at.name}"
        return "allow", f"risk {risk.name} is below {ask_at.name}"

    def confirmations(self, risk: Risk) -> int:
        return max(1, self.critical_confirmations) if risk is Risk.CRITICAL else 1

    async def check(self, ctx: CallContext) -> tuple[str, Mapping[str, object]]:
        """Returns ``(decision, arguments)``: ``allow``, ``approved`` or ``approved_modified``
        and the arguments to send. Sets ``ctx.risk`` (and ``ctx.approval_id`` with a queue).

        Raises:
            ApprovalDenied: a rule, a decision, or silence denied the call.

        Cancellation: cancels the approver; a pending approval is marked expired.
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
        approver = ctx.approver or self.approver
        if self.queue is not None:
            return await self._through_queue(ctx, self.queue, approver, risk, reason, where)
        if approver is None:
            raise ApprovalDenied(
                f"{where} needs approval ({reason}) but no approver is configured; pass approver= "
                "or approvals=ApprovalQueue() to the Host, or add an 'allow' rule"
            )
        return await self._ask(ctx, approver, risk, reason, where)

    def _request(self, ctx: CallContext, risk: Risk, reason: str, arguments: Mapping[str, object]) -> ApprovalRequest:
        return ApprovalRequest(
            ctx.server,
            ctx.tool,
            ctx.name or ctx.tool,
            dict(arguments),
            risk,
            reason,
            confirmations_needed=self.confirmations(risk),
            context=dict(ctx.context),
        )

    async def _ask(
        self, ctx: CallContext, approver: Approver, risk: Risk, reason: str, where: str
    ) -> tuple[str, Mapping[str, object]]:
        """Asks the approver alone (no queue), once per confirmation needed."""
        base = self._request(ctx, risk, reason, ctx.arguments)
        arguments: Mapping[str, object] = ctx.arguments
        edited = False
        confirmed = 0
        with trio.move_on_after(self.timeout):
            while confirmed < base.confirmations_needed:
                request = _replace(base, arguments=dict(arguments), confirmation=confirmed + 1)
                answer = await _call_approver(approver, request, where)
                if answer is True:
                    confirmed += 1
                elif isinstance(answer, Mapping) and not isinstance(answer, bool):
                    if dict(answer) != dict(arguments):
                        arguments, edited, confirmed = dict(answer), True, 1
                    else:
                        confirmed += 1
                else:
                    raise ApprovalDenied(f"{where} was denied by the approver (risk {risk.name})")
            return ("approved_modified" if edited else "approved"), arguments
        raise ApprovalDenied(f"{where}: no approval within {self.timeout:g}s; denied")

    async def _through_queue(
        self, ctx: CallContext, queue: ApprovalQueue, approver: Approver | None, risk: Risk, reason: str, where: str
    ) -> tuple[str, Mapping[str, object]]:
        request = self._request(ctx, risk, reason, ctx.arguments)
        approval = await queue.open(request, timeout=self.timeout)
        ctx.approval_id = approval.id
        try:
            async with trio.open_nursery() as nursery:
                if approver is not None:
                    nursery.start_soon(_relay, approver, queue, request, approval)
                final = await queue.wait(approval.id, timeout=self.timeout)
                nursery.cancel_scope.cancel()
            if final.pending:  # the clocks disagree: our own bound is what counts
                final = await queue.withdraw(approval.id, f"no decision within {self.timeout:g}s") or final
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(WITHDRAW_TIMEOUT):
                await queue.withdraw(approval.id, "the call was cancelled or failed while it waited")
            raise
        return _outcome(final, ctx, where, self.timeout)


def _replace(request: ApprovalRequest, **changes: object) -> ApprovalRequest:
    return dataclasses.replace(request, **changes)  # type: ignore[arg-type]


async def _call_approver(approver: Approver, request: ApprovalRequest, where: str) -> bool | Mapping[str, object]:
    try:
        return await approver(request)
    except Exception as exc:
        raise ApprovalDenied(f"{where}: the approver failed ({type(exc).__name__}: {exc}); denied") from exc


async def _relay(approver: Approver, queue: ApprovalQueue, base: ApprovalRequest, approval: Approval) -> None:
    """Asks the approver about a queued approval and records each answer on the queue, until it
    is decided (by the approver or by anyone else)."""
    from ..approvals import ApprovalNotPending  # here: that module imports this package

    current = approval
    try:
        while current.pending:
            request = _replace(
                base,
                id=current.id,
                arguments=dict(current.arguments_to_run),
                confirmation=current.confirmations + 1,
                confirmations_needed=current.confirmations_needed,
            )
            try:
                answer = await approver(request)
            except Exception as exc:
                log.info("approval %s: the approver failed: %s", current.id, exc)
                await queue.decide(
                    current.id,
                    approve=False,
                    reason=f"the approver failed ({type(exc).__name__}: {exc})",
                    by="approver",
                )
                return
            if answer is True:
                current = await queue.decide(current.id, approve=True, by="approver")
            elif isinstance(answer, Mapping) and not isinstance(answer, bool):
                current = await queue.decide(current.id, approve=True, arguments=answer, by="approver")
            else:
                current = await queue.decide(current.id, approve=False, by="approver")
    except ApprovalNotPending:
        return  # decided elsewhere first


def _outcome(final: Approval, ctx: CallContext, where: str, timeout: float) -> tuple[str, Mapping[str, object]]:
    from ..approvals import ApprovalState  # here: that module imports this package

    risk = final.risk.name
    if final.state is ApprovalState.APPROVED:
        edited = final.final_arguments is not None and final.final_arguments != dict(ctx.arguments)
        return ("approved_modified" if edited else "approved"), final.arguments_to_run
    if final.state is ApprovalState.DENIED:
        who = final.decided_by or "someone"
        because = f": {final.reason}" if final.reason else ""
        raise ApprovalDenied(f"{where} was denied by {who}{because} (risk {risk}, approval {final.id})")
    raise ApprovalDenied(f"{where}: no approval within {timeout:g}s; denied (approval {final.id})")
