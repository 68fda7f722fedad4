"""Who may do what with the identity provider's JWTs: the endpoint table of tests/service/test_roles.py
(the same ENDPOINTS, the table docs/deploy.md shows) against the JWT columns. Real tokens of a
real provider for each role, for a user it maps to no role and for another audience; tokens it
will not issue on demand (expired, signed by another key, unsigned) are made here with its own
key or another one."""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _idp import ACCOUNTS, ROLE_FLAGS, Idp, SigningKey, access_token, free_port, running_idp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _harness import demo_entry, running_service, write_config
from test_roles import Callers, unexpected_answers

from mcpwire.service.agent_runs import agent_routes
from mcpwire.service.identity import Role
from mcpwire.service.oauth import parse_roles
from mcpwire.service.settings import OAuthSettings, Secret, Settings

pytestmark = [pytest.mark.real, pytest.mark.slow]

ADMIN = "oauth-roles-admin-token-0123456789"
ROLES = parse_roles(ROLE_FLAGS[ROLE_FLAGS.index("--oauth-roles") + 1])


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    with running_idp(tmp_path_factory.mktemp("idp")) as running:
        yield running


NONE_HEADER = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()


def unsigned(idp: Idp, resource: str) -> str:
    """A JWT with ``alg: none`` and the claims of an admin."""
    return f"{NONE_HEADER}.{idp.forge(resource, 'alice').split('.')[1]}."


async def test_every_endpoint_answers_every_jwt_as_documented(idp: Idp, tmp_path: Path) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    oauth = OAuthSettings(issuer=idp.issuer, resource=resource, roles=ROLES, scopes=("mcp",))
    settings = Settings(port=port, rate_limit=0, token=Secret(ADMIN), oauth=oauth)
    entry = {**demo_entry(), "policy": {"tools": {"add": {"approval": "ask"}}}}
    config = write_config(tmp_path / "mcp.json", {"demo": entry})
    agent = lambda host, store: agent_routes(host, None, store)  # noqa: E731
    real = {user: await trio.to_thread.run_sync(access_token, idp, resource, user) for user in ACCOUNTS}
    elsewhere = await trio.to_thread.run_sync(access_token, idp, "http://127.0.0.1:1/mcp", "alice")
    now = int(time.time())
    callers: Callers = {
        "JWT with the right audience and the admin group": (real["alice"], Role.ADMIN),
        "JWT with the right audience and the approver group": (real["dave"], Role.APPROVER),
        "JWT with the right audience and the caller group": (real["bob"], Role.CALLER),
        "JWT with the right audience and the viewer group": (real["carol"], Role.VIEWER),
        "JWT of a user no group maps to a role": (real["erin"], None),
        "expired JWT": (idp.forge(resource, "alice", iat=now - 900, exp=now - 600), None),
        "JWT for another audience": (elsewhere, None),
        "JWT signed by another key (under the provider's kid)": (
            idp.forge(resource, "alice", key=SigningKey.ec("es1")),
            None,
        ),
        "JWT signed by another key (its own kid)": (idp.forge(resource, "alice", key=SigningKey.rsa("mine")), None),
        "JWT of another issuer": (idp.forge(resource, "alice", iss="http://127.0.0.1:1"), None),
        "unsigned JWT (alg none)": (unsigned(idp, resource), None),
    }
    async with running_service(f"sqlite:///{tmp_path / 'service.db'}", config, settings=settings, routes=agent) as svc:
        async with httpx.AsyncClient(base_url=svc.url, timeout=30) as client:
            wrong = await unexpected_answers(client, callers)
            # a 403 names the user the provider vouched for
            as_bob = {"Authorization": f"Bearer {real['bob']}"}
            refused = await client.post("/api/v1/servers", json={"name": "x", "command": "sh"}, headers=as_bob)
            detail: Any = refused.json()["detail"]
        assert wrong == []
        assert detail == "this needs the admin role; user:bob@example.com is a caller"
