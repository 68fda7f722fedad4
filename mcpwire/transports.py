"""Server specifications: how to reach a server, as plain immutable values.

A spec says *where* a server is; :func:`mcpwire.open_client` turns it into a live connection.
Specs are msgspec Structs, so they load from configuration and compare by value (the era cache
is keyed by them).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Final, Literal
from urllib.parse import urlsplit

import msgspec

__all__ = [
    "DEFAULT_INHERITED_ENV",
    "HttpServer",
    "StdioServer",
    "as_server",
    "as_stdio_server",
    "demo_server",
    "split_header",
]

#: Environment variables a stdio server inherits by default. Everything else (tokens, keys) is
#: passed only when configured, so a server sees no secret it was not given.
DEFAULT_INHERITED_ENV: Final[tuple[str, ...]] = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    # Windows needs these to start most programs at all.
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
)


class StdioServer(msgspec.Struct, frozen=True, kw_only=True):
    """A server started as a subprocess speaking newline-delimited JSON-RPC on stdio.

    Attributes:
        command: the program (looked up on ``PATH``).
        args: its arguments.
        env: extra environment variables (added to the inherited base).
        cwd: working directory, or ``None`` for the current one.
        inherit_env: pass the whole parent environment instead of the safe base.
        name: a label for logs and errors; defaults to the program's base name.
        shutdown_grace: seconds to wait after closing stdin, and again after SIGTERM.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    inherit_env: bool = False
    name: str | None = None
    shutdown_grace: float = 2.0

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError("a stdio server needs a command")

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        base = os.path.basename(self.command)
        # For interpreters and launchers, the script or package says more than the program.
        if base.startswith(("python", "node", "npx", "uvx", "uv", "bunx", "deno")) and self.args:
            for arg in self.args:
                if not arg.startswith("-"):
                    return os.path.basename(arg.rstrip("/"))
        return base

    def environment(self) -> dict[str, str]:
        """The environment the process gets: safe base (or everything) plus ``env``."""
        if self.inherit_env:
            env = dict(os.environ)
        else:
            env = {k: v for k in DEFAULT_INHERITED_ENV if (v := os.environ.get(k)) is not None}
        env.update(self.env)
        return env

    def __repr__(self) -> str:
        # Environment values may be secrets: show only their names.
        keys = ", ".join(sorted(self.env))
        return f"StdioServer({shlex.join(self.argv)!r}, env keys=[{keys}], cwd={self.cwd!r})"

    __str__ = __repr__


def as_stdio_server(target: StdioServer | Sequence[str] | str) -> StdioServer:
    """Accepts a spec, an argv list, or a shell-like command string."""
    if isinstance(target, StdioServer):
        return target
    argv = shlex.split(target) if isinstance(target, str) else list(target)
    if not argv:
        raise ValueError("empty command: give the server's program and its arguments")
    if not all(isinstance(a, str) for a in argv):
        raise TypeError(f"command arguments must be strings, got {argv!r}")
    return StdioServer(command=argv[0], args=tuple(argv[1:]))


#: Header names whose values are secrets: never logged, shown as ``***``.
SECRET_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})


class HttpServer(msgspec.Struct, frozen=True, kw_only=True):
    """A server reached over HTTP: Streamable HTTP (both eras) or the legacy HTTP+SSE transport.

    Attributes:
        url: the MCP endpoint (or, for HTTP+SSE, the SSE URL).
        transport: ``"auto"`` (detect, LC-46), ``"streamable-http"`` or ``"sse"``.
        headers: extra headers sent on every request.
        bearer_token: sent as ``Authorization: Bearer <token>``.
        api_key: sent in ``api_key_header`` (default ``Authorization``).
        name: a label for logs and errors; defaults to the host name.
    """

    url: str
    transport: Literal["auto", "streamable-http", "sse"] = "auto"
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    bearer_token: str | None = None
    api_key: str | None = None
    api_key_header: str = "Authorization"
    name: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {self.url!r}")
        if self.transport not in ("auto", "streamable-http", "sse"):
            raise ValueError(f"transport must be 'auto', 'streamable-http' or 'sse', not {self.transport!r}")

    @property
    def label(self) -> str:
        return self.name or (urlsplit(self.url).hostname or "server")

    @property
    def origin(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}".lower()

    @property
    def has_auth(self) -> bool:
        return bool(self.bearer_token or self.api_key or any(k.lower() in SECRET_HEADERS for k in self.headers))

    def auth_headers(self) -> dict[str, str]:
        """Configured headers plus credentials. Secrets: do not log the result."""
        headers = dict(self.headers)
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token}"
        if self.api_key:
            headers[self.api_key_header] = self.api_key
        return headers

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={'***' if k.lower() in SECRET_HEADERS else v!r}" for k, v in self.headers.items())
        auth = " bearer=***" if self.bearer_token else ""
        auth += " api_key=***" if self.api_key else ""
        return f"HttpServer({self.url!r}, transport={self.transport!r}, headers=[{shown}]{auth})"

    __str__ = __repr__


def demo_server(*flags: str, name: str = "demo") -> StdioServer:
    """The bundled demo server (``python -m mcpwire.testing.demo_server``) with this interpreter:
    what :func:`mcpwire.open_client` connects to without a target. The spec only names the
    module to run in a subprocess; nothing of it is imported here."""
    return StdioServer(command=sys.executable, args=("-m", "mcpwire.testing.demo_server", *flags), name=name)


def as_server(target: StdioServer | HttpServer | Sequence[str] | str) -> StdioServer | HttpServer:
    """A spec from a spec, a URL, an argv list or a command string."""
    if isinstance(target, StdioServer | HttpServer):
        return target
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return HttpServer(url=target)
    return as_stdio_server(target)


def split_header(text: str) -> tuple[str, str]:
    """``"Name: value"`` or ``"Name=value"`` (as command lines take them) as ``(name, value)``.

    A header name contains neither ``:`` nor ``=`` (RFC 9110 token), so the first of the two
    ends it, whichever form was used; the value may contain both (URLs, base64).

    Raises:
        ValueError: no separator, or an empty or malformed name.
    """
    cuts = [i for i in (text.find(":"), text.find("=")) if i != -1]
    if not cuts:
        raise ValueError("expected NAME: VALUE or NAME=VALUE")  # never echo it: it may be a bare token
    cut = min(cuts)
    name, value = text[:cut].strip(), text[cut + 1 :].strip()
    if not name or any(c.isspace() or c in '"(),/;<>?@[\\]{}' for c in name):
        raise ValueError(f"{name!r} is not a valid header name")
    return name, value
