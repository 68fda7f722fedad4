"""``/api/v1/tokens``: the service's API tokens, for admins (as ``mcpwire token`` does)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ..identity import TOKEN_NAME, Role, hash_credential, new_token
from ..problems import ProblemError
from ..store import StoreError, TokenRow
from .core import API, PREFIX, service_of
from .routing import Ctx, Reply, ResponseSpec
from .types import In, Out

__all__ = ["TokenCreated", "TokenIn", "TokenList", "TokenOut"]

TAGS = ("tokens",)

TokenName = Annotated[
    str, msgspec.Meta(pattern=TOKEN_NAME.pattern, description="letters, digits, . _ @ - (at most 64)")
]
RoleName = Literal["viewer", "caller", "approver", "admin"]


class TokenOut(Out, frozen=True, kw_only=True):
    """A token as the service keeps it: its name and role, never the token."""

    name: str
    role: str
    created_at: float
    revoked_at: float | None = None


class TokenList(Out, frozen=True, kw_only=True):
    items: list[TokenOut]


class TokenIn(In, frozen=True, kw_only=True):
    name: TokenName
    role: RoleName


class TokenCreated(Out, frozen=True, kw_only=True):
    """A new token: ``token`` is shown this once (the service keeps only its hash)."""

    name: str
    role: str
    token: str


def _out(row: TokenRow) -> TokenOut:
    return TokenOut(name=row.name, role=row.role, created_at=row.created_at, revoked_at=row.revoked_at)


@API.operation(
    "GET",
    f"{PREFIX}/tokens",
    summary="List the API tokens (names and roles; revoked ones too)",
    responses={200: ResponseSpec("Every token, by name.", TokenList)},
    tags=TAGS,
    role=Role.ADMIN,
)
async def list_tokens(ctx: Ctx) -> TokenList:
    rows = await service_of(ctx).store.access.tokens()
    return TokenList(items=[_out(row) for row in rows])


@API.operation(
    "POST",
    f"{PREFIX}/tokens",
    summary="Make a token with a role; it is shown this once",
    body=TokenIn,
    responses={201: ResponseSpec("The token, shown this once.", TokenCreated)},
    tags=TAGS,
    role=Role.ADMIN,
)
async def create_token(ctx: Ctx) -> Reply:
    """Names are never reused, so an audit record naming a token keeps one meaning: a name that
    exists or existed is a 409."""
    body = ctx.body_as(TokenIn)
    token = new_token()
    try:
        row = await service_of(ctx).store.access.create_token(body.name, body.role, hash_credential(token))
    except StoreError as exc:
        if "names are not reused" in str(exc):
            raise ProblemError(409, str(exc)) from None
        raise
    return Reply(TokenCreated(name=row.name, role=row.role, token=token), status=201)


@API.operation(
    "DELETE",
    f"{PREFIX}/tokens/{{name}}",
    summary="Revoke a token (and end the console sessions signed in with it)",
    responses={200: ResponseSpec("The token, revoked.", TokenOut)},
    tags=TAGS,
    role=Role.ADMIN,
)
async def revoke_token(ctx: Ctx) -> TokenOut:
    service = service_of(ctx)
    row = await service.store.access.revoke_token(ctx.path["name"])
    if row is None:
        raise ProblemError(404, f"no token named {ctx.path['name']!r}; GET {PREFIX}/tokens lists them")
    if service.authenticator is not None:
        service.authenticator.forget()
    return _out(row)
