"""``mcpwire login URL``: authorize once in the browser and keep the tokens in a private file.

Connects to the MCP server through an :class:`~mcpwire.auth.OAuthProvider` whose redirect
handler listens on ``127.0.0.1``; the server's 401 starts the flow, the authorization URL is
printed (and a browser asked to open it, unless ``--no-browser``), the browser comes back to the
loopback listener, and the tokens land in a :class:`~mcpwire.auth.FileTokenStorage` (mode 0600).
Later runs with the same store reuse and refresh them. Messages go to stderr, like the rest of
``mcpwire login``'s output.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import trio

from ..cliargs import run_cli
from ..redaction import clean_terminal, redact_url

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_STORE", "main"]

log = logging.getLogger(__name__)

#: Where tokens go unless ``--store`` says otherwise.
DEFAULT_STORE = Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")) / "mcpwire" / "tokens.json"
#: The whole login, browser included, may take this long.
LOGIN_TIMEOUT_SECONDS = 600.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpwire login", description="Authorize mcpwire with an MCP server (OAuth).")
    parser.add_argument("url", help="the MCP server URL (HTTP)")
    parser.add_argument("--store", type=Path, default=DEFAULT_STORE, help=f"token file (default {DEFAULT_STORE})")
    parser.add_argument("--port", type=int, default=0, help="loopback callback port (default: any free port)")
    parser.add_argument("--client-id", help="a pre-registered client id (needs --issuer)")
    parser.add_argument(
        "--issuer",
        help="the issuer of the authorization server the client id was registered with; the credentials "
        "are never sent to another one",
    )
    parser.add_argument("--client-secret-env", help="name of the environment variable holding its secret")
    parser.add_argument("--client-metadata-url", help="an https Client ID Metadata Document URL")
    parser.add_argument(
        "--no-browser", action="store_true", help="only print the authorization URL; do not try to open a browser"
    )
    parser.add_argument("--timeout", type=float, default=LOGIN_TIMEOUT_SECONDS, help="seconds to wait in total")
    return parser


async def _login(args: argparse.Namespace, transport: httpx.AsyncBaseTransport | None) -> int:
    import httpx

    import mcpwire
    from mcpwire.auth import ClientInfo, FileTokenStorage, OAuthError, OAuthProvider, open_loopback_redirect

    def show(url: str) -> None:
        # Always printed: on a machine without a browser this is the only way to the login page.
        lead = "Open this URL" if args.no_browser else "Opening a browser; if none appears, open this URL"
        shown = clean_terminal(url, newlines=False)
        print(f"{lead} to authorize (waiting up to {args.timeout:g} s):\n\n  {shown}\n", file=sys.stderr)

    client = None
    if args.client_id:
        secret = os.environ.get(args.client_secret_env) if args.client_secret_env else None
        # AU-15: pre-registered credentials belong to one authorization server.
        client = ClientInfo(args.client_id, secret, issuer=args.issuer)
    storage = FileTokenStorage(args.store)
    stored_before = _contents(storage.path)
    with trio.move_on_after(args.timeout) as scope:
        async with open_loopback_redirect(args.port, show=show, open_browser=not args.no_browser) as redirect:
            provider = OAuthProvider(
                args.url,
                redirect=redirect,
                storage=storage,
                client=client,
                client_metadata_url=args.client_metadata_url,
            )
            try:
                async with (
                    httpx.AsyncClient(auth=provider, timeout=30.0, transport=transport) as http,
                    # the handshake waits for the person signing in: as long as the whole login may take
                    mcpwire.open_client(args.url, http_client=http, connect_timeout=args.timeout) as session,
                ):
                    name = session.server_info.name if session.server_info else redact_url(args.url)
            except OAuthError as exc:
                print(f"mcpwire login: {clean_terminal(str(exc), newlines=False)}", file=sys.stderr)
                return 1
            except mcpwire.MCPWireError as exc:
                reason = clean_terminal(str(exc), newlines=False)
                print(f"mcpwire login: cannot connect to {redact_url(args.url)}: {reason}", file=sys.stderr)
                return 1
    if scope.cancelled_caught:
        print(f"mcpwire login: gave up after {args.timeout:g} s without an authorization", file=sys.stderr)
        return 1
    shown = clean_terminal(name, newlines=False)
    if _contents(storage.path) != stored_before:
        print(f"Logged in to {shown}; tokens saved in {storage.path}", file=sys.stderr)
    elif await storage.get_tokens(provider.resource) is not None:
        print(f"Already logged in to {shown}: the tokens in {storage.path} still work", file=sys.stderr)
    else:
        # The server answered without asking for a token: there was nothing to authorize.
        print(f"{shown} needs no authorization: it answered without a token; nothing was saved", file=sys.stderr)
    return 0


def _contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def main(argv: list[str] | None = None, *, transport: httpx.AsyncBaseTransport | None = None) -> int:
    """Runs ``mcpwire login``; returns the exit status (0 on success).

    Args:
        argv: the arguments after ``login``.
        transport: the httpx transport for the MCP server and its authorization server (tests
            inject an in-process one); the browser and the loopback listener do not use it.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    parts = urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        print(f"mcpwire login: not an http(s) URL: {redact_url(args.url)!r}", file=sys.stderr)
        return 2
    if args.issuer and not args.client_id:
        print("mcpwire login: --issuer binds a pre-registered --client-id; give both or neither", file=sys.stderr)
        return 2
    if args.client_id and not args.issuer:
        print(
            "mcpwire login: --client-id needs --issuer, the authorization server it was registered with "
            "(its metadata's 'issuer'), so the credentials are never offered to another one",
            file=sys.stderr,
        )
        return 2
    return run_cli(partial(_login, args, transport))
