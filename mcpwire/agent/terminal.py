"""The terminal side of ``mcpwire chat``: rendering a run's events, asking approvals, the session.

Theory of operation: :class:`Renderer` turns events into text - the answer streamed to stdout,
tool calls and their results as indented lines on stderr - and every piece of text a model or a
server wrote goes through :func:`mcpwire.redaction.clean_terminal` (and the configuration's secrets
are masked) before it is written. :class:`Terminal` reads lines from stdin in a worker thread, so
the run goes on (and can be cancelled) while a line is awaited. :func:`ask_approval` shows a call
waiting for approval and reads the decision: ``y``, ``n [reason]``, ``e`` (edit the arguments in
``$EDITOR``), or a JSON object (approve with those arguments). :func:`run_chat` starts the host and
answers one prompt, or reads prompts until ``/exit`` or the end of input, keeping the conversation
between prompts (a failed prompt is dropped from it, so the next request is well formed).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TextIO

import msgspec
import trio

from ..client import ClientOptions
from ..host import Host, HostConfig
from ..host.cli import config_secrets
from ..host.policies import redact
from ..redaction import SecretValues, clean_terminal, shorten
from .agent import Agent
from .errors import AgentError
from .events import (
    ApprovalRequired,
    ApprovalResolved,
    Failed,
    RunEvent,
    TextDelta,
    ToolCallStarted,
    ToolResult,
)
from .events import (
    Final as FinalEvent,
)
from .messages import Message
from .providers import HttpProvider
from .sampling import SamplingResponder

__all__ = ["ChatOptions", "Renderer", "Terminal", "ask_approval", "run_chat", "turn"]

EXIT_FAILED: Final = 1
#: characters of arguments and results shown on a tool line
SHOWN_CHARS: Final = 200
PROMPT: Final = "you> "
COMMANDS: Final = "/tools  /servers  /reset  /exit  (/help)"
APPROVAL_HELP: Final = "answer y (approve), n [REASON] (deny), e (edit in $EDITOR), or a JSON object (approve with it)"


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """How the chat talks: one ``prompt`` (else a session), JSON lines, thoughts shown, and
    who decides approvals."""

    prompt: str | None = None
    json_lines: bool = False
    thoughts: bool = False
    approve: Literal["ask", "all", "deny"] = "ask"


class Terminal:
    """Lines from ``inp``; prompts and notes to ``err`` (so stdout keeps only answers)."""

    def __init__(self, inp: TextIO, out: TextIO, err: TextIO, secrets: SecretValues) -> None:
        self.inp = inp
        self.out = out
        self.err = err
        self.secrets = secrets
        self._reading: _Read | None = None

    def clean(self, text: str, *, newlines: bool = True) -> str:
        """Model or server text, safe for the terminal and with the configuration's secrets masked."""
        return clean_terminal(self.secrets.mask(text), newlines=newlines)

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    async def readline(self, prompt: str) -> str | None:
        """A line without its newline, or ``None`` at the end of input.

        Cancellation: the read goes on in its worker thread, and the next call takes its line
        (a question that expired must not swallow the answer to the next one).
        """
        self.err.write(prompt)
        self.err.flush()
        if self._reading is None:
            self._reading = self._start_read()
        read = self._reading
        await read.done.wait()
        self._reading = None
        return None if not read.line else read.line.rstrip("\r\n")

    def _start_read(self) -> _Read:
        read = _Read()
        token = trio.lowlevel.current_trio_token()

        def work() -> None:
            try:
                line = self.inp.readline()
            except (OSError, ValueError):  # stdin closed under us: the end of input
                line = ""

            def deliver() -> None:
                read.line = line
                read.done.set()

            try:
                trio.from_thread.run_sync(deliver, trio_token=token)
            except trio.RunFinishedError:
                pass

        threading.Thread(target=work, name="mcpwire-chat-stdin", daemon=True).start()
        return read


@dataclass(slots=True)
class _Read:
    """One line being read from stdin by a worker thread."""

    done: trio.Event = field(default_factory=trio.Event)
    line: str = ""


class Renderer:
    """Writes a run's events as text (or as JSON lines with ``json``)."""

    def __init__(self, term: Terminal, *, json_lines: bool = False, thoughts: bool = False) -> None:
        self.term = term
        self.json_lines = json_lines
        self.thoughts = thoughts
        self.answered = False  #: answer text was written in this run
        self._midline = False

    def start(self) -> None:
        self.answered = False

    def _break(self) -> None:
        if self._midline:
            self.term.out.write("\n")
            self.term.out.flush()
            self._midline = False

    def event(self, event: RunEvent) -> None:
        if self.json_lines:
            self.term.out.write(msgspec.json.encode(event).decode() + "\n")
            self.term.out.flush()
            return
        if isinstance(event, TextDelta):
            self._text(event)
        elif isinstance(event, ToolCallStarted):
            self._break()
            where = f"{event.server}/{event.tool}" if event.server else event.name
            shown = json.dumps(redact(event.arguments)) if event.arguments is not None else event.raw_arguments or ""
            self.term.note(f"  -> {self.term.clean(where, newlines=False)} {self._short(shown)}")
        elif isinstance(event, ToolResult):
            self._result(event)
        elif isinstance(event, ApprovalResolved) and event.by == "policy":
            self.term.note(f"  {'approved' if event.approved else 'denied'} by --approve")
        elif isinstance(event, ApprovalResolved) and event.by is None:
            verdict = "approved" if event.approved else f"denied: {self._short(event.reason or 'no decision')}"
            self.term.note(f"\n  the approval was decided elsewhere or expired: {verdict}")
        elif isinstance(event, FinalEvent):
            if not self.answered and event.text:
                self.term.out.write(self.term.clean(event.text))
                self._midline = not event.text.endswith("\n")
            self._break()

    def _text(self, event: TextDelta) -> None:
        if event.thought:
            if self.thoughts:
                self.term.err.write(self.term.clean(event.text))
            return
        self.term.out.write(self.term.clean(event.text))
        self.term.out.flush()
        self.answered = True
        self._midline = not event.text.endswith("\n")

    def _result(self, event: ToolResult) -> None:
        name = f"{event.server}/{event.tool}" if event.server else event.name
        first = event.text.strip().splitlines()[0] if event.text.strip() else ""
        if event.outcome == "ok":
            waited = f"; {event.wait_ms / 1000:.1f} s waiting for approval" if event.wait_ms else ""
            self.term.note(f"  <- {self.term.clean(name, newlines=False)} ok ({event.latency_ms:.0f} ms{waited})")
        else:
            self.term.note(f"  <- {self.term.clean(name, newlines=False)} {event.outcome}: {self._short(first)}")

    def _short(self, text: str) -> str:
        return self.term.clean(shorten(text, SHOWN_CHARS), newlines=False)


async def ask_approval(event: ApprovalRequired, term: Terminal, *, can_ask: bool) -> None:
    """Shows ``event`` and decides it from the terminal's answer (denied when nobody can be asked)."""
    what = "a sampling request" if event.kind == "sampling" else f"{event.server}/{event.tool}"
    step = (
        f", confirmation {event.confirmation} of {event.confirmations_needed}" if event.confirmations_needed > 1 else ""
    )
    term.note(f"\napproval needed: {term.clean(what, newlines=False)} (risk {event.risk}{step})")
    term.note(f"  why: {term.clean(event.reason, newlines=False)}")
    shown = json.dumps(redact(event.arguments))  # values under secret-looking keys are not shown
    term.note(f"  arguments: {term.clean(shorten(shown, 2000), newlines=False)}")
    if not can_ask:
        term.note("  denied: no terminal to ask (pass --approve all to allow such calls)")
        event.deny("no terminal to ask for approval", by="mcpwire chat")
        return
    while True:
        line = await term.readline("approve? [y/n/e/JSON] ")
        if line is None:
            event.deny("no answer (end of input)", by="terminal")
            return
        answer = line.strip()
        word, _, rest = answer.partition(" ")
        if word.lower() in ("y", "yes"):
            event.approve(by="terminal")
            return
        if word.lower() in ("n", "no"):
            event.deny(rest.strip() or None, by="terminal")
            return
        if answer.lower() in ("e", "edit"):
            edited = await _edit(event.arguments, term)
            if edited is not None:
                event.approve(edited, by="terminal")
                return
            continue
        if answer.startswith("{"):
            edited = _json_object(answer, term)
            if edited is not None:
                event.approve(edited, by="terminal")
                return
            continue
        term.note(f"  {APPROVAL_HELP}")


def _json_object(text: str, term: Terminal) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except ValueError as exc:
        term.note(f"  not JSON ({exc}); {APPROVAL_HELP}")
        return None
    if not isinstance(value, dict):
        term.note("  the arguments must be a JSON object")
        return None
    return value


async def _edit(arguments: Mapping[str, object], term: Terminal) -> dict[str, object] | None:
    """The arguments as edited in ``$VISUAL``/``$EDITOR`` (``None`` when there is none, or the
    result is not a JSON object: the question is asked again)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        term.note("  no $EDITOR is set: type the arguments as a JSON object instead")
        return None
    with tempfile.TemporaryDirectory(prefix="mcpwire-chat-") as folder:
        path = Path(folder) / "arguments.json"
        path.write_text(json.dumps(arguments, indent=2) + "\n", encoding="utf-8")
        try:
            done = await trio.run_process([*shlex.split(editor), str(path)], check=False, stdin=None)
        except OSError as exc:
            term.note(f"  cannot start the editor {editor!r}: {exc}")
            return None
        if done.returncode != 0:
            term.note(f"  the editor exited with {done.returncode}; nothing changed")
            return None
        return _json_object(path.read_text(encoding="utf-8"), term)


async def turn(
    agent: Agent,
    messages: list[Message],
    renderer: Renderer,
    decide: Callable[[ApprovalRequired], Awaitable[None]],
) -> tuple[list[Message], FinalEvent | Failed]:
    """One prompt: the run's events rendered, its approvals decided; returns the conversation to
    go on with (unchanged after a failure) and the outcome."""
    renderer.start()

    async def ask(event: ApprovalRequired, scope: trio.CancelScope) -> None:
        with scope:
            try:
                await decide(event)
            except AgentError:  # decided elsewhere, or expired, while the answer was typed
                pass

    asking: dict[str, trio.CancelScope] = {}
    async with agent.run(messages) as run, trio.open_nursery() as nursery:
        # each question is asked beside the run, so that an approval decided elsewhere (the
        # host's queue) or expired while the question is open withdraws the question
        async for event in run:
            renderer.event(event)
            if isinstance(event, ApprovalRequired):
                asking[event.approval_id] = scope = trio.CancelScope()
                nursery.start_soon(ask, event, scope)
            elif isinstance(event, ApprovalResolved) and event.approval_id in asking:
                asking.pop(event.approval_id).cancel()
        nursery.cancel_scope.cancel()
    outcome = run.outcome
    assert outcome is not None
    if isinstance(outcome, Failed):
        return messages[:-1], outcome
    return run.messages, outcome


async def run_chat(
    make_agent: Callable[[Host, SamplingResponder], Agent],
    servers: HostConfig,
    provider: HttpProvider,
    host_options: Mapping[str, object],
    client_options: ClientOptions,
    options: ChatOptions,
    inp: TextIO,
    out: TextIO,
    err: TextIO,
) -> int:
    """Starts the servers and answers the prompt, or runs the session. Cancellation: the run
    and the servers are shut down."""
    term = Terminal(inp, out, err, config_secrets(servers))
    renderer = Renderer(term, json_lines=options.json_lines, thoughts=options.thoughts)
    sampling = SamplingResponder(provider, approve=options.approve)
    interactive = options.prompt is None
    can_ask = interactive or _isatty(inp)

    async def decide(event: ApprovalRequired) -> None:
        await ask_approval(event, term, can_ask=can_ask)

    client = client_options.replace(sampling=sampling)
    async with provider, Host(servers, client_options=client, **host_options) as host:  # type: ignore[arg-type]
        agent = make_agent(host, sampling)
        if options.prompt is not None:
            _, outcome = await turn(agent, [Message.user(options.prompt)], renderer, decide)
            if isinstance(outcome, Failed):
                if not options.json_lines:
                    term.note(f"mcpwire chat: {term.clean(outcome.reason, newlines=False)}")
                return EXIT_FAILED
            return 0
        return await _session(agent, host, provider, term, renderer, decide)


async def _session(
    agent: Agent,
    host: Host,
    provider: HttpProvider,
    term: Terminal,
    renderer: Renderer,
    decide: Callable[[ApprovalRequired], Awaitable[None]],
) -> int:
    tools = agent.tools.specs()
    servers = sorted({s.name for s in host.list()})
    term.note(
        f"mcpwire chat with {term.clean(provider.label, newlines=False)}: {len(tools)} tools from "
        f"{', '.join(servers) or 'no servers'}. {COMMANDS}"
    )
    messages: list[Message] = []
    while True:
        line = await term.readline(PROMPT)
        if line is None:
            term.note("")
            return 0
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            command = text.split()[0].lower()
            if command in ("/exit", "/quit"):
                return 0
            if command == "/reset":
                messages = []
                term.note("the conversation is forgotten")
            elif command == "/tools":
                _show_tools(agent, host, term)
            elif command == "/servers":
                _show_servers(host, term)
            else:
                term.note(COMMANDS)
            continue
        with trio.CancelScope() as scope:
            async with _interrupting(scope):
                messages, outcome = await turn(agent, [*messages, Message.user(text)], renderer, decide)
        if scope.cancelled_caught:
            term.note("\ninterrupted (this prompt is not kept)")
        elif isinstance(outcome, Failed):
            term.note(f"error: {term.clean(outcome.reason, newlines=False)} (this prompt is not kept)")


@asynccontextmanager
async def _interrupting(scope: trio.CancelScope) -> AsyncIterator[None]:
    """While the block runs, Ctrl-C cancels ``scope`` (the prompt being answered) instead of
    ending the session; at the prompt it ends the session as usual (the receiver opened last
    gets the signal)."""
    if threading.current_thread() is not threading.main_thread():  # signals need the main thread
        yield
        return
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for _ in signals:
                    scope.cancel()
                    return

            nursery.start_soon(watch)
            yield
            nursery.cancel_scope.cancel()


def _show_tools(agent: Agent, host: Host, term: Terminal) -> None:
    specs = agent.tools.specs()
    if not specs:
        term.note("no tools")
    width = max((len(s.name) for s in specs), default=0)
    for spec in specs:
        risk = host.tool_risk(spec.name).name.lower()
        description = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        term.note(
            f"  {term.clean(spec.name, newlines=False):<{width}}  {risk:<8}  "
            f"{term.clean(shorten(description, 80), newlines=False)}"
        )


def _show_servers(host: Host, term: Terminal) -> None:
    for info in host.list():
        problem = f"  ({term.clean(shorten(info.error, 120), newlines=False)})" if info.error else ""
        term.note(f"  {term.clean(info.name, newlines=False)}  {info.status.value}  {info.tool_count} tools{problem}")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
