"""What every provider shares: the :class:`Provider` interface, and :class:`HttpProvider`, the
HTTP plumbing (retries, timeouts, bounded server-sent events, error messages) under each wire
format.

Theory of operation: a provider turns one :class:`~mcpwire.agent.messages.ModelRequest` into one
:class:`~mcpwire.agent.messages.Completion`, reporting streamed text and tool-call arguments to a
callback as they arrive. :class:`HttpProvider` makes the POST: a refusal that may pass (408, 409,
425, 429, 5xx, Anthropic's 529) or a connection that fails before any of the answer arrived is
tried again, at most ``max_retries`` times, after the wait the provider asked for (``Retry-After``
in seconds or as a date, or ``retry-after-ms``) or else an exponential backoff with jitter; a
wait longer than ``max_retry_wait`` is not taken (the error says so). Once part of an answer has
been passed on, nothing is retried: a stream that breaks or ends early is a
:class:`~mcpwire.agent.errors.ProviderError` naming the provider and what was wrong, as is a body
that is not the JSON or event stream the format promises. Every wait is bounded: ``timeout``
seconds without a byte, ``request_timeout`` seconds for a whole answer, and bodies and events
are bounded in size.

Keys are sent in headers and never shown: error messages from a provider are cleaned for a
terminal, shortened, and have the key masked in case a provider repeats it.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx
import trio

from ...errors import FrameTooLarge
from ...protocol.http import is_event_stream, media_type
from ...protocol.http1 import retry_after_seconds
from ...protocol.sse import SSEDecoder, SSEEvent
from ...redaction import SecretValues, clean_terminal, redact_url, shorten
from ..errors import PresetError, ProviderError
from ..messages import Completion, Message, ModelRequest, StopReason, TextPart, ToolCall, Usage

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "Chunk",
    "ChunkCallback",
    "HttpProvider",
    "Provider",
    "TextChunk",
    "ToolCallChunk",
    "answer",
    "api_key_for",
    "replay",
]

log = logging.getLogger("mcpwire.agent.providers")

#: seconds without a byte from the provider
DEFAULT_TIMEOUT: Final = 120.0
#: seconds to connect
DEFAULT_CONNECT_TIMEOUT: Final = 15.0
#: seconds for one whole answer (a model that trickles tokens for ever is cut off)
DEFAULT_REQUEST_TIMEOUT: Final = 600.0
DEFAULT_MAX_RETRIES: Final = 3
#: the longest wait a Retry-After may ask for before the error is reported instead
DEFAULT_MAX_RETRY_WAIT: Final = 60.0
BACKOFF_BASE: Final = 0.5
BACKOFF_CAP: Final = 8.0
#: the largest body (an error, or a whole non-streamed answer) read
MAX_BODY_BYTES: Final = 32 * 1024 * 1024
#: the largest error body read (the rest is not needed to say what went wrong)
MAX_ERROR_BYTES: Final = 64 * 1024
#: the largest streamed answer and the largest single event
MAX_STREAM_BYTES: Final = 64 * 1024 * 1024
MAX_EVENT_BYTES: Final = 8 * 1024 * 1024
#: characters of a provider's error message shown
ERROR_CHARS: Final = 300
RETRYABLE_STATUS: Final = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class TextChunk:
    """Text the model streamed."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """Part of a tool call the model streamed: its id and name first, then its arguments."""

    index: int
    id: str | None
    name: str | None
    arguments_delta: str


Chunk = TextChunk | ToolCallChunk
ChunkCallback = Callable[[Chunk], Awaitable[None]]


class StreamState(Protocol):
    """Assembles one streamed answer from its events."""

    async def feed(self, event: SSEEvent) -> None: ...

    def finish(self) -> Completion: ...


@runtime_checkable
class Provider(Protocol):
    """A model behind some wire format.

    ``name`` is the wire format (``openai``, ``anthropic``), ``label`` how messages name the
    provider (format, model and host), ``supports_tool_images`` whether tool results may carry
    images.
    """

    name: str
    model: str
    supports_tool_images: bool

    @property
    def label(self) -> str: ...

    async def complete(self, request: ModelRequest, on_chunk: ChunkCallback | None = None) -> Completion:
        """The model's answer to ``request``; streamed parts go to ``on_chunk`` as they come.

        Raises:
            ProviderError: naming the provider and what was wrong.

        Cancellation: the HTTP request is abandoned (its connection closed).
        """
        ...

    async def aclose(self) -> None: ...


class HttpProvider:
    """The HTTP under a wire format (subclasses add the format).

    Args:
        model: the model's name at the provider.
        base_url: where the API is (each format has its default).
        api_key: the key, if any (see each format for where it is read from).
        stream: ask for server-sent events (text appears as it is written).
        headers: more request headers.
        extra_body: more top-level fields for every request (provider-specific options).
        timeout: seconds without a byte before the request fails.
        connect_timeout: seconds to connect.
        request_timeout: seconds for a whole answer.
        max_retries: retries of a refused or failed request (429, 5xx, a broken connection),
            only before any of the answer was passed on.
        max_retry_wait: the longest ``Retry-After`` honoured; a longer one fails at once.
        http_client: an ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`).
    """

    name: str = "http"
    default_base_url: str = ""
    #: where requests go, below ``base_url``
    path: str = ""
    supports_tool_images: bool = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, object] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a model name, not empty")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, not {max_retries!r}")
        for what, value in (("timeout", timeout), ("request_timeout", request_timeout)):
            if not value > 0:
                raise ValueError(f"{what} must be a positive number of seconds, not {value!r}")
        self.model = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        if urlsplit(self.base_url).scheme not in ("http", "https"):
            raise ValueError(f"base_url must be an http:// or https:// URL, not {redact_url(self.base_url)!r}")
        self.stream = stream
        self.extra_body = dict(extra_body or {})
        self.timeout = timeout
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._api_key = api_key
        self._secrets = SecretValues([api_key] if api_key else [])
        self._headers = dict(headers or {})
        self._own_client = http_client is None
        self._client = http_client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=connect_timeout), follow_redirects=False
        )

    # -- naming ------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        host = urlsplit(self.base_url).netloc.rsplit("@", 1)[-1]
        return f"{self.name} model {self.model!r} at {host}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label}>"

    def _error(self, what: str, *, status: int | None = None, retryable: bool = False) -> ProviderError:
        text = clean_terminal(self._secrets.mask(what), newlines=False)
        return ProviderError(f"provider {self.label}: {text}", provider=self.label, status=status, retryable=retryable)

    def _request_headers(self) -> dict[str, str]:
        """Headers of every request (subclasses add their authentication)."""
        return {"content-type": "application/json", "accept": "application/json", **self._headers}

    async def aclose(self) -> None:
        """Closes the HTTP client this provider made (not one it was given)."""
        if self._own_client:
            await self._client.aclose()

    async def __aenter__(self) -> HttpProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the format (subclasses) -------------------------------------------------------------

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The JSON body for ``request`` (without ``extra_body``)."""
        raise NotImplementedError

    def _stream_state(self, on_chunk: ChunkCallback | None) -> StreamState:
        """What assembles one streamed answer."""
        raise NotImplementedError

    async def _complete_whole(self, body: Mapping[str, object], on_chunk: ChunkCallback | None) -> Completion:
        """The answer of a request made without streaming."""
        raise NotImplementedError

    async def complete(self, request: ModelRequest, on_chunk: ChunkCallback | None = None) -> Completion:
        """See :meth:`Provider.complete`."""
        body = self.body(request)
        if not self.stream:
            return await self._complete_whole(body, on_chunk)
        state = self._stream_state(on_chunk)
        await self._post_stream(self.path, body, state.feed)
        return state.finish()

    # -- requests ----------------------------------------------------------------------------

    async def _post_json(self, path: str, body: Mapping[str, object]) -> object:
        """POSTs ``body``; returns the decoded JSON answer (retried as the class says)."""
        result: list[object] = []

        async def read(response: httpx.Response) -> None:
            data = await _read_limited(response, MAX_BODY_BYTES)
            if data is None:
                raise self._error(f"the answer is larger than {MAX_BODY_BYTES} bytes")
            try:
                result.append(json.loads(data))
            except ValueError:
                raise self._error(f"the answer is not JSON: {_preview(data)}") from None

        await self._post(path, body, read, streaming=False)
        return result[0]

    async def _post_stream(
        self, path: str, body: Mapping[str, object], on_event: Callable[[SSEEvent], Awaitable[None]]
    ) -> None:
        """POSTs ``body`` and passes each server-sent event of the answer to ``on_event``, until
        the stream ends (the caller decides whether it ended complete)."""
        count = 0

        async def read(response: httpx.Response) -> None:
            nonlocal count
            ctype = response.headers.get("content-type", "")
            if not is_event_stream(ctype):
                data = await _read_limited(response, MAX_ERROR_BYTES)
                detail = _error_message(data) if data else "(empty)"
                raise self._error(
                    f"expected an event stream (text/event-stream), got {media_type(ctype) or 'no content type'}: "
                    f"{detail}"
                )
            decoder = SSEDecoder(MAX_EVENT_BYTES)
            total = 0
            async for chunk in response.aiter_bytes():
                total += len(chunk)
                if total > MAX_STREAM_BYTES:
                    raise self._error(f"the event stream passed {MAX_STREAM_BYTES} bytes; stopped reading")
                try:
                    events = decoder.feed(chunk)
                except FrameTooLarge:
                    raise self._error(f"an event passed {MAX_EVENT_BYTES} bytes; stopped reading") from None
                for event in events:
                    count += 1
                    await on_event(event)

        await self._post(path, body, read, streaming=True, delivered=lambda: count > 0)

    async def _post(
        self,
        path: str,
        body: Mapping[str, object],
        read: Callable[[httpx.Response], Awaitable[None]],
        *,
        streaming: bool,
        delivered: Callable[[], bool] = lambda: False,
    ) -> None:
        url = self.base_url + path
        payload = json.dumps({**body, **self.extra_body}, ensure_ascii=False).encode()
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            wait: float | None = None
            log.debug("%s: POST %s (%d bytes, attempt %d)", self.label, path, len(payload), attempt)
            try:
                with trio.fail_after(self.request_timeout):
                    async with self._client.stream("POST", url, content=payload, headers=self._request_headers()) as r:
                        if r.status_code >= 400:
                            text = await self._status_text(r)
                            retryable = r.status_code in RETRYABLE_STATUS
                            if not retryable or attempt == attempts:
                                raise self._error(text, status=r.status_code, retryable=retryable)
                            wait = self._retry_wait(r, attempt, text)
                        else:
                            await read(r)
                            return
            except trio.TooSlowError:
                raise self._error(f"no complete answer within {self.request_timeout:g} s") from None
            except httpx.TimeoutException as exc:
                what = "streamed nothing" if streaming and delivered() else "did not answer"
                if delivered() or attempt == attempts:
                    raise self._error(f"{what} for {self.timeout:g} s ({type(exc).__name__})", retryable=True) from exc
                wait = _backoff(attempt)
            except httpx.RequestError as exc:
                if delivered():
                    raise self._error(f"the stream broke before the answer was complete: {_describe(exc)}") from exc
                if attempt == attempts:
                    raise self._error(f"cannot reach it: {_describe(exc)}", retryable=True) from exc
                wait = _backoff(attempt)
            assert wait is not None
            log.info("%s: retrying in %.1f s (attempt %d of %d)", self.label, wait, attempt + 1, attempts)
            await trio.sleep(wait)

    async def _status_text(self, response: httpx.Response) -> str:
        """``HTTP 429 Too Many Requests: <the provider's message>``."""
        data = await _read_limited(response, MAX_ERROR_BYTES)
        detail = _error_message(data) if data else ""
        head = f"HTTP {response.status_code} {response.reason_phrase or ''}".rstrip()
        return head + (f": {detail}" if detail else "")

    def _retry_wait(self, response: httpx.Response, attempt: int, text: str) -> float:
        asked = retry_after(response.headers)
        if asked is None:
            return _backoff(attempt)
        if asked > self.max_retry_wait:
            raise self._error(
                f"{text} (it asks to retry after {asked:g} s, longer than the {self.max_retry_wait:g} s "
                "this provider waits)",
                status=response.status_code,
                retryable=True,
            )
        return asked


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a refusal asks to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or as an
    HTTP date; ``None`` when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    return retry_after_seconds(headers.get("retry-after"))


def _backoff(attempt: int) -> float:
    delay: float = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (attempt - 1))
    return delay * (0.5 + random.random() / 2)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


async def _read_limited(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or ``None`` when it is longer than ``limit`` (the error bodies are cut at it)."""
    out = bytearray()
    async for chunk in response.aiter_bytes():
        out += chunk
        if len(out) > limit:
            if limit == MAX_ERROR_BYTES:
                return bytes(out[:limit])
            return None
    return bytes(out)


def _preview(data: bytes) -> str:
    return repr(shorten(data.decode("utf-8", "replace").strip(), 120))


def _error_message(data: bytes) -> str:
    """The message of an error body: ``{"error": {"message": ...}}`` (OpenAI, Anthropic),
    ``{"error": "..."}`` (Ollama), ``{"message": ...}``, or the body's first line."""
    text = data.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    message: object = None
    if isinstance(value, dict):
        error = value.get("error", value)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            kind = error.get("type")
            if isinstance(message, str) and isinstance(kind, str) and kind not in message:
                message = f"{message} ({kind})"
        elif isinstance(error, str):
            message = error
    if not isinstance(message, str) or not message:
        message = text.splitlines()[0] if text else ""
    return shorten(" ".join(message.split()), ERROR_CHARS)


def decode_event(provider: HttpProvider, event: SSEEvent) -> dict[str, object]:
    """An event's data as a JSON object, or a :class:`ProviderError` naming what came instead."""
    try:
        value = json.loads(event.data)
    except ValueError:
        raise provider._error(f"sent an event that is not JSON: {_preview(event.data.encode())}") from None
    if not isinstance(value, dict):
        raise provider._error(f"sent an event that is not a JSON object: {_preview(event.data.encode())}")
    return value


def api_key_for(given: str | None, env: str, *, base_url: str, required_by: str, default_env: str) -> str | None:
    """A provider's key: ``given``, else the variable ``env`` names (none when ``env`` is empty).

    Raises:
        PresetError: there is none, and ``base_url`` is on ``required_by`` (the provider's own
            API, which always wants one; a local compatible server does not).
    """
    key = given if given is not None else (os.environ.get(env) or None if env else None)
    if key is None and urlsplit(base_url).hostname == required_by:
        raise PresetError(f"no API key for {base_url}: set {env or default_env} in the environment")
    return key


async def replay(on_chunk: ChunkCallback | None, text: str, calls: list[ToolCall]) -> None:
    """A whole answer passed to ``on_chunk`` as a stream would have passed it: its text, then
    each tool call."""
    if on_chunk is None:
        return
    if text:
        await on_chunk(TextChunk(text))
    for index, call in enumerate(calls):
        await on_chunk(ToolCallChunk(index, call.id, call.name, call.raw_arguments))


def answer(
    text: str, calls: list[ToolCall], usage: Usage, reason: StopReason, stop: object, model: object
) -> Completion:
    """The model's answer as a completion: its text then its calls, the stop ``reason`` the
    format's own ``stop`` means, and the ``model`` that answered (when the provider said)."""
    parts: list[TextPart | ToolCall] = [TextPart(text=text)] if text else []
    parts += calls
    return Completion(
        message=Message(role="assistant", parts=tuple(parts)),
        usage=usage,
        stop_reason=reason,
        provider_stop_reason=str(stop) if stop else None,
        model=model if isinstance(model, str) else None,
    )
