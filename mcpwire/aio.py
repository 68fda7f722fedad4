"""mcpwire for asyncio applications: the same client and host, awaited from asyncio.

    import asyncio, mcpwire.aio

    async def main():
        async with mcpwire.aio.open_client(["npx", "-y", "@modelcontextprotocol/server-everything"]) as client:
            result = await client.call_tool("echo", {"message": "hi"})
            print(result.text())

    asyncio.run(main())

Theory of operation: mcpwire's connections are trio actors. Under asyncio, one trio run per
asyncio loop serves its clients and hosts, started when the first of them opens and ended when the
last one closes: by default in a dedicated thread (hand-offs cross threads), or, with
:func:`set_mode` ``("guest")`` or ``MCPWIRE_AIO_MODE=guest``, in trio's *guest mode* inside the
asyncio loop on its own thread (``trio.lowlevel.start_guest_run``). Each awaited call becomes a
trio task in that run; its result or exception is handed to an asyncio future, so errors cross
unchanged (the same exception objects, with their causes). Cancelling the asyncio task cancels the
trio task (which sends ``notifications/cancelled`` on the wire, as under trio) and waits, bounded,
until it has finished: nothing is left running. Context managers (a client, a host, a
subscription) are held open by a trio task until the asyncio block is left. Handlers you pass
(sampling, elicitation, approvers, progress callbacks) may be asyncio coroutine functions: they
run as asyncio tasks and trio awaits them.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import functools
import inspect
import logging
import os
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, ParamSpec, TypeVar, Unpack

import trio

from .errors import ClientClosed

if TYPE_CHECKING:
    from .client import Client, ClientOptions, ClientStatistics, ServerNotification, Subscription, Target
    from .client.options import OptionKeywords
    from .host import Host as TrioHost
    from .host import HostToolResult, ServerInfo, ServerStatus
    from .host.registry import RegisteredTool
    from .protocol.types import (
        DiscoverResult,
        GetPromptResult,
        Implementation,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceTemplate,
        ServerCapabilities,
        Tool,
        ToolResult,
    )
    from .protocol.versions import Era

__all__ = ["AsyncClient", "AsyncHost", "AsyncSubscription", "Host", "open_client", "run", "set_mode"]

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

#: How long leaving a block, or a cancelled call, waits for the trio side to finish (seconds).
#: The trio side has its own bounds (shutdown grace, shielded cancel notice); this is a backstop.
SHUTDOWN_TIMEOUT_S: Final = 30.0


class _Runtime:
    """One trio run serving one asyncio loop, shared by every client and host of that loop.

    ``guest=True`` runs trio in guest mode inside the loop (same thread); otherwise trio runs in a
    dedicated thread and every hand-over between the two is a thread-safe wake-up. Both give the
    same semantics; the thread is the default because it is faster (``bench/aio_bench.py``): in
    guest mode every wait for I/O takes extra hops through trio's I/O thread and the loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, guest: bool) -> None:
        self.loop = loop
        self.guest = guest
        self.users = 0
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self._ready: asyncio.Future[None] = loop.create_future()
        self._done: asyncio.Future[None] = loop.create_future()
        self._stop: trio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.guest:
            trio.lowlevel.start_guest_run(
                self._main,
                run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
                run_sync_soon_not_threadsafe=self.loop.call_soon,
                done_callback=self._finished,
                host_uses_signal_set_wakeup_fd=True,
            )
            return

        def thread_main() -> None:
            try:
                trio.run(self._main)
            except BaseException as exc:  # reported to the loop; the thread ends either way
                self.loop.call_soon_threadsafe(self._finished_with, exc)
            else:
                self.loop.call_soon_threadsafe(self._finished_with, None)

        self._thread = threading.Thread(target=thread_main, name="mcpwire-trio", daemon=True)
        self._thread.start()

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.settle(self._ready, None)
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def _finished(self, outcome: Any) -> None:
        # guest mode: ``outcome`` is an outcome.Value or outcome.Error of _main, on the loop's thread
        self._finished_with(getattr(outcome, "error", None))

    def _finished_with(self, error: BaseException | None) -> None:
        for future in (self._ready, self._done):
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(None)
        if error is not None:
            log.error("the trio run of mcpwire.aio ended with an error", exc_info=error)

    def settle(self, future: asyncio.Future[Any], value: Any = None, error: BaseException | None = None) -> None:
        """Resolves an asyncio future from trio code (thread-safe in thread mode)."""

        def apply() -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        if self.guest:
            apply()
        else:
            self.loop.call_soon_threadsafe(apply)

    def cancel_future(self, future: asyncio.Future[Any]) -> None:
        if self.guest:
            future.cancel()
        else:
            self.loop.call_soon_threadsafe(future.cancel)

    async def ready(self) -> None:
        await self._ready

    async def stop(self) -> None:
        """Ends the trio run (every task still in it is cancelled) and waits until it has."""
        if self.token is not None and self._stop is not None and not self._done.done():
            self.soon(self._stop.set)
        await asyncio.wait_for(asyncio.shield(self._done), SHUTDOWN_TIMEOUT_S)
        if self._thread is not None:
            self._thread.join(SHUTDOWN_TIMEOUT_S)

    def soon(self, fn: Callable[..., object], *args: object) -> None:
        """Runs ``fn(*args)`` inside the trio run, as soon as possible (from any thread)."""
        if self.token is None:
            raise ClientClosed("mcpwire.aio: the trio run is not started")
        try:
            self.token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise ClientClosed("mcpwire.aio: the trio run has ended") from None

    async def call(self, afn: Callable[..., Awaitable[T]], *args: object) -> T:
        """Awaits ``afn(*args)`` as a trio task; cancellation and errors cross both ways."""
        result: asyncio.Future[T] = self.loop.create_future()
        finished: asyncio.Future[None] = self.loop.create_future()
        scope = trio.CancelScope()

        async def task() -> None:
            try:
                with scope:
                    value = await afn(*args)
                    self.settle(result, value)
            except BaseException as exc:
                if isinstance(exc, trio.Cancelled):
                    self.settle(result, error=ClientClosed("mcpwire.aio: the trio run is shutting down"))
                else:
                    self.settle(result, error=exc)
                if isinstance(exc, trio.Cancelled | KeyboardInterrupt | SystemExit):
                    raise
            finally:
                self.cancel_future(result)  # a no-op once settled: our own scope was cancelled
                self.settle(finished, None)

        assert self.nursery is not None
        self.soon(self.nursery.start_soon, task)
        try:
            return await result
        except asyncio.CancelledError:
            self.soon(scope.cancel)
            try:
                await asyncio.wait_for(asyncio.shield(finished), SHUTDOWN_TIMEOUT_S)
            except TimeoutError:  # pragma: no cover - the trio side is bounded on its own
                log.warning("a cancelled call did not finish within %s s", SHUTDOWN_TIMEOUT_S)
            raise


_MODE: Literal["thread", "guest"] = "guest" if os.environ.get("MCPWIRE_AIO_MODE") == "guest" else "thread"


def set_mode(mode: Literal["thread", "guest"]) -> None:
    """How trio runs beside asyncio, for loops that start using mcpwire after this call:
    ``"thread"`` (default: a dedicated trio thread) or ``"guest"`` (trio's guest mode inside the
    asyncio loop, on its thread). ``$MCPWIRE_AIO_MODE`` sets the default."""
    global _MODE
    if mode not in ("thread", "guest"):
        raise ValueError(f"mode must be 'thread' or 'guest', not {mode!r}")
    _MODE = mode


_RUNTIMES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Runtime] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def _runtime() -> AsyncIterator[_Runtime]:
    """The loop's trio run, started by its first user and ended by its last."""
    loop = asyncio.get_running_loop()
    runtime = _RUNTIMES.get(loop)
    if runtime is None:
        runtime = _Runtime(loop, guest=_MODE == "guest")
        _RUNTIMES[loop] = runtime
        runtime.start()
    runtime.users += 1
    try:
        await runtime.ready()
        yield runtime
    finally:
        runtime.users -= 1
        if runtime.users == 0:
            _RUNTIMES.pop(loop, None)
            await runtime.stop()


class _Held(Generic[T]):
    """A trio async context manager held open by a trio task while an asyncio block runs."""

    def __init__(self, runtime: _Runtime, factory: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        self._runtime = runtime
        self._factory = factory
        self._leave: trio.Event | None = None
        self._left: asyncio.Future[None] = runtime.loop.create_future()

    async def __aenter__(self) -> T:
        runtime = self._runtime
        started = False

        async def hold(task_status: trio.TaskStatus[T] = trio.TASK_STATUS_IGNORED) -> None:
            nonlocal started
            self._leave = trio.Event()
            try:
                async with self._factory() as value:
                    task_status.started(value)
                    started = True
                    await self._leave.wait()
            except BaseException as exc:
                if started:
                    shown = ClientClosed("mcpwire.aio: shut down") if isinstance(exc, trio.Cancelled) else exc
                    runtime.settle(self._left, error=shown)
                raise
            finally:
                runtime.settle(self._left, None)

        assert runtime.nursery is not None
        nursery = runtime.nursery
        return await runtime.call(nursery.start, hold)

    async def __aexit__(self, *exc: object) -> None:
        if self._leave is not None:
            self._runtime.soon(self._leave.set)
        await asyncio.wait_for(asyncio.shield(self._left), SHUTDOWN_TIMEOUT_S)


def _for_trio(runtime: _Runtime, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A handler trio can await: asyncio coroutine functions run as asyncio tasks."""
    if not inspect.iscoroutinefunction(fn):
        return fn

    @functools.wraps(fn)
    async def bridged(*args: Any, **kwargs: Any) -> Any:
        done = trio.Event()
        future = asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), runtime.loop)
        future.add_done_callback(lambda _: runtime.soon(done.set))
        try:
            await done.wait()
        except trio.Cancelled:
            future.cancel()
            raise
        return future.result()

    return bridged


#: the options whose value may be an asyncio coroutine function, run in asyncio when called
_HANDLER_OPTIONS: Final = frozenset(
    {"sampling", "elicitation", "roots", "on_stdout_noise", "on_notification", "on_progress", "approver"}
)


def _bridge_options(runtime: _Runtime, options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _for_trio(runtime, v) if k in _HANDLER_OPTIONS and callable(v) else v for k, v in options.items()}


async def run(afn: Callable[..., Awaitable[T]], *args: object) -> T:
    """Awaits any trio coroutine function of mcpwire from asyncio (an escape hatch for APIs this
    module does not wrap). Cancellation crosses as for every call here."""
    async with _runtime() as runtime:
        return await runtime.call(afn, *args)


# -- the client --------------------------------------------------------------------------------


class AsyncSubscription:
    """An open subscription; ``async for note in sub`` yields its notifications."""

    def __init__(self, runtime: _Runtime, sub: Subscription) -> None:
        self._runtime = runtime
        self._sub = sub
        self._iterator: AsyncIterator[ServerNotification] | None = None

    @property
    def requested(self) -> object:
        return self._sub.requested

    @property
    def acknowledged(self) -> object:
        return self._sub.acknowledged

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> ServerNotification:
        if self._iterator is None:
            self._iterator = self._sub.__aiter__()
        return await self._runtime.call(self._iterator.__anext__)


class AsyncClient:
    """A connected MCP client, awaited from asyncio. The same API as :class:`mcpwire.Client`."""

    def __init__(self, runtime: _Runtime, client: Client) -> None:
        self._runtime = runtime
        self._client = client

    @property
    def trio_client(self) -> Client:
        """The underlying trio client (only for use inside :func:`run`)."""
        return self._client

    @property
    def label(self) -> str:
        return self._client.label

    @property
    def era(self) -> Era | None:
        return self._client.era

    @property
    def protocol_version(self) -> str | None:
        return self._client.protocol_version

    @property
    def server_info(self) -> Implementation | None:
        return self._client.server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self._client.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self._client.instructions

    def statistics(self) -> ClientStatistics:
        return self._client.statistics()

    async def request(
        self, method: str, params: Mapping[str, object] | None = None, *, timeout: float | None = None
    ) -> object:
        return await self._runtime.call(functools.partial(self._client.request, method, params, timeout=timeout))

    async def notify(self, method: str, params: Mapping[str, object] | None = None) -> None:
        await self._runtime.call(self._client.notify, method, params)

    async def ping(self, *, timeout: float | None = None) -> None:
        await self._runtime.call(functools.partial(self._client.ping, timeout=timeout))

    async def discover(self, *, timeout: float | None = None) -> DiscoverResult:
        return await self._runtime.call(functools.partial(self._client.discover, timeout=timeout))

    async def list_tools(self, *, timeout: float | None = None) -> list[Tool]:
        return await self._runtime.call(functools.partial(self._client.list_tools, timeout=timeout))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        on_progress: Callable[..., Any] | None = None,
    ) -> ToolResult:
        progress = _for_trio(self._runtime, on_progress) if on_progress is not None else None
        call = functools.partial(self._client.call_tool, name, arguments, timeout=timeout, on_progress=progress)
        return await self._runtime.call(call)

    async def list_resources(self, *, timeout: float | None = None) -> list[Resource]:
        return await self._runtime.call(functools.partial(self._client.list_resources, timeout=timeout))

    async def list_resource_templates(self, *, timeout: float | None = None) -> list[ResourceTemplate]:
        return await self._runtime.call(functools.partial(self._client.list_resource_templates, timeout=timeout))

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> ReadResourceResult:
        return await self._runtime.call(functools.partial(self._client.read_resource, uri, timeout=timeout))

    async def list_prompts(self, *, timeout: float | None = None) -> list[Prompt]:
        return await self._runtime.call(functools.partial(self._client.list_prompts, timeout=timeout))

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, *, timeout: float | None = None
    ) -> GetPromptResult:
        return await self._runtime.call(functools.partial(self._client.get_prompt, name, arguments, timeout=timeout))

    async def set_logging_level(self, level: str, *, timeout: float | None = None) -> None:
        await self._runtime.call(functools.partial(self._client.set_logging_level, level, timeout=timeout))

    @asynccontextmanager
    async def subscribe(
        self,
        resources: Sequence[str] = (),
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        buffer: int = 256,
        timeout: float | None = None,
    ) -> AsyncIterator[AsyncSubscription]:
        """Subscribes to resource updates and list changes; leaving the block ends it."""
        factory = functools.partial(
            self._client.subscribe,
            resources,
            tools_list_changed=tools_list_changed,
            prompts_list_changed=prompts_list_changed,
            resources_list_changed=resources_list_changed,
            buffer=buffer,
            timeout=timeout,
        )
        async with _Held(self._runtime, factory) as sub:
            yield AsyncSubscription(self._runtime, sub)

    async def notifications(self) -> AsyncIterator[ServerNotification]:
        """Every notification from the server, in order, until the connection ends."""
        iterator = self._client.notifications()
        try:
            while True:
                try:
                    note = await self._runtime.call(iterator.__anext__)
                except StopAsyncIteration:
                    return
                yield note
        finally:
            await self._runtime.call(iterator.aclose)  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        await self._runtime.call(self._client.aclose)


@asynccontextmanager
async def open_client(
    target: Target = None, *, options: ClientOptions | None = None, **overrides: Unpack[OptionKeywords]
) -> AsyncIterator[AsyncClient]:
    """Connects to a server and yields a ready :class:`AsyncClient`; closes it on exit.

    Takes the same ``target``, ``options`` and keyword arguments as :func:`mcpwire.open_client`;
    handlers may be asyncio coroutine functions. Leaving the block shuts the server down in order;
    no task or process outlives it.
    """
    from .client import open_client as trio_open_client

    async with _runtime() as runtime:
        bridged = _bridge_options(runtime, overrides)
        if options is not None:
            fields = {f.name for f in dataclasses.fields(options)}
            handlers = {k: getattr(options, k) for k in _HANDLER_OPTIONS & fields}
            options = options.replace(**_bridge_options(runtime, handlers))
        opened = functools.partial(trio_open_client, target, options=options, **bridged)
        async with _Held(runtime, opened) as client:
            yield AsyncClient(runtime, client)


# -- the host -----------------------------------------------------------------------------------


class AsyncHost:
    """A running :class:`mcpwire.Host`, awaited from asyncio (see :class:`Host`)."""

    def __init__(self, runtime: _Runtime, host: TrioHost) -> None:
        self._runtime = runtime
        self._host = host

    @property
    def trio_host(self) -> TrioHost:
        """The underlying trio host (only for use inside :func:`run`)."""
        return self._host

    def tools(self) -> list[RegisteredTool]:
        return self._host.tools()

    def list(self) -> list[ServerInfo]:
        return self._host.list()

    def get(self, name: str) -> ServerInfo:
        return self._host.get(name)

    def to_openai(self, **kwargs: Any) -> builtins.list[dict[str, Any]]:
        return self._host.registry.to_openai(**kwargs)

    def to_anthropic(self) -> builtins.list[dict[str, Any]]:
        return self._host.registry.to_anthropic()

    def prometheus(self) -> str:
        return self._host.prometheus()

    async def call_tool(
        self, name: str, arguments: Mapping[str, object] | None = None, *, timeout: float | None = None
    ) -> HostToolResult:
        return await self._runtime.call(functools.partial(self._host.call_tool, name, arguments, timeout=timeout))

    async def read_resource(self, server: str, uri: str, *, timeout: float | None = None) -> ReadResourceResult:
        return await self._runtime.call(functools.partial(self._host.read_resource, server, uri, timeout=timeout))

    async def register(self, name: str, config: Mapping[str, object]) -> ServerInfo:
        async def register() -> ServerInfo:
            return self._host.register(name, config)

        return await self._runtime.call(register)

    async def remove(self, name: str) -> None:
        await self._runtime.call(self._host.remove, name)

    async def wait_status(self, name: str, status: ServerStatus, *, timeout: float = 30.0) -> ServerInfo:
        return await self._runtime.call(functools.partial(self._host.wait_status, name, status, timeout=timeout))

    async def run(self, afn: Callable[..., Awaitable[T]], *args: object) -> T:
        """Awaits a trio coroutine function (e.g. a host method not wrapped here) in the host's run."""
        return await self._runtime.call(afn, *args)


class Host:
    """:class:`mcpwire.Host` for asyncio: ``async with mcpwire.aio.Host.from_config() as host``.

    Construct it with the same arguments as :class:`mcpwire.Host` (an ``approver`` may be an
    asyncio coroutine function); entering it starts the servers and yields an :class:`AsyncHost`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args = args
        self._kwargs = kwargs
        self._config_path: object = None
        self._from_config = False
        self._stack: Any = None

    @classmethod
    def from_config(cls, path: object = None, **kwargs: Any) -> Host:
        """As :meth:`mcpwire.Host.from_config` (the config is read when the block is entered)."""
        host = cls(**kwargs)
        host._config_path, host._from_config = path, True
        return host

    def _build(self, runtime: _Runtime) -> TrioHost:
        from .host import Host as TrioHostClass

        kwargs = _bridge_options(runtime, self._kwargs)
        if self._from_config:
            return TrioHostClass.from_config(self._config_path, **kwargs)  # type: ignore[arg-type]
        return TrioHostClass(*self._args, **kwargs)

    async def __aenter__(self) -> AsyncHost:
        from contextlib import AsyncExitStack

        stack = AsyncExitStack()
        try:
            runtime = await stack.enter_async_context(_runtime())
            host = self._build(runtime)
            entered = await stack.enter_async_context(_Held(runtime, lambda: host))
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return AsyncHost(runtime, entered)

    async def __aexit__(self, *exc: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
