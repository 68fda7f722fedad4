"""HTTP peers for the fuzzer: Streamable HTTP and the legacy HTTP+SSE transport, raw bodies in, messages out.

Theory of operation: the fuzzer's exchange (:func:`~fuzz.exchange.execute`) is synchronous and
line-oriented, so an HTTP session here looks like a stdio one: :meth:`send` writes one body,
:meth:`receive` returns the next JSON-RPC message that came back, on whatever response or stream
it came. Underneath, one trio loop per target runs in a worker thread with an
``httpx.AsyncClient``; every POST (and the legacy GET stream) is a task under the session's
cancel scope and, for requests, under a scope of its own, so closing a request's stream (the
2026-07-28 cancellation, HT-M10) or the whole session is a cancel, bounded, and no task outlives
the session. What arrives is put on a thread-safe queue, in arrival order; HTTP statuses go into
the trace as ``note`` entries, and a 5xx is kept for the ``http-status`` oracle.

- Streamable HTTP (2025-03-26 .. 2026-07-28): each line is its own POST with ``Accept:
  application/json, text/event-stream``. The answer is a JSON body or an SSE stream (decoded with
  mcpwire's :class:`~mcpwire.protocol.sse.SSEDecoder`). Legacy sessions echo the
  ``Mcp-Session-Id`` the server hands out and send ``MCP-Protocol-Version`` after ``initialize``
  (learnt from the answer to it); 2026-07-28 requests carry the headers that mirror the body
  (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``), computed by
  :func:`mcpwire.protocol.http.mirrored_headers`. A notification or malformed body is sent with
  ``wait=True``: its own response is read before the next line goes out, so whatever it provoked
  is attributed to it.
- Legacy HTTP+SSE (2024-11-05): a GET stream first announces the ``endpoint`` to POST to; every
  answer comes back on that stream, and a session ends when the stream does.

An :class:`HttpTarget` can start the server itself (``argv``): then it waits for the port to
listen, restarts the process when a session finds it dead, and "alive" means the process runs;
without ``argv`` the server is the URL, and it is alive while it accepts connections.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from mcpwire.actors.legacy_sse import check_endpoint
from mcpwire.errors import ConnectError, FrameTooLarge
from mcpwire.protocol.http import HeaderSpec, is_event_stream, mirrored_headers, tool_header_spec
from mcpwire.protocol.sse import SSEDecoder
from mcpwire.redaction import clean_terminal, redact_argv, redact_url, shorten

from .wire import MAX_LINE_BYTES, STDERR_TAIL_BYTES, Entry, Trace, end_process_group, server_environment, spawn

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpPeer", "HttpTarget", "SsePeer"]

log = logging.getLogger("mcpwire.fuzz.http_wire")

ACCEPT_BOTH = "application/json, text/event-stream"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
#: bounded waits of the plumbing (the fuzzer's own deadlines bound the exchange itself)
LOOP_START_S = 10.0
SESSION_CLOSE_S = 5.0
ENDPOINT_WAIT_S = 10.0
EXIT_GRACE_S = 2.0


class _Loop:
    """A trio loop in a worker thread, with one ``httpx.AsyncClient``; stopped and joined by :meth:`stop`."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self.client: httpx.AsyncClient | None = None
        self._stop: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._thread = threading.Thread(target=self._run, name="mcpwire-fuzz-http", daemon=True)
        self._thread.start()
        if not self._ready.wait(LOOP_START_S):  # pragma: no cover - a loop that cannot start
            raise RuntimeError("the HTTP worker loop did not start")
        if self._failure is not None:
            raise RuntimeError(f"the HTTP worker loop failed: {self._failure}") from self._failure

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to the thread that uses the loop next
            log.error("the HTTP worker loop failed", exc_info=exc)
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        import httpx

        self._stop = trio.Event()
        timeout = httpx.Timeout(connect=5.0, read=None, write=10.0, pool=10.0)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
        async with httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False) as client:
            self.client = client
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.token = trio.lowlevel.current_trio_token()
                self._ready.set()
                await self._stop.wait()
                nursery.cancel_scope.cancel()

    def _check(self) -> None:
        if self._failure is not None:
            raise RuntimeError(f"the HTTP worker loop failed: {self._failure!r}") from self._failure

    def run(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Runs ``afn(*args)`` on the loop and returns its result (it must bound its own waits)."""
        self._check()
        return trio.from_thread.run(afn, *args, trio_token=self.token)

    def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._check()
        return trio.from_thread.run_sync(fn, *args, trio_token=self.token)

    async def open_session(self) -> tuple[trio.Nursery, trio.CancelScope, trio.Event]:
        """A nursery for one session's tasks, under a scope that :meth:`HttpPeer.close` cancels."""
        assert self._nursery is not None
        result: tuple[trio.Nursery, trio.CancelScope, trio.Event] = await self._nursery.start(self._session)
        return result

    @staticmethod
    async def _session(task_status: trio.TaskStatus[tuple[trio.Nursery, trio.CancelScope, trio.Event]]) -> None:
        finished = trio.Event()
        try:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    task_status.started((nursery, scope, finished))
                    await trio.sleep_forever()
        finally:
            finished.set()

    def cancel(self, scope: trio.CancelScope) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            self.run_sync(scope.cancel)

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self.token)
        self._thread.join(SESSION_CLOSE_S)


class _Launcher:
    """The server process behind a URL, when the fuzzer starts it: started, watched, restarted, reaped."""

    def __init__(self, argv: list[str], url: str, env: dict[str, str] | None, cwd: str | None, timeout: float):
        self.argv, self.env, self.cwd, self.timeout = argv, env, cwd, timeout
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        #: the end of the run's time budget (a ``time.monotonic()`` moment): no wait goes past it
        self.until: float | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def exit_status(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def ensure(self) -> None:
        """Starts the server if it is not running, and waits until its port accepts connections."""
        if self.alive():
            return
        self.stop()
        self.dispose()
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex((self.host, self.port)) == 0:
                raise RuntimeError(
                    f"something already listens on {self.host}:{self.port}: stop it, or give the server another port"
                )
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the process's life, closed in stop()
        self.proc = spawn(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=server_environment(self.env),
            cwd=self.cwd,
        )
        until = time.monotonic() + self.timeout
        if self.until is not None:
            until = min(until, self.until)
        while time.monotonic() < until:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited with status {self.proc.returncode} before listening on "
                    f"{self.host}:{self.port}: {self.stderr_tail()[-300:]}"
                )
            with socket.socket() as sock:
                sock.settimeout(0.5)
                if sock.connect_ex((self.host, self.port)) == 0:
                    return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"nothing listens on {self.host}:{self.port} {self.timeout:g}s after starting the server")

    def stderr_tail(self) -> str:
        if self._log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - STDERR_TAIL_BYTES))
            return str(self._log.read().decode("utf-8", "replace"))
        return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL, to the process group; always reaped."""
        proc, self.proc = self.proc, None
        if proc is not None:
            end_process_group(proc, eof_grace=None, term_grace=EXIT_GRACE_S)

    def dispose(self) -> None:
        """Drops the captured output of the last process (kept until then for its stderr tail)."""
        if self._log is not None:
            self._log.close()
            self._log = None


class HttpTarget:
    """An MCP server over HTTP: its URL, its transport, and optionally the command that serves it.

    Args:
        url: the MCP endpoint (Streamable HTTP) or the SSE URL (legacy HTTP+SSE).
        transport: ``"streamable-http"`` or ``"sse"``; ``"auto"`` picks ``sse`` for a path ending
            in ``/sse``, else Streamable HTTP.
        argv: the server's command, when the fuzzer should start (and restart) it.
        headers: extra request headers (for instance ``Authorization``); never written to traces.
    """

    def __init__(
        self,
        url: str,
        *,
        transport: str = "auto",
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        headers: dict[str, str] | None = None,
        start_timeout: float = 20.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {url!r}")
        if transport == "auto":
            transport = "sse" if parts.path.rstrip("/").endswith("/sse") else "streamable-http"
        if transport not in ("streamable-http", "sse"):
            raise ValueError(f"unknown HTTP transport {transport!r}: use streamable-http or sse")
        self.url = url
        self.transport = transport
        self.argv = argv
        self.env, self.cwd = env, cwd
        self.headers = dict(headers or {})
        #: tool name -> its x-mcp-header annotations (2026-07-28), filled once the tools are known
        self.tool_headers: dict[str, HeaderSpec] = {}
        self.launcher = _Launcher(argv, url, env, cwd, start_timeout) if argv else None
        self._loop: _Loop | None = None

    @property
    def restartable(self) -> bool:
        return self.launcher is not None

    def bound(self, until: float | None) -> None:
        """No wait of starting the server goes past ``until`` (the end of the run's budget)."""
        if self.launcher is not None:
            self.launcher.until = until

    def set_tools(self, tools: list[dict[str, Any]]) -> None:
        for tool in tools:
            schema = tool.get("inputSchema")
            if isinstance(schema, dict) and isinstance(tool.get("name"), str):
                try:
                    self.tool_headers[tool["name"]] = tool_header_spec(schema)
                except ValueError:
                    continue  # a conforming client drops such a tool; the fuzzer sends no Mcp-Param

    def loop(self) -> _Loop:
        if self._loop is None:
            self._loop = _Loop()
        return self._loop

    def open(self) -> HttpPeer:
        if self.launcher is not None:
            self.launcher.ensure()
        if self.transport == "sse":
            return SsePeer(self)
        return HttpPeer(self)

    def restart(self) -> None:
        if self.launcher is not None:
            self.launcher.stop()

    def describe(self) -> dict[str, Any]:
        return {
            "transport": self.transport,
            # credentials in the URL (user:pass@, ?api_key=) or the command are never stored
            "url": redact_url(self.url),
            "argv": None if self.argv is None else redact_argv(self.argv),
            "env": sorted(self.env or {}),
            "cwd": self.cwd,
            # header *names* only: values may be secrets (a replay takes them from --header)
            "headers": sorted(self.headers),
        }

    def close(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
        if self.launcher is not None:
            self.launcher.stop()
            self.launcher.dispose()


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class HttpPeer:
    """One Streamable HTTP session (legacy: one ``Mcp-Session-Id``; 2026-07-28: just the requests)."""

    #: a body is one message: framing (pieces, line ends) means nothing over HTTP
    stream_framing = False

    def __init__(self, target: HttpTarget) -> None:
        self.target = target
        self.loop = target.loop()
        self.trace = Trace()
        self.exit_status: int | None = None
        self.oversized = False
        #: (HTTP status, start of the body) of every 5xx answer, for the http-status oracle
        self.http_failures: list[tuple[int, str]] = []
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._t0 = time.monotonic()
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._requests: dict[str, trio.CancelScope] = {}
        self._methods: dict[str, str] = {}
        self._refused = False
        self._closed = False
        self._modern = False
        self._nursery, self._scope, self._finished = self.loop.run(self.loop.open_session)

    # -- the Peer surface --------------------------------------------------------------------------

    def __enter__(self) -> HttpPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> float:
        return time.monotonic() - self._t0

    @property
    def cancel_by_closing(self) -> bool:
        """2026-07-28 (HT-M10): a request is cancelled by closing its stream, not by a notification."""
        return self._modern

    def alive(self) -> bool:
        launcher = self.target.launcher
        if launcher is not None:
            if not launcher.alive():
                if self.exit_status is None:
                    self.exit_status = launcher.exit_status
                    self.trace.entries.append(Entry("exit", self.now(), status=self.exit_status))
                return False
            return True
        return not self._refused

    def send(self, line: bytes, *, timeout: float, wait: bool = False) -> bool:
        self.trace.entries.append(Entry.of_bytes("send", self.now(), line))
        return self._post(line, timeout=timeout, wait=wait)

    def send_raw(self, chunk: bytes, *, timeout: float, record: bool = True, wait: bool = True) -> bool:
        if record:
            self.trace.entries.append(Entry.of_bytes("send", self.now(), chunk))
        return self._post(chunk, timeout=timeout, wait=wait)

    def receive(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                kind, item = self._queue.get(timeout=max(0.0, remaining)) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                return None
            if kind == "line":
                self.trace.entries.append(Entry.of_bytes("recv", self.now(), item))
                self._learn(item)
                return bytes(item)
            if kind == "refusal":
                status, key = item
                rid = json.loads(key) if key is not None else None
                note = f"HTTP {status} without a JSON-RPC body: counted as an error answer to request {rid!r}"
                self.trace.entries.append(Entry("note", self.now(), data=note))
                refusal = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32600, "message": note}}
                return json.dumps(refusal).encode()
            self.trace.entries.append(Entry("note", self.now(), data=str(item)))
            if kind == "refused":
                self._refused = True
                if self.target.launcher is None or not self.alive():
                    return None

    def close_request(self, request_id: object) -> None:
        """2026-07-28 HT-M10: closing the request's response stream is its cancellation."""
        scope = self._requests.get(json.dumps(request_id))
        self.trace.entries.append(Entry("note", self.now(), data=f"closed the stream of request {request_id!r}"))
        if scope is not None:
            self.loop.cancel(scope)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.session_id is not None and not self._refused:
            with contextlib.suppress(trio.RunFinishedError):
                self.loop.run(self._delete)  # HT-L15: end the legacy session (405 is fine); bounded
        with contextlib.suppress(trio.RunFinishedError):
            self.loop.run(self._shutdown)
        launcher = self.target.launcher
        self.trace.stderr_tail = launcher.stderr_tail() if launcher is not None else ""
        if self.exit_status is None and launcher is not None and not launcher.alive():
            self.exit_status = launcher.exit_status

    @property
    def stderr_tail(self) -> str:
        launcher = self.target.launcher
        return launcher.stderr_tail() if launcher is not None else ""

    # -- plumbing ------------------------------------------------------------------------------------

    def _learn(self, line: bytes) -> None:
        """Remembers the negotiated revision from the answer to ``initialize`` (for the version header)."""
        message = _parse(line)
        if message is None or "id" not in message:
            return
        method = self._methods.get(json.dumps(message.get("id")))
        result = message.get("result")
        if method == "initialize" and isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self.protocol_version = result["protocolVersion"]

    def _headers(self, line: bytes) -> tuple[dict[str, str], str | None]:
        """The headers of one POST, and the key of the request id when the body is a readable request.

        The session's headers never depend on reading the body: a body the fuzzer made unreadable
        (deep nesting, invalid UTF-8) still belongs to the session, and must be refused as such.
        """
        headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH, **self.target.headers}
        message = _parse(line)
        method = message.get("method") if message is not None else None
        params = message.get("params") if message is not None and isinstance(message.get("params"), dict) else None
        meta = params.get("_meta") if params is not None and isinstance(params.get("_meta"), dict) else {}
        key: str | None = None
        if message is not None and "id" in message and isinstance(method, str):
            key = json.dumps(message["id"])
            self._methods[key] = method
        modern_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if isinstance(modern_version, str):
            self._modern, self.protocol_version = True, modern_version
        if self._modern:
            # 2026-07-28: no session; the headers mirror the body (HT-M03..HT-M09) when it can be read
            if self.protocol_version is not None:
                headers["MCP-Protocol-Version"] = self.protocol_version
            if isinstance(method, str) and isinstance(modern_version, str):
                spec: HeaderSpec = ()
                if method == "tools/call" and params is not None and isinstance(params.get("name"), str):
                    spec = self.target.tool_headers.get(params["name"], ())
                with contextlib.suppress(ValueError):
                    headers.update(mirrored_headers(method, params, modern_version, modern=True, tool_headers=spec))
            return headers, key
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None and method != "initialize":
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers, key

    def _spawn(self, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        self.loop.run_sync(self._nursery.start_soon, fn, *args)

    async def _shutdown(self) -> None:
        """Cancels every task of the session and waits (bounded) until they are all gone."""
        self._scope.cancel()
        with trio.move_on_after(SESSION_CLOSE_S):
            await self._finished.wait()

    def _post(self, body: bytes, *, timeout: float, wait: bool) -> bool:
        if self._closed:
            return False
        headers, key = self._headers(body)
        done = threading.Event()
        scope = trio.CancelScope()
        if key is not None:
            self._requests[key] = scope
        # a request (sent without waiting) whose body the server cannot read still gets its refusal as the answer
        self._spawn(self._exchange, body, headers, scope, done, not wait, key)
        if wait:
            done.wait(timeout)
        return not self._refused

    async def _exchange(
        self,
        body: bytes,
        headers: dict[str, str],
        scope: trio.CancelScope,
        done: threading.Event,
        is_request: bool,
        key: str | None,
    ) -> None:
        client = self.loop.client
        assert client is not None
        with self._noting_failures(done), scope:
            async with client.stream("POST", self.target.url, content=body, headers=headers) as response:
                sid = response.headers.get("mcp-session-id")
                if sid and self.session_id is None:
                    self.session_id = sid
                await self._read_answer(response, is_request, key)

    @contextlib.contextmanager
    def _noting_failures(self, done: threading.Event) -> Iterator[None]:
        """A POST's HTTP failure becomes a note of the exchange (a refused connection: ``refused``),
        not an exception; ``done`` is set however the POST ends."""
        import httpx

        try:
            yield
        except httpx.ConnectError as exc:
            self._queue.put(("refused", f"cannot connect: {exc}"))
        except httpx.HTTPError as exc:
            self._queue.put(("note", f"HTTP failure: {type(exc).__name__}: {exc}"))
        finally:
            done.set()

    async def _read_answer(self, response: httpx.Response, is_request: bool, key: str | None) -> None:
        status = response.status_code
        ctype = response.headers.get("content-type", "")
        self._queue.put(("note", f"HTTP {status} {ctype}".rstrip()))
        if is_event_stream(ctype):
            decoder = SSEDecoder(MAX_LINE_BYTES)
            try:
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        if event.data:
                            self._queue.put(("line", event.data.encode()))
            except FrameTooLarge:
                self.oversized = True
            return
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > MAX_LINE_BYTES:
                self.oversized = True
                return
        text = bytes(data).strip()
        if status >= 500:
            self.http_failures.append((status, text[:200].decode("utf-8", "replace")))
        if not text or not (200 <= status < 300 or text[:1] in (b"{", b"[")):
            if is_request and status >= 400:
                # refused at the HTTP level (e.g. 413) without a JSON-RPC body: the request's answer
                self._queue.put(("refusal", (status, key)))
            return  # an empty body, or 4xx/5xx text: not a JSON-RPC message
        if not is_request and 400 <= status < 500:
            refusal = _parse(text)
            if refusal is not None and refusal.get("id") is None and "error" in refusal:
                # HT-04: a refused notification or unreadable body gets an HTTP error status, whose body
                # "MAY comprise a JSON-RPC error response that has no id": the refusal, not an answer
                shown = text[:200].decode(errors="replace")
                self._queue.put(("note", f"refused with an id-less JSON-RPC error: {shown}"))
                return
        self._queue.put(("line", text))

    async def _delete(self) -> None:
        import httpx

        client = self.loop.client
        assert client is not None
        headers = {**self.target.headers, "Mcp-Session-Id": self.session_id or ""}
        with trio.move_on_after(2.0), contextlib.suppress(httpx.HTTPError):
            await client.delete(self.target.url, headers=headers)


class SsePeer(HttpPeer):
    """One legacy HTTP+SSE session (2024-11-05): a GET stream for answers, POSTs to its endpoint."""

    def __init__(self, target: HttpTarget) -> None:
        super().__init__(target)
        self.endpoint: str | None = None
        #: why the announced endpoint was refused (another origin, userinfo, a fragment), if it was
        self.endpoint_refused: str | None = None
        self._endpoint_known = threading.Event()
        self._stream_open = True
        self._spawn(self._listen)
        if not self._endpoint_known.wait(ENDPOINT_WAIT_S):
            self.trace.entries.append(Entry("note", self.now(), data="no endpoint event on the SSE stream"))

    @property
    def cancel_by_closing(self) -> bool:
        return False

    def alive(self) -> bool:
        return super().alive() and self._stream_open

    def close_request(self, request_id: object) -> None:  # pragma: no cover - legacy cancels by notification
        raise NotImplementedError("HTTP+SSE cancels with notifications/cancelled")

    async def _listen(self) -> None:
        import httpx

        client = self.loop.client
        assert client is not None
        headers = {"Accept": "text/event-stream", **self.target.headers}
        try:
            async with client.stream("GET", self.target.url, headers=headers) as response:
                self._queue.put(("note", f"HTTP {response.status_code} (GET stream)"))
                if response.status_code != 200:
                    if response.status_code >= 500:
                        self.http_failures.append((response.status_code, "GET stream"))
                    return
                decoder = SSEDecoder(MAX_LINE_BYTES)
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        if event.event == "endpoint":
                            self._endpoint(event.data)
                        elif event.data:
                            self._queue.put(("line", event.data.encode()))
        except FrameTooLarge:
            self.oversized = True
        except httpx.ConnectError as exc:
            self._queue.put(("refused", f"cannot connect: {exc}"))
        except httpx.HTTPError as exc:
            self._queue.put(("note", f"GET stream failed: {type(exc).__name__}: {exc}"))
        finally:
            self._stream_open = False
            self._endpoint_known.set()
            self._queue.put(("note", "the SSE stream ended"))

    def _endpoint(self, data: str) -> None:
        """HS-02: the endpoint is resolved against the SSE URL and refused on another origin (or with
        userinfo or a fragment), as mcpwire's client does: nothing, and no ``--header`` value, is
        ever POSTed there. The refusal is kept for the ``sse-endpoint`` oracle."""
        try:
            self.endpoint = check_endpoint(self.target.url, data)
        except ConnectError as exc:
            self.endpoint_refused = (
                f"{exc}: the endpoint event was {shorten(clean_terminal(data.strip(), newlines=False), 200)!r}"
            )
            self.trace.entries.append(Entry("note", self.now(), data=self.endpoint_refused))
        self._endpoint_known.set()

    def _post(self, body: bytes, *, timeout: float, wait: bool) -> bool:
        if self._closed or self.endpoint is None:
            return False
        done = threading.Event()
        headers = {"Content-Type": "application/json", **self.target.headers}
        self._spawn(self._post_to_endpoint, body, headers, done)
        done.wait(timeout)  # a 202 comes at once; the answer itself comes on the stream
        return not self._refused

    async def _post_to_endpoint(self, body: bytes, headers: dict[str, str], done: threading.Event) -> None:
        client = self.loop.client
        assert client is not None and self.endpoint is not None
        with self._noting_failures(done):
            response = await client.post(self.endpoint, content=body, headers=headers)
            self._queue.put(("note", f"HTTP {response.status_code} (POST)"))
            if response.status_code >= 500:
                self.http_failures.append((response.status_code, response.text[:200]))
