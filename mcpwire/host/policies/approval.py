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
goes to the call's own approver, else the host's, and to the host's approval queue, where the
call waits for a decision; a CRITICAL call needs ``critical_confirmations`` approvals (2). With
neither an approver nor a queue, a call that must be asked is denied at once. Silence past
``timeout`` denies.

Someone other than the caller decides: the caller's own approver (a gateway client's user, asked
through elicitation) is asked only where the decision is ``ask-caller``, and never for a CRITICAL
call. While a queued call waits, its caller is followed (``CallContext.caller``): its presence is
recorded on the approval, and a caller gone for good (or a cancelled call) ends the approval as
abandoned; the call then fails with :class:`~mcpwire.errors.ApprovalAbandoned` and is never sent.
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

from ...errors import ApprovalAbandoned, ApprovalDenied
from .context import (
    DEFAULT_APPROVAL_TIMEOUT,
    ApprovalRequest,
    Approver,
    CallContext,
    Caller,
    Decision,
    Risk,
    Verdict,
)

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
#: seconds a cancelled call may take to mark its approval abandoned
WITHDRAW_TIMEOUT: Final = 5.0
#: seconds between two looks at a waiting call's caller (is it still there?)
CALLER_POLL: Final = 0.25

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

    def decide(self, ctx: CallContext, risk: Risk, *, explain: bool = True) -> tuple[Decision, str]:
        """The decision and its reason (``""`` with ``explain=False``: most calls are allowed,
        and nobody reads why)."""
        if ctx.decision is not None:
            return ctx.decision, f"the server's approval setting for {ctx.tool!r}" if explain else ""
        for server_glob, tool_glob, decision in self.rules:
            if fnmatch.fnmatchcase(ctx.server, server_glob) and fnmatch.fnmatchcase(ctx.tool, tool_glob):
                return decision, f"the rule ({server_glob!r}, {tool_glob!r})" if explain else ""
        ask_at = self.ask_at if ctx.ask_at is None else ctx.ask_at
        if risk >= ask_at:
            return "ask", f"risk {risk.name} is at or above {ask_at.name}" if explain else ""
        return "allow", f"risk {risk.name} is below {ask_at.name}" if explain else ""

    def confirmations(self, risk: Risk) -> int:
        return max(1, self.critical_confirmations) if risk is Risk.CRITICAL else 1

    async def check(self, ctx: CallContext) -> tuple[str, Mapping[str, object]]:
        """Returns ``(decision, arguments)``: ``allow``, ``approved`` or ``approved_modified``
        and the arguments to send. Sets ``ctx.risk`` (and ``ctx.approval_id`` with a queue).

        Raises:
            ApprovalAbandoned: the caller went away while the call waited for a decision.
            ApprovalDenied: a rule, a decision, or silence denied the call.

        Cancellation: cancels the approvers; a pending approval is marked abandoned.
        """
        if ctx.kind != "tool":
            return "allow", ctx.arguments
        risk = ctx.risk = self.risk(ctx)
        if self.decide(ctx, risk, explain=False)[0] == "allow":
            return "allow", ctx.arguments
        decision, reason = self.decide(ctx, risk)
        where = f"tool {ctx.tool!r} on server {ctx.server!r}"
        if decision == "deny":
            raise ApprovalDenied(f"{where} is denied by {reason} (risk {risk.name})")
        approvers: list[tuple[Approver, str]] = []
        trusted = ctx.approver or self.approver
        if trusted is not None:
            approvers.append((trusted, "callback"))
        if decision == "ask-caller" and ctx.caller_approver is not None:
            if risk is Risk.CRITICAL:
                reason += "; a CRITICAL call is never decided by its caller alone"
            else:
                approvers.append((ctx.caller_approver, "caller"))
        if self.queue is not None:
            return await self._through_queue(ctx, self.queue, approvers, risk, reason, where)
        if not approvers:
            raise ApprovalDenied(
                f"{where} needs approval ({reason}) but no approver is configured; pass approver= "
                "or approvals=ApprovalQueue() to the Host, or add an 'allow' rule"
            )
        return await self._ask(ctx, approvers, risk, reason, where)

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
        self, ctx: CallContext, approvers: Sequence[tuple[Approver, str]], risk: Risk, reason: str, where: str
    ) -> tuple[str, Mapping[str, object]]:
        """Asks the approvers alone (no queue), once per confirmation needed; the first answer of
        each round counts."""
        base = self._request(ctx, risk, reason, ctx.arguments)
        arguments: Mapping[str, object] = ctx.arguments
        edited = False
        confirmed = 0
        with trio.move_on_after(self.timeout):
            while confirmed < base.confirmations_needed:
                request = _replace(base, arguments=dict(arguments), confirmation=confirmed + 1)
                answer = _verdict(await _first_answer(approvers, request, where))
                if answer.approve and answer.arguments is None:
                    confirmed += 1
                elif answer.approve and answer.arguments is not None:
                    if dict(answer.arguments) != dict(arguments):
                        arguments, edited, confirmed = dict(answer.arguments), True, 1
                    else:
                        confirmed += 1
                else:
                    who = f" ({answer.by})" if answer.by else ""
                    raise ApprovalDenied(f"{where} was denied by the approver{who} (risk {risk.name})")
            return ("approved_modified" if edited else "approved"), arguments
        raise ApprovalDenied(f"{where}: no approval within {self.timeout:g}s; denied")

    async def _through_queue(
        self,
        ctx: CallContext,
        queue: ApprovalQueue,
        approvers: Sequence[tuple[Approver, str]],
        risk: Risk,
        reason: str,
        where: str,
    ) -> tuple[str, Mapping[str, object]]:
        request = self._request(ctx, risk, reason, ctx.arguments)
        approval = await queue.open(request, timeout=self.timeout)
        ctx.approval_id = approval.id
        try:
            async with trio.open_nursery() as nursery:
                for approver, via in approvers:
                    by = ctx.context.get("caller") if via == "caller" else None
                    nursery.start_soon(_relay, approver, queue, request, approval, via, by or _name_of(approver))
                if ctx.caller is not None:
                    nursery.start_soon(_follow_caller, ctx.caller, queue, approval.id)
                final = await queue.wait(approval.id, timeout=self.timeout)
                nursery.cancel_scope.cancel()
            if final.pending:  # the clocks disagree: our own bound is what counts
                final = await queue.withdraw(approval.id, f"no decision within {self.timeout:g}s") or final
        except BaseException as exc:
            with trio.CancelScope(shield=True), trio.move_on_after(WITHDRAW_TIMEOUT):
                await queue.abandon(approval.id, _why_gone(ctx.caller, exc))
            raise
        return _outcome(final, ctx, where, self.timeout)


def _why_gone(caller: Caller | None, exc: BaseException) -> str:
    """Why a call that waited for its approval ended without a decision."""
    said = caller.gone(cancelled=True) if caller is not None else None
    if said:
        return said
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # a nursery wraps what it raises
    if isinstance(exc, trio.Cancelled):
        return "the call was cancelled while it waited (its caller stopped waiting)"
    return f"the call failed while it waited ({type(exc).__name__})"


async def _follow_caller(caller: Caller, queue: ApprovalQueue, approval_id: str) -> None:
    """Records the caller's comings and goings on the approval; abandons it once the caller is
    gone for good (the queue's wait then returns it abandoned)."""
    present = True
    while True:
        gone = caller.gone()
        if gone is not None:
            log.info("approval %s: abandoned: %s", approval_id, gone)
            await queue.abandon(approval_id, gone)
            return
        now_present = caller.present()
        if now_present != present:
            present = now_present
            await queue.mark_caller(approval_id, present=present)
        await trio.sleep(CALLER_POLL)


def _replace(request: ApprovalRequest, **changes: object) -> ApprovalRequest:
    return dataclasses.replace(request, **changes)  # type: ignore[arg-type]


def _name_of(approver: Approver) -> str:
    """A callback's name, as an approval records who decided."""
    return str(getattr(approver, "__name__", None) or type(approver).__name__)


def _verdict(answer: bool | Mapping[str, object] | Verdict) -> Verdict:
    """Any approver's answer as a :class:`Verdict`."""
    if isinstance(answer, Verdict):
        return answer
    if answer is True:
        return Verdict(approve=True)
    if isinstance(answer, Mapping) and not isinstance(answer, bool):
        return Verdict(approve=True, arguments=answer)
    return Verdict(approve=False)


async def _call_approver(
    approver: Approver, request: ApprovalRequest, where: str
) -> bool | Mapping[str, object] | Verdict:
    try:
        return await approver(request)
    except Exception as exc:
        raise ApprovalDenied(f"{where}: the approver failed ({type(exc).__name__}: {exc}); denied") from exc


async def _first_answer(
    approvers: Sequence[tuple[Approver, str]], request: ApprovalRequest, where: str
) -> bool | Mapping[str, object] | Verdict:
    """The first answer of several approvers asked at once (the others are cancelled)."""
    if len(approvers) == 1:
        return await _call_approver(approvers[0][0], request, where)
    answers: list[bool | Mapping[str, object] | Verdict] = []
    async with trio.open_nursery() as nursery:

        async def ask(approver: Approver) -> None:
            answers.append(await _call_approver(approver, request, where))
            nursery.cancel_scope.cancel()

        for approver, _ in approvers:
            nursery.start_soon(ask, approver)
    return answers[0]


async def _relay(
    approver: Approver, queue: ApprovalQueue, base: ApprovalRequest, approval: Approval, via: str, by: str
) -> None:
    """Asks the approver about a queued approval and records each answer on the queue (with who
    gave it and through what), until it is decided (by the approver or by anyone else)."""
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
                answer = _verdict(await approver(request))
            except Exception as exc:
                log.info("approval %s: the approver failed: %s", current.id, exc)
                await queue.decide(
                    current.id,
                    approve=False,
                    reason=f"the approver failed ({type(exc).__name__}: {exc})",
                    by=by,
                    via=via,
                )
                return
            current = await queue.decide(
                current.id,
                approve=answer.approve,
                arguments=answer.arguments if answer.approve else None,
                reason=answer.reason,
                by=answer.by or by,
                via=via,
            )
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
    if final.state is ApprovalState.ABANDONED:
        because = f": {final.reason}" if final.reason else ""
        raise ApprovalAbandoned(f"{where} was not run: its caller went away{because} (approval {final.id})")
    raise ApprovalDenied(f"{where}: no approval within {timeout:g}s; denied (approval {final.id})")
