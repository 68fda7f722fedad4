"""The ASGI lifespan protocol, run around serving by either HTTP server.

Theory of operation: :class:`Lifespan` runs the app's ``lifespan`` scope as one task for the whole
life of the server. :meth:`Lifespan.start` waits (bounded) for ``lifespan.startup.complete``; an
app that raises before starting up, or returns without a word, does not support the protocol and
is served anyway (as the ASGI spec asks). :meth:`Lifespan.shutdown` asks for the shutdown and
waits for it, bounded; a shutdown cut short by a forced stop (the task is cancelled) is said at
INFO, not logged as the application's error.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import trio

from ..redaction import clean_terminal, shorten

__all__ = ["ASGI_VERSION", "ASGIApp", "Lifespan", "Message", "StartupFailed", "clean"]

log = logging.getLogger("mcpwire.server.http")

Message = MutableMapping[str, Any]
ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]
ASGI_VERSION: Final = {"version": "3.0", "spec_version": "2.3"}


class StartupFailed(RuntimeError):
    """The app's lifespan startup failed (``lifespan.startup.failed``) or did not finish in time."""


def clean(value: bytes | str, limit: int = 200) -> str:
    """Client or app text fit for a log line: shortened, control characters shown as escapes."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    return clean_terminal(shorten(text, limit), newlines=False)


class Lifespan:
    """The ASGI lifespan protocol, run as one task for the whole life of the server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        #: the lifespan state, copied into every request's scope
        self.state: dict[str, Any] = {}
        self.started = trio.Event()
        self.stopped = trio.Event()
        self._stop = trio.Event()
        self._asked_startup = False
        self.failure: str | None = None
        self.supported = True

    async def run(self) -> None:
        scope = {"type": "lifespan", "asgi": ASGI_VERSION, "state": self.state}
        try:
            await self.app(scope, self._receive, self._send)
        except Exception:
            if self.started.is_set():
                log.exception("the application's lifespan raised")
            else:
                # ASGI lifespan: an app that raises instead of starting up does not support it
                log.debug("the application does not support the lifespan protocol", exc_info=True)
                self.supported = False
        finally:
            if not self.started.is_set():  # returned without starting up: no lifespan support
                self.supported = False
                self.started.set()
            self.stopped.set()

    async def start(self, timeout: float) -> None:
        """Waits for the startup (bounded).

        Raises:
            StartupFailed: the app said it failed, or took longer than ``timeout``.
        """
        with trio.move_on_after(timeout):
            await self.started.wait()
        if not self.started.is_set():
            raise StartupFailed(
                f"the application's lifespan startup failed: it did not complete within {timeout:.3g} s"
            )
        if self.failure is not None:
            raise StartupFailed(f"the application's lifespan startup failed: {clean(self.failure)}")

    async def _receive(self) -> Message:
        if not self._asked_startup:
            self._asked_startup = True
            return {"type": "lifespan.startup"}
        await self._stop.wait()
        return {"type": "lifespan.shutdown"}

    async def _send(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "lifespan.startup.complete":
            self.started.set()
        elif kind == "lifespan.startup.failed":
            self.failure = str(message.get("message", "")) or "no reason given"
            self.started.set()
        elif kind == "lifespan.shutdown.complete":
            self.stopped.set()
        elif kind == "lifespan.shutdown.failed":
            if trio.current_effective_deadline() == -math.inf:  # this task is cancelled: a forced stop
                log.info("the application's lifespan shutdown was cut short by a forced stop")
            else:
                log.error("the application's lifespan shutdown failed: %s", clean(str(message.get("message", ""))))
            self.stopped.set()

    async def shutdown(self, timeout: float) -> None:
        """Asks the app to shut down and waits for it, at most ``timeout`` seconds."""
        if not self.supported:
            return
        self._stop.set()
        with trio.move_on_after(timeout) as waited:
            await self.stopped.wait()
        if waited.cancelled_caught:
            log.warning("the application's lifespan shutdown took over %.3g s; cancelled", timeout)
