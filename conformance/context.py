"""What a check works with: the target, the revision under test, and fresh wires.

Theory of operation: each check gets its own :class:`Context`. :meth:`Context.session` opens a
wire (a server process on stdio, a new HTTP session over HTTP) and, in the legacy era, performs
the ``initialize`` handshake for the revision under test; in the modern era it only connects, and
:meth:`Context.params` adds the per-request ``_meta`` (2026-07-28 basic/index §_meta). Every wire
opened is kept, so the report can show the exchange that proves a failure.

On stdio the run's :class:`~.pool.WirePool` (``Context.pool``) starts the processes: a plain
``session()`` may get a process that earlier checks of the same revision left exactly as new (see
:mod:`.pool`; the first ``session()`` of a check only), :meth:`Context.raw` always a new one.
Without a pool (a context built by hand) every wire is a new process, as before.

Tool calls: calling the tools of an arbitrary server can change the world (a tool may delete
files or send mail), so checks that need a tool call ask :meth:`Context.callable_tools`, which
applies the run's :class:`ToolPolicy`: ``none`` (the default: such checks report "skipped"),
``read-only`` (tools annotated ``readOnlyHint: true`` and not ``destructiveHint: true``; the
annotations are the server's word, 2025-03-26 server/tools: "clients MUST consider tool
annotations to be untrusted unless they come from trusted servers", so this is an opt-in for
servers the user trusts), ``all``, plus an explicit allow-list of tool names.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import trio

from mcpwire.redaction import SecretValues, redact_argv, redact_url, shorten

from .audit import SchemaAudit
from .evidence import WireRecord
from .harness import NoAnswer, WireBase, open_wire
from .levels import Level
from .model import SkipKind
from .pace import Pace
from .pool import Lease, WirePool

__all__ = [
    "CLIENT_INFO",
    "META_CAPS",
    "META_INFO",
    "META_VERSION",
    "CheckEnded",
    "Context",
    "Target",
    "ToolPolicy",
    "shown",
]

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SUBSCRIPTION: Final = "io.modelcontextprotocol/subscriptionId"
CLIENT_INFO: Final = {"name": "mcpwire-check", "version": "0.1.0"}
#: Client capabilities declared by checks that want the server to ask for input.
FULL_CAPS: Final[dict[str, Any]] = {"sampling": {}, "elicitation": {}, "roots": {}}


class CheckEnded(Exception):
    """Ends a check with an outcome other than pass.

    ``level`` (for ``fail``) is the level of the rule broken when it is not the check's own (see
    :meth:`Context.violation`).
    """

    def __init__(
        self,
        status: str,
        message: str,
        *,
        level: Level | None = None,
        skipped_for: SkipKind | None = None,
        skip_detail: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.level = level
        self.skipped_for = skipped_for
        self.skip_detail = skip_detail


@dataclass(frozen=True, slots=True)
class Target:
    """A server to check: a stdio command, or an HTTP URL.

    ``transport`` is ``"stdio"``, ``"http"`` (Streamable HTTP), ``"sse"`` (the 2024-11-05 HTTP+SSE
    transport) or ``"auto"`` (a URL whose transport the runner detects). ``headers`` go with every
    HTTP request (credentials: never shown in reports). ``era`` pins the revisions checked to
    ``"legacy"`` or ``"modern"``. ``env`` is the whole environment of a stdio server (None: ours;
    the command line gives it the minimal one, see :mod:`.cli`); ``secrets`` are values the user
    gave (``--env`` values, tokens) that no report may show.
    """

    argv: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    name: str = ""
    #: seconds the server gets to exit after stdin EOF (SV-08 and every shutdown)
    eof_grace: float = 2.0
    url: str | None = None
    transport: str = "stdio"
    headers: Mapping[str, str] | None = None
    era: str | None = None
    cwd: str | None = None
    secrets: tuple[str, ...] = ()
    #: more values no report may show (every ``--env`` value, header and token the user gave)
    masked: SecretValues | None = None
    #: the Python module ``argv`` runs (``python ... -m MODULE``), when its processes may be forks
    #: of one process that imported it (see :mod:`.pool`)
    fork_module: str | None = None
    #: what ``fork_module`` imports only once it runs (imported once, before the forks)
    fork_preload: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The server as reports show it: its name, else its URL or command line, redacted."""
        if self.name:
            return self.name
        if self.url is not None:
            return redact_url(self.url)
        return " ".join(redact_argv(self.argv))

    @property
    def is_http(self) -> bool:
        return self.url is not None

    def pool(self, nursery: trio.Nursery, *, reuse: bool = True) -> WirePool:
        """The pool of this stdio server's processes, their tasks in ``nursery`` (see :mod:`.pool`)."""
        return WirePool(
            nursery,
            self.argv,
            env=self.env,
            eof_grace=self.eof_grace,
            cwd=self.cwd,
            reuse=reuse,
            fork_module=self.fork_module,
            fork_preload=self.fork_preload,
        )


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Which tools checks may call (see the module docstring)."""

    #: "none", "read-only" or "all"
    mode: str = "none"
    allow: tuple[str, ...] = ()

    def refuses(self, tool: Mapping[str, Any]) -> str | None:
        """None when ``tool`` may be called, else why not."""
        name = str(tool.get("name"))
        if name in self.allow or self.mode == "all":
            return None
        if self.mode == "read-only":
            annotations = tool.get("annotations")
            if not isinstance(annotations, dict) or annotations.get("readOnlyHint") is not True:
                return f"tool {name!r} is not annotated readOnlyHint"
            if annotations.get("destructiveHint") is True:
                return f"tool {name!r} is annotated destructiveHint"
            return None
        return "tool calls are off (enable with --call-tools read-only|all or --call-tool NAME)"


@dataclass(slots=True)
class Context:
    """The state of one check run against one revision."""

    target: Target
    revision: str
    era: str
    capabilities: dict[str, Any]
    supported: tuple[str, ...]
    timeout: float = 5.0
    #: the wires the check opened, in order; a pooled wire is replaced by its record when the
    #: check gives it back (the process may serve another check)
    wires: list[WireBase | WireRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    pool: WirePool | None = None
    #: the run's observed latencies: every wire of the check waits by them (see :mod:`.pace`)
    pace: Pace | None = None
    #: the run's schema audit: every result a wire of this check receives goes to it (SV-06)
    audit: SchemaAudit | None = None
    _leased: bool = False

    # -- outcomes ---------------------------------------------------------------------------

    def fail(self, message: str) -> NoReturn:
        """The rule is broken: a failure of a MUST rule, a warning of a SHOULD rule (a failure with
        ``--strict``), at the level the rule has in the revision under test."""
        raise CheckEnded("fail", message)

    def violation(self, message: str, level: Level | str) -> NoReturn:
        """A part of the rule with a level of its own is broken (SV-36b: below the requested log
        level is a SHOULD inside a MUST check); judged like :meth:`fail` at ``level``."""
        raise CheckEnded("fail", message, level=Level(level))

    def warn(self, message: str) -> NoReturn:
        """A deviation that proves no violation (a heuristic, or a case the spec leaves open): a
        warning whatever the check's level, and still a warning with ``--strict``."""
        raise CheckEnded("warning", message)

    def skip(self, why: str, *, kind: SkipKind | None = None, detail: tuple[str, ...] = ()) -> NoReturn:
        """Ends the check as skipped; ``kind`` is how the reports group it (see :class:`SkipKind`)."""
        raise CheckEnded("skipped", why, skipped_for=kind, skip_detail=detail)

    def not_observed(self, why: str) -> NoReturn:
        raise CheckEnded("not_observed", why)

    def cannot_judge(self, why: str) -> NoReturn:
        """Nothing proves the rule broken or kept (no answer within the window, on a server that
        may only be slow): the ``error`` outcome, never a failure."""
        raise CheckEnded("error", f"could not judge: {why}")

    async def silence_proven(self, wire: Any, what: str) -> str:
        """After ``what`` got no answer: whether that silence is evidence. The server is asked a
        ping (2026-07-28: ``server/discover``) within the run's window; when it answers, the
        silence was the server's choice and this returns how it was shown; when its output closed,
        it ended (also evidence). Otherwise the server may only be slow and the check cannot judge
        (:meth:`cannot_judge`)."""
        closed = getattr(wire, "stdout_closed", False)
        if closed:
            return "the server closed its stdout"
        method = "ping" if self.era == "legacy" else "server/discover"
        try:
            await self.call(wire, method, {} if method == "ping" else None)
        except NoAnswer as exc:
            if getattr(wire, "stdout_closed", False):
                return "the server closed its stdout"
            self.cannot_judge(f"{what} got no answer, and neither did a later {method} ({exc})")
        return f"a later {method} was answered"

    async def still_answering(self, wire: Any, after: str) -> None:
        """Fails the check when the server answers nothing after ``after``: its output closed, or
        two more requests got no answer, the second with twice the window. The windows follow the
        latencies this run observed (:mod:`.pace`), so a server that answered in a second before
        and nothing in many times that after stopped answering; one that answers either request is
        still answering (the caller goes on judging)."""
        method = "ping" if self.era == "legacy" else "server/discover"
        for factor in (1.0, 2.0):
            if getattr(wire, "stdout_closed", False):
                break
            try:
                await self.call(wire, method, {} if method == "ping" else None, timeout=self.timeout * factor)
            except NoAnswer:
                continue
            return
        if getattr(wire, "stdout_closed", False):
            self.fail(f"the server closed its stdout after {after}")
        window = wire.answer_window(self.timeout)
        self.fail(f"the server stopped answering after {after} (two requests, {window:.0f} s and {2 * window:.0f} s)")

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def transport(self) -> str:
        return self.target.transport

    # -- wires ------------------------------------------------------------------------------

    def _watch(self, wire: WireBase) -> None:
        """The run's pace sizes ``wire``'s waits; its results go to the run's schema audit."""
        wire.pace = self.pace
        audit, revision = self.audit, self.revision
        wire.on_answer = (
            None
            if audit is None
            else (lambda method, params, response: audit.answer(revision, method, response, params))
        )

    @asynccontextmanager
    async def _lent(self, lease: Lease) -> AsyncIterator[Any]:
        """Lend ``lease``'s wire to the check; give it back (clean when the block ended normally or with
        the check's verdict: the pool then judges the record)."""
        assert self.pool is not None
        self._watch(lease.wire)
        self.wires.append(lease.wire)
        clean = False
        try:
            yield lease.wire
            clean = True
        except CheckEnded as ended:
            # a verdict changes nothing in the process: the record decides, as after a pass; a
            # check that could not judge leaves a server that may still be busy with it
            clean = ended.status != "error"
            raise
        finally:
            record = self.pool.give_back(lease, clean=clean)
            at = next(i for i, w in enumerate(self.wires) if w is lease.wire)
            self.wires[at] = record

    @asynccontextmanager
    async def raw(self, *, headers: Mapping[str, str] | None = None, auth: bool = True) -> AsyncIterator[Any]:
        """A fresh wire, nothing sent yet: a new process (stdio) or a new HTTP client.

        ``headers`` are added to the target's; ``auth=False`` leaves the target's out.
        """
        if not self.target.is_http and self.pool is not None:
            async with self._lent(await self.pool.fresh()) as wire:
                yield wire
            return
        if not self.target.is_http:
            async with open_wire(
                self.target.argv, env=self.target.env, eof_grace=self.target.eof_grace, cwd=self.target.cwd
            ) as wire:
                self._watch(wire)
                self.wires.append(wire)
                yield wire
            return
        from .http_harness import open_http_wire

        extra = dict(self.target.headers or {}) if auth else {}
        extra.update(headers or {})
        assert self.target.url is not None
        async with open_http_wire(
            self.target.url, self.revision, transport=self.target.transport, headers=extra
        ) as http_wire:
            self._watch(http_wire)
            self.wires.append(http_wire)
            yield http_wire

    @asynccontextmanager
    async def session(
        self, *, capabilities: dict[str, Any] | None = None, initialized: bool = True
    ) -> AsyncIterator[Any]:
        """A wire initialized for the revision under test in the legacy era (connected in the
        modern one); on stdio, possibly a process earlier checks left as new (see the module
        docstring)."""
        if not self.target.is_http and self.pool is not None and not capabilities and initialized and not self._leased:
            self._leased = True
            lease = await self.pool.session(self.revision)
            async with self._lent(lease) as wire:
                if lease.fresh:
                    await self._handshake(wire, capabilities, initialized)
                    self.pool.handshake_done(lease)
                yield wire
            return
        async with self.raw() as wire:
            await self._handshake(wire, capabilities, initialized)
            yield wire

    async def _handshake(self, wire: Any, capabilities: dict[str, Any] | None, initialized: bool) -> None:
        if self.era != "legacy":
            return
        answer = await wire.request(
            "initialize",
            {"protocolVersion": self.revision, "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO},
            timeout=self.timeout,  # a wire's first answer gets the start-up allowance (FIRST_ANSWER_FACTOR)
        )
        if "result" not in answer:
            self.fail(f"initialize for {self.revision} failed: {shown(answer.get('error'))}")
        if initialized:
            await wire.notify("notifications/initialized")

    def params(
        self, params: dict[str, Any] | None = None, *, capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``params`` for the revision under test: with the per-request ``_meta`` when modern."""
        out = dict(params or {})
        if self.era == "modern":
            meta = dict(out.get("_meta") or {})
            meta.setdefault(META_VERSION, self.revision)
            meta.setdefault(META_CAPS, capabilities or {})
            meta.setdefault(META_INFO, CLIENT_INFO)
            out["_meta"] = meta
        return out

    async def call(
        self,
        wire: Any,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """A request with the era's params; returns the whole response."""
        return dict(
            await wire.request(method, self.params(params, capabilities=capabilities), timeout=timeout or self.timeout)
        )

    async def result(self, wire: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``result`` of a request; an error answer fails the check, but for an internal error
        (-32603: the server failed inside, e.g. a proxy whose backend was busy), after which the
        check cannot judge."""
        answer = await self.call(wire, method, params)
        result = answer.get("result")
        error = answer.get("error")
        if isinstance(error, dict) and error.get("code") == -32603:
            self.cannot_judge(f"{method} answered an internal error: {shown(answer)}")
        if not isinstance(result, dict):
            self.fail(f"{method} answered without an object result: {shown(answer)}")
        return result

    async def list_all(
        self,
        wire: Any,
        method: str,
        key: str,
        *,
        max_pages: int = 50,
        pages: list[dict[str, Any]] | None = None,
        judge: bool = False,
    ) -> list[dict[str, Any]]:
        """Follow ``nextCursor``; a page without ``key`` fails the check.

        A cursor that repeats, or pagination past ``max_pages``, fails the check only with
        ``judge=True`` (SV-33b judges termination); otherwise the items so far are returned.
        ``pages`` (when given) receives every page's result.
        """
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        cursor: str | None = None
        for _ in range(max_pages):
            result = await self.result(wire, method, {"cursor": cursor} if cursor is not None else None)
            if pages is not None:
                pages.append(result)
            page = result.get(key)
            if not isinstance(page, list):
                self.fail(f"{method} result has no '{key}' array")
            items.extend(x for x in page if isinstance(x, dict))
            nxt = result.get("nextCursor")
            if nxt is None:
                return items
            if not isinstance(nxt, str) or nxt in seen:
                if judge:
                    self.fail(
                        f"{method}: nextCursor {shown(nxt, 120)} repeats or is not a string (pagination does not "
                        "terminate)"
                    )
                self.note(f"{method}: pagination stopped at a repeated cursor {shown(nxt, 60)}")
                return items
            seen.add(nxt)
            cursor = nxt
        if judge:
            self.fail(f"{method}: still paginating after {max_pages} pages")
        return items

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    # -- tool calls -------------------------------------------------------------------------

    def require_tool_calls(self) -> None:
        """Skip the check at once when the policy allows no tool call at all."""
        if self.tools.mode == "none" and not self.tools.allow:
            self.skip(ToolPolicy().refuses({}) or "tool calls are off", kind=SkipKind.TOOLS_OFF)

    async def callable_tools(self, wire: Any) -> list[dict[str, Any]]:
        """The listed tools this run may call; skips the check when there is none."""
        self.require_tool_calls()
        if not self.has("tools"):
            self.skip("the server does not advertise tools", kind=SkipKind.CAPABILITY, detail=("tools",))
        tools = await self.list_all(wire, "tools/list", "tools")
        allowed = [t for t in tools if self.tools.refuses(t) is None]
        if not allowed:
            reasons = sorted({self.tools.refuses(t) or "" for t in tools}) or ["the server lists no tools"]
            # with calls off, every listed tool is refused for that one reason
            off = self.tools.mode == "none" and bool(tools)
            kind = SkipKind.TOOLS_OFF if off else SkipKind.TOOLS_REFUSED
            self.skip("no tool may be called: " + "; ".join(reasons[:3]), kind=kind)
        return allowed

    async def call_tool(
        self,
        wire: Any,
        tool: Mapping[str, Any],
        arguments: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Call ``tool`` (the policy was applied by :meth:`callable_tools`); the whole response."""
        params: dict[str, Any] = {
            "name": tool.get("name"),
            "arguments": example_arguments(tool.get("inputSchema")) if arguments is None else arguments,
        }
        if meta:
            params["_meta"] = dict(meta)
        try:
            return await self.call(wire, "tools/call", params, capabilities=capabilities, timeout=timeout)
        except NoAnswer as exc:
            self.fail(f"tools/call {tool.get('name')!r}: {exc}")


def example_arguments(schema: Any) -> dict[str, Any]:
    """Minimal arguments that satisfy a tool's ``inputSchema``: every required property gets its
    default, first example, const, first enum value, or a small value of its type."""
    if not isinstance(schema, dict):
        return {}
    found = schema.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    out: dict[str, Any] = {}
    for name in schema.get("required") or []:
        if isinstance(name, str):
            out[name] = _example(properties.get(name), schema.get("$defs") or schema.get("definitions") or {}, 0)
    return out


def _example(schema: Any, defs: Mapping[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return "x"
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        return _example(defs.get(ref.rsplit("/", 1)[1]), defs, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _example(schema[key][0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else "string")
    if kind == "object":
        return example_arguments(schema)
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        return [_example(schema.get("items"), defs, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + (1 if "exclusiveMinimum" in schema else 0) if isinstance(low, int | float) else 0
        high = schema.get("maximum")
        if isinstance(high, int | float) and value > high:
            value = high
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    length = int(schema.get("minLength") or 1)
    return "x" * max(1, length)


def shown(value: Any, limit: int = 300) -> str:
    """A JSON value as a message shows it: compact JSON, cut to ``limit`` characters with ``…``.

    Values JSON cannot encode (and hostile depth) fall back to ``repr``, cut the same way.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=repr)
    except (ValueError, TypeError, RecursionError):
        text = repr(value) if not isinstance(value, dict | list) else f"<{type(value).__name__} too deep to show>"
    return shorten(text, limit)


async def list_if_served(
    ctx: Context, wire: Any, method: str, key: str, *, pages: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]] | None:
    """:meth:`Context.list_all`, except that a first page answered with a JSON-RPC error gives None
    (noted) instead of failing the check.

    For checks that judge what a list result contains, not whether the method is implemented: a
    schema-valid error (e.g. -32601 for ``resources/templates/list``, which no revision requires of
    a server with the ``resources`` capability) is no result to judge.
    """
    first = await ctx.call(wire, method)
    error = first.get("error")
    if "result" not in first and isinstance(error, dict):
        ctx.note(f"{method} answered error {error.get('code')!r} ({str(error.get('message'))[:80]!r}): not judged")
        return None
    return await ctx.list_all(wire, method, key, pages=pages)
