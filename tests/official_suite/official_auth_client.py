"""mcpwire with OAuth, driven by the official MCP conformance runner (``auth/*`` client scenarios).

The runner starts a mock MCP server and authorization server per scenario and runs
``python official_auth_client.py <url>`` with ``MCP_CONFORMANCE_SCENARIO`` naming the scenario
and, for some, ``MCP_CONFORMANCE_CONTEXT`` (JSON) carrying client credentials. Each scenario is
what an application would do: build the matching ``mcpwire.auth`` provider, connect through it,
list the tools and call one. Discovery, registration, PKCE, scopes, ``iss`` checks and step-up
are the provider's job. The mock authorization endpoint approves at once, so the headless
redirect handler stands in for the browser.

Exit 0 on success; 1 when the flow is refused (the runner forgives that where refusing is the
point). The trace file (``MCPWIRE_CONFORMANCE_TRACE``) records what happened, for the tests'
anti-vacuity checks; no token or secret is ever written to it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from typing import Any

import httpx
import trio

import mcpwire
from mcpwire.auth import (
    ClientCredentialsProvider,
    ClientInfo,
    EnterpriseManagedProvider,
    HeadlessRedirect,
    JWTBearerProvider,
    OAuthError,
    OAuthProvider,
)

log = logging.getLogger("official_auth_client")

_TRACE = os.environ.get("MCPWIRE_CONFORMANCE_TRACE")

#: The runner's stand-in Client ID Metadata Document URL (never fetched by the mock AS).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
#: Never contacted: the mock authorization endpoint redirects to it and the handler reads Location.
REDIRECT_URI = "http://localhost:3000/callback"


#: Machine-to-machine scenarios: listing the tools is enough.
MACHINE_SCENARIOS = ("auth/client-credentials-basic", "auth/client-credentials-jwt", "auth/wif-jwt-bearer")


def record(line: str) -> None:
    if _TRACE:
        with open(_TRACE, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if not raw:
        return {}
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise SystemExit("MCP_CONFORMANCE_CONTEXT is not a JSON object")
    return data


def build_provider(url: str, scenario: str, ctx: dict[str, Any]) -> OAuthProvider:
    if scenario == "auth/client-credentials-basic":
        client = ClientInfo(ctx["client_id"], ctx["client_secret"], token_endpoint_auth_method="client_secret_basic")
        return ClientCredentialsProvider(url, client=client)
    if scenario == "auth/client-credentials-jwt":
        from mcpwire.auth.jwt import es256_signer

        client = ClientInfo(ctx["client_id"], token_endpoint_auth_method="private_key_jwt")
        return ClientCredentialsProvider(url, client=client, signer=es256_signer(ctx["private_key_pem"]))
    if scenario in ("auth/enterprise-managed-authorization", "auth/cross-app-access-complete-flow"):
        client = ClientInfo(ctx["client_id"], ctx["client_secret"], token_endpoint_auth_method="client_secret_basic")
        return EnterpriseManagedProvider(
            url,
            client=client,
            idp_token_endpoint=ctx["idp_token_endpoint"],
            id_token=ctx["idp_id_token"],
            idp_client_id=ctx.get("idp_client_id"),
        )
    if scenario == "auth/wif-jwt-bearer":
        client = ClientInfo(ctx["client_id"], token_endpoint_auth_method="none")
        return JWTBearerProvider(url, client=client, assertion=ctx["valid_jwt"])
    pre_registered = None
    if ctx.get("client_id") and ctx.get("client_secret"):
        pre_registered = ClientInfo(ctx["client_id"], ctx["client_secret"], issuer=ctx.get("issuer") or "")
    return OAuthProvider(
        url,
        redirect=HeadlessRedirect(redirect_uri=REDIRECT_URI),
        client=pre_registered,
        client_metadata_url=CIMD_URL,
        client_name="mcpwire-conformance",
        # DPoP-bound tokens wherever the AS offers them (RFC 9449); other ASes see no change.
        dpop=importlib.util.find_spec("cryptography") is not None,
    )


async def main(url: str, scenario: str) -> int:
    ctx = context()
    provider = build_provider(url, scenario, ctx)
    options: dict[str, Any] = {"timeout": 20}
    pinned = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    if pinned:
        options["protocol_version"] = pinned
    status = 0
    try:
        with trio.fail_after(28):
            async with (
                httpx.AsyncClient(auth=provider, timeout=20.0) as http,
                mcpwire.open_client(url, http_client=http, **options) as client,
            ):
                record(f"connected {client.era.value if client.era else '?'} {client.protocol_version}")
                tools = await client.list_tools()
                record("list_tools")
                if tools and scenario not in MACHINE_SCENARIOS:
                    record(f"call_tool {tools[0].name}")
                    await client.call_tool(tools[0].name, {})
            record("closed")
    except OAuthError as exc:
        log.error("authorization refused: %s", exc)
        record(f"refused {exc.error or 'flow'}")
        status = 1
    except mcpwire.MCPWireError as exc:
        log.error("failed: %s: %s", type(exc).__name__, exc)
        record(f"failed {type(exc).__name__}")
        status = 1
    finally:
        for name, count in sorted(provider.counters.items()):
            record(f"counter {name} {count}")
    return status


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    if len(sys.argv) < 2:
        print("usage: MCP_CONFORMANCE_SCENARIO=<name> official_auth_client.py <server-url>", file=sys.stderr)
        sys.exit(2)
    sys.exit(trio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
