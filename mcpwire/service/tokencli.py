"""``mcpwire token``: the service's API tokens, on the same store as ``mcpwire serve``.

    mcpwire token create NAME --role viewer|caller|approver|admin [--db URL]
    mcpwire token list [--db URL] [--json]
    mcpwire token revoke NAME [--db URL]

A token is shown once, when it is made (on stdout, alone on its line, so ``$(mcpwire token create
...)`` takes it); the store keeps only its hash. Revoking a token also ends the console sessions
signed in with it; every replica refuses it within a second.

Exit status: 0 done, 2 a usage error, an unknown or reused name, or a store that cannot be opened.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import trio

from ..redaction import clean_terminal
from .identity import TOKEN_NAME, Role, hash_credential, new_token
from .store import StoreError, TokenRow, describe_url, open_store

__all__ = ["create_token", "main"]

EPILOG = """\
roles (each includes the ones before it):
  viewer     read the API, the console, events and metrics
  caller     also the MCP gateway and tool, prompt and resource calls
  approver   also decide approvals and approve changed tool definitions
  admin      also servers (stdio commands included), tokens and settings

examples:
  mcpwire token create ci-agent --role caller
  mcpwire token create alice --role approver --db postgresql://mcp@db/mcpwire
  mcpwire token list
  mcpwire token revoke ci-agent
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise SystemExit(_usage(f"{message} (see {self.prog} --help)"))


def _usage(message: str) -> int:
    print(f"mcpwire token: {message}", file=sys.stderr)
    return 2


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcpwire token",
        description="Create, list and revoke the API tokens of mcpwire serve (kept in its store as hashes).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    db_help = "sqlite:///PATH or postgresql://... (default: the service's own, in its data folder)"
    create = commands.add_parser("create", help="make a token and show it once")
    create.add_argument("name", help="a name for it (letters, digits, . _ @ -; at most 64): audit records show it")
    create.add_argument("--role", required=True, help="viewer, caller, approver or admin")
    create.add_argument("--db", metavar="URL", help=db_help)
    listing = commands.add_parser("list", help="every token: name, role, made, revoked")
    listing.add_argument("--db", metavar="URL", help=db_help)
    listing.add_argument("--json", action="store_true", help="one JSON object per token")
    revoke = commands.add_parser("revoke", help="revoke a token (and end its console sessions)")
    revoke.add_argument("name")
    revoke.add_argument("--db", metavar="URL", help=db_help)
    return parser


def check_name(name: str) -> str:
    """The name, if it is one a token may have.

    Raises:
        ValueError: it is not.
    """
    if not TOKEN_NAME.fullmatch(name):
        raise ValueError(
            f"{clean_terminal(name, newlines=False)!r} is not a token name: use letters, digits and . _ @ - "
            "(at most 64, starting with a letter or digit)"
        )
    return name


async def create_token(store_url: str | None, name: str, role: Role) -> str:
    """Makes a token ``name`` with ``role`` in the store at ``store_url``; returns it.

    Raises:
        ValueError: a bad name. StoreError: the name exists or existed, or the store failed.
    """
    check_name(name)
    token = new_token()
    async with await open_store(store_url) as store:
        await store.access.create_token(name, role.label, hash_credential(token))
    return token


def _when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch else ""


async def _list(store_url: str | None) -> list[TokenRow]:
    async with await open_store(store_url) as store:
        return await store.access.tokens()


async def _revoke(store_url: str | None, name: str) -> TokenRow | None:
    async with await open_store(store_url) as store:
        return await store.access.revoke_token(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcpwire token``."""
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command == "create":
            try:
                role = Role.parse(args.role)
                token = trio.run(create_token, args.db, args.name, role)
            except ValueError as exc:
                return _usage(f"--role {exc}" if "role" in str(exc) else str(exc))
            print(token)
            print(
                f"mcpwire token: made {args.name!r} ({role.label}) in {describe_url(args.db)}; "
                "it is shown this once: keep it now",
                file=sys.stderr,
            )
            return 0
        if args.command == "list":
            rows = trio.run(_list, args.db)
            if args.json:
                for row in rows:
                    print(json.dumps({"name": row.name, "role": row.role, "created_at": row.created_at,
                                      "revoked_at": row.revoked_at}))  # fmt: skip
                return 0
            if not rows:
                print(f"no tokens in {describe_url(args.db)}", file=sys.stderr)
                return 0
            print(f"{'NAME':<24} {'ROLE':<9} {'MADE':<16} REVOKED")
            for row in rows:
                print(
                    f"{clean_terminal(row.name):<24} {row.role:<9} {_when(row.created_at):<16} {_when(row.revoked_at)}"
                )
            return 0
        found = trio.run(_revoke, args.db, args.name)
        if found is None:
            return _usage(f"no token named {clean_terminal(args.name, newlines=False)!r} in {describe_url(args.db)}")
        print(f"mcpwire token: revoked {found.name!r}", file=sys.stderr)
        return 0
    except StoreError as exc:
        return _usage(clean_terminal(str(exc).splitlines()[0], newlines=False))
