"""``mcpwire serve``: the host as a service (management API, MCP gateway, events, metrics).

    mcpwire serve [--config PATH] [--host 127.0.0.1] [--port 8750] [--db URL] [--stdio]
                  [--namespacing on|off] [--token-file F | --no-auth] [--allowed-host H] [--cors-origin O]
                  [--rate-limit N] [--rate-burst N] [--max-body MiB] [--drain-timeout S]
                  [--http-server builtin|hypercorn] [--certfile F [--keyfile F]]
                  [--forwarded-allow-ips IPS] [--max-connections N] [--max-connections-per-client N]
                  [--oauth-issuer URL [--oauth-resource URL] [--oauth-scope S] [--oauth-role-claim C]
                   [--oauth-roles V=ROLE,...] [--oauth-default-role ROLE]
                   [--oidc-client-id ID [--oidc-client-secret-file F] [--oidc-scope S]]] [-v]

Exit status: 0 after a clean shutdown (SIGINT or SIGTERM: requests drain, then every server is
closed; a second one while they drain stops them at once), 2 when it cannot start (bad options,
a config file that cannot be read, a database that cannot be opened), 130 (143) when SIGINT
(SIGTERM) arrives while it starts or while it closes its servers: what was started is still closed
(each step bounded), then it says "interrupted" in one line, never with a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

from .._version import install_hint
from ..cliargs import EXIT_SIGINT, EXIT_SIGTERM, run_cli
from ..errors import ConfigError
from ..redaction import clean_terminal
from .identity import new_token
from .localfiles import data_folder, local_token
from .middleware import TraceFilter
from .oauth import check_settings as check_oauth_settings
from .settings import (
    DEFAULT_PORT,
    TOKEN_ENV_VAR,
    OAuthSettings,
    Secret,
    Settings,
    SettingsError,
    is_loopback,
    read_token,
)
from .store import StoreError

__all__ = ["main"]

EPILOG = f"""\
examples:
  mcpwire serve                                   the servers of mcp.json (or the bundled demo server)
  mcpwire serve --config team.json --port 9000
  mcpwire serve --host 0.0.0.0 --token-file /run/secrets/mcpwire --db postgresql://mcp@db/mcpwire
  mcpwire serve --stdio --namespacing off         one backend as a stdio MCP server, for a desktop client
  mcpwire serve --oauth-issuer https://login.example.com --oauth-roles mcp-admins=admin,mcp-users=caller
                --oidc-client-id mcpwire --oidc-client-secret-file /run/secrets/oidc
                                                  JWTs and console sign-in from the organisation's provider

Every request needs a token ('Authorization: Bearer TOKEN' to /api/v1, /events, /metrics and /mcp):
the admin token (${TOKEN_ENV_VAR} or --token-file; on loopback without one, the first start makes one
in the data folder and prints a sign-in link), or one made with 'mcpwire token create NAME --role ROLE'.
"""


class SafeFormatter(logging.Formatter):
    """Log lines with every control character shown as an escape: a server's text cannot forge
    lines or colour the terminal."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return clean_terminal(super().formatMessage(record), newlines=False)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpwire serve",
        description="Run the host as a service: management API (/api/v1), MCP gateway (/mcp), events, metrics.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", metavar="PATH", help="mcp.json to load (default: $MCPWIRE_CONFIG, ./mcp.json, "
                        "~/.config/mcpwire/mcp.json; none: the bundled demo server)")  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    parser.add_argument("--db", metavar="URL", help="sqlite:///PATH (default: ~/.local/share/mcpwire/service.db) "
                        "or postgresql://USER@HOST/DB (several replicas)")  # fmt: skip
    parser.add_argument("--stdio", action="store_true", help="serve the MCP gateway on stdin/stdout instead of HTTP")
    parser.add_argument("--namespacing", choices=["on", "off"], default="on",
                        help="prefix tool names with their server's (off: a pure proxy of one backend)")  # fmt: skip
    parser.add_argument(
        "--token-file", metavar="FILE", help=f"file whose first line is the admin token (else ${TOKEN_ENV_VAR})"
    )
    parser.add_argument("--no-auth", action="store_true",
                        help="no token at all (loopback only): anyone on this machine may use the API")  # fmt: skip
    parser.add_argument("--allowed-host", action="append", default=[], metavar="HOST",
                        help="a Host header to accept besides loopback names (repeatable; '*': any)")  # fmt: skip
    parser.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="a browser origin allowed to call, e.g. https://app.example (repeatable)")  # fmt: skip
    parser.add_argument("--rate-limit", type=float, default=50.0, metavar="N",
                        help="calls per second per client address (default 50; 0: no limit)")  # fmt: skip
    parser.add_argument(
        "--rate-burst", type=int, default=100, metavar="N", help="calls a client may save up (default 100)"
    )
    parser.add_argument(
        "--max-body", type=float, default=4.0, metavar="MIB", help="largest request body in MiB (default 4)"
    )
    parser.add_argument("--approval-timeout", type=float, default=300.0, metavar="S",
                        help="seconds a call waits for a decision before it is denied (default 300)")  # fmt: skip
    parser.add_argument("--caller-grace", type=float, default=30.0, metavar="S",
                        help="seconds a disconnected gateway client may take to resume a call waiting for a decision "
                        "before its approval is abandoned (default 30)")  # fmt: skip
    parser.add_argument("--http-server", choices=["builtin", "hypercorn"], default="builtin",
                        help="builtin: HTTP/1.1, the fastest (default); hypercorn: HTTP/2 too (TLS)")  # fmt: skip
    parser.add_argument("--certfile", metavar="FILE", help="PEM certificate chain: serve HTTPS only")
    parser.add_argument("--keyfile", metavar="FILE", help="the certificate's private key (PEM), if not in --certfile")
    parser.add_argument("--forwarded-allow-ips", metavar="IPS", default="",
                        help="comma-separated proxy addresses or networks whose Forwarded / X-Forwarded-For / "
                        "X-Forwarded-Proto headers are believed ('*': any; default: none)")  # fmt: skip
    parser.add_argument("--max-connections", type=int, default=1000, metavar="N",
                        help="connections at once (default 1000; when full the longest idle closes)")  # fmt: skip
    parser.add_argument("--max-connections-per-client", type=int, default=256, metavar="N",
                        help="connections at once from one client address (default 256)")  # fmt: skip
    parser.add_argument("--drain-timeout", type=float, default=10.0, metavar="S",
                        help="seconds requests in flight get at shutdown (default 10)")  # fmt: skip
    parser.add_argument(
        "-y",
        "--yes",
        "--trust",
        dest="yes",
        action="store_true",
        help="trust a project-local ./mcp.json without asking (for CI and service managers)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")
    _oauth_arguments(parser)
    return parser


def _oauth_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sign-in through an identity provider",
        "the gateway as an OAuth 2.1 protected resource: the provider's JWTs (audience: the resource URL) are "
        "accepted, a claim gives the role; the console signs people in through the provider (OpenID Connect)",
    )
    group.add_argument("--oauth-issuer", metavar="URL", help="the provider's issuer URL (https)")
    group.add_argument("--oauth-resource", metavar="URL",
                       help="the gateway's URL as clients reach it: the audience tokens must name "
                       "(default http://HOST:PORT/mcp; behind a proxy, give the public one)")  # fmt: skip
    group.add_argument("--oauth-scope", action="append", default=[], metavar="SCOPE",
                       help="a scope clients are told to ask for (repeatable)")  # fmt: skip
    group.add_argument("--oauth-role-claim", default="groups", metavar="CLAIM",
                       help="the claim whose values give the role (default groups; a.b: inside objects)")  # fmt: skip
    group.add_argument("--oauth-roles", default="", metavar="VALUE=ROLE,...",
                       help="claim values to roles: 'mcp-admins=admin,mcp-users=caller' (highest wins)")  # fmt: skip
    group.add_argument("--oauth-default-role", metavar="ROLE",
                       help="the role of a token whose claim matches none (default: it is refused)")  # fmt: skip
    group.add_argument("--oidc-client-id", metavar="ID", help="the console's client id at the provider")
    group.add_argument("--oidc-client-secret-file", metavar="FILE", help="file whose first line is its secret")
    group.add_argument("--oidc-scope", action="append", default=[], metavar="SCOPE",
                       help="a scope the console asks for besides 'openid email profile' (repeatable)")  # fmt: skip


def _oauth(args: argparse.Namespace) -> OAuthSettings | None:
    """The OAuth settings of the command line, or None without ``--oauth-issuer``."""
    from .oauth import parse_roles

    if args.oauth_issuer is None:
        given = [flag for flag, value in (
            ("--oauth-resource", args.oauth_resource), ("--oauth-scope", args.oauth_scope),
            ("--oauth-roles", args.oauth_roles), ("--oauth-default-role", args.oauth_default_role),
            ("--oidc-client-id", args.oidc_client_id), ("--oidc-client-secret-file", args.oidc_client_secret_file),
            ("--oidc-scope", args.oidc_scope),
        ) if value]  # fmt: skip
        if given:
            raise SettingsError(f"{given[0]} needs --oauth-issuer")
        return None
    if args.no_auth:
        raise SettingsError("--oauth-issuer needs authentication: it cannot be combined with --no-auth")
    secret = None
    if args.oidc_client_secret_file is not None:
        where = f"--oidc-client-secret-file {args.oidc_client_secret_file}"
        try:
            lines = Path(args.oidc_client_secret_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{where}: cannot read it ({exc.__class__.__name__})") from None
        if not lines or not lines[0].strip():
            raise SettingsError(f"{where}: the first line is empty")
        secret = Secret(lines[0].strip())
    default_role = args.oauth_default_role
    return OAuthSettings(
        issuer=args.oauth_issuer,
        resource=args.oauth_resource,
        scopes=tuple(args.oauth_scope),
        role_claim=args.oauth_role_claim,
        roles=parse_roles(args.oauth_roles),
        default_role=None if default_role in (None, "none") else default_role,
        client_id=args.oidc_client_id,
        client_secret=secret,
        console_scopes=tuple(args.oidc_scope),
    )


def _trusted(args: argparse.Namespace) -> bool:
    """A project-local ./mcp.json (found by the search, not named) starts servers only once trusted:
    the first time, its commands are shown and the user is asked (the answer is remembered)."""
    from ..cliargs import UsageError, confirm_project_config, find_target_config

    try:
        path, project_local = find_target_config(args)
    except UsageError as exc:
        print(f"mcpwire serve: {exc}", file=sys.stderr)
        return False
    if path is None or not project_local:
        return True
    return confirm_project_config(path, assume_yes=args.yes, stdin=sys.stdin, stderr=sys.stderr)


def _settings(args: argparse.Namespace) -> Settings:
    if args.max_body <= 0 or args.drain_timeout < 0 or args.approval_timeout <= 0 or not args.caller_grace >= 0:
        raise SettingsError(
            "--max-body and --approval-timeout must be positive, --drain-timeout and --caller-grace not negative"
        )
    token = read_token(args.token_file)
    if args.no_auth:
        if token is not None:
            raise SettingsError("--no-auth and a token: choose one")
        if not is_loopback(args.host):
            raise SettingsError(f"--no-auth: only on a loopback address, not {args.host}")
    settings = Settings(
        host=args.host,
        port=args.port,
        token=token,
        allowed_hosts=tuple(args.allowed_host),
        cors_origins=tuple(args.cors_origin),
        rate_limit=args.rate_limit,
        rate_burst=args.rate_burst,
        max_body_bytes=int(args.max_body * 1024 * 1024),
        drain_timeout=args.drain_timeout,
        approval_timeout=args.approval_timeout,
        caller_grace=args.caller_grace,
        namespacing=args.namespacing == "on",
        certfile=args.certfile,
        keyfile=args.keyfile,
        forwarded_allow_ips=tuple(ip for ip in args.forwarded_allow_ips.split(",") if ip.strip()),
        max_connections=args.max_connections,
        max_connections_per_client=args.max_connections_per_client,
        oauth=_oauth(args),
    )
    settings.check()
    if settings.oauth is not None:
        check_oauth_settings(settings)
    return settings


def _logging(verbose: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(TraceFilter())
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(name)s [%(trace_id)s] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG)
    if verbose == 0:
        logging.getLogger("mcpwire.server").setLevel(logging.ERROR)
    if verbose < 2:
        logging.getLogger("hypercorn.error").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcpwire serve``."""
    try:
        from .runner import ServeOptions, serve
    except ImportError as exc:  # the web stack is an extra
        print(f"mcpwire serve: {exc}; it needs the serve extra: {install_hint('serve')}", file=sys.stderr)
        return 2

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        settings = _settings(args)
    except SettingsError as exc:
        print(f"mcpwire serve: {exc}", file=sys.stderr)
        return 2
    if not _trusted(args):
        return 2
    local = False
    if settings.token is None and not args.no_auth and not args.stdio:
        # secure by default: on loopback too, a token; the first start makes one (as Jupyter does)
        try:
            value, _ = local_token(new_token)
        except (OSError, ValueError) as exc:
            print(f"mcpwire serve: cannot keep the admin token in {data_folder()}: {exc}", file=sys.stderr)
            return 2
        settings = msgspec.structs.replace(settings, token=Secret(value))
        local = True
    _logging(args.verbose)
    if args.no_auth:
        print(
            "mcpwire serve: WARNING: authentication is off (--no-auth): anyone on this machine can use the API, "
            "start commands and approve calls",
            file=sys.stderr,
        )
    options = ServeOptions(
        settings=settings,
        config=args.config,
        db=args.db,
        stdio=args.stdio,
        http_server=args.http_server,
        local_token=local,
    )
    try:
        code = run_cli(lambda: serve(options))
    except (ConfigError, StoreError, OSError, BaseExceptionGroup) as exc:
        cause = _sole(exc)
        if isinstance(cause, ConfigError | StoreError):
            message = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        elif isinstance(cause, OSError):
            message = f"cannot listen on {args.host}:{args.port}: {cause.strerror or cause}"
        else:
            raise
        print(f"mcpwire serve: {clean_terminal(message, newlines=False)}", file=sys.stderr)
        return 2
    if code in (EXIT_SIGINT, EXIT_SIGTERM):
        print("mcpwire serve: interrupted", file=sys.stderr)
    return code


def _sole(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (a nursery wraps what it raises)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
