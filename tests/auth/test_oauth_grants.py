"""The machine grants (client credentials with a secret or ``private_key_jwt``, enterprise-managed
token exchange + jwt-bearer, workload jwt-bearer), the file token store, and the loopback
redirect listener."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path

import httpx
import pytest
import trio
from oauth_fakes import AS_ORIGIN, MCP_URL, IdP, OAuthWorld, basic_credentials, call

from mcpwire.auth import (
    ClientCredentialsProvider,
    ClientInfo,
    EnterpriseManagedProvider,
    FileTokenStorage,
    JWTBearerProvider,
    OAuthError,
    TokenSet,
    open_loopback_redirect,
)

BOUND = 10.0


def _b64d(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


async def test_client_credentials_with_client_secret_basic() -> None:
    world = OAuthWorld(challenge_scope="mcp:read", auth_methods=["client_secret_basic"])
    provider = ClientCredentialsProvider(MCP_URL, client=ClientInfo("machine", "s3cret"))
    with trio.fail_after(BOUND):
        assert (await call(provider, world)).status_code == 200
    token = world.only("/token")[0]
    assert token.form == {"grant_type": "client_credentials", "resource": MCP_URL, "scope": "mcp:read"}
    assert basic_credentials(token) == ("machine", "s3cret")
    assert not world.only("/authorize") and not world.only("/register")


async def test_client_credentials_with_private_key_jwt() -> None:
    """RFC 7523 §3 client assertion signed with ES256; verified here with the public key."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    from mcpwire.auth.jwt import es256_signer

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    world = OAuthWorld(auth_methods=["private_key_jwt"])
    client = ClientInfo("jwt-client", token_endpoint_auth_method="private_key_jwt")
    provider = ClientCredentialsProvider(MCP_URL, client=client, signer=es256_signer(pem))
    with trio.fail_after(BOUND):
        assert (await call(provider, world)).status_code == 200
    form = world.only("/token")[0].form
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    head, body, signature = form["client_assertion"].split(".")
    assert json.loads(_b64d(head)) == {"typ": "JWT", "alg": "ES256"}
    claims = json.loads(_b64d(body))
    assert (claims["iss"], claims["sub"], claims["aud"]) == ("jwt-client", "jwt-client", AS_ORIGIN)
    assert claims["exp"] > claims["iat"] and claims["jti"]
    raw = _b64d(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key.public_key().verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))


def test_es256_signer_rejects_other_keys() -> None:
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from mcpwire.auth.jwt import es256_signer

    other = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match=r"^ES256 needs a P-256"):
        es256_signer(other.decode())
    with pytest.raises(ValueError, match=r"^the private key is not a valid unencrypted PEM key$"):
        es256_signer("not a key")


async def test_enterprise_managed_token_exchange_then_jwt_bearer() -> None:
    """RFC 8693 exchange at the IdP (audience = AS issuer, resource = MCP server), then the
    RFC 7523 jwt-bearer grant at the AS with client_secret_basic."""
    world = OAuthWorld(auth_methods=["client_secret_basic"])
    idp = IdP(world)
    provider = EnterpriseManagedProvider(
        MCP_URL,
        client=ClientInfo("xaa", "xaa-secret", token_endpoint_auth_method="client_secret_basic"),
        idp_token_endpoint="http://idp.test/token",
        id_token="user-id-token",
        idp_client_id="idp-client",
    )
    with trio.fail_after(BOUND):
        async with httpx.AsyncClient(transport=httpx.MockTransport(idp.handle), auth=provider) as http:
            assert (await http.post(MCP_URL, json={"method": "tools/list"})).status_code == 200
    exchange = idp.sent[0].form
    assert exchange == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "subject_token": "user-id-token",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "audience": AS_ORIGIN,
        "resource": MCP_URL,
        "client_id": "idp-client",
    }
    grant = world.only("/token")[0]
    assert grant.form == {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": "id-jag-1"}
    assert basic_credentials(grant) == ("xaa", "xaa-secret")


async def test_workload_jwt_bearer_failure_is_surfaced_not_retried() -> None:
    world = OAuthWorld()
    provider = JWTBearerProvider(
        MCP_URL, client=ClientInfo("wl", token_endpoint_auth_method="none"), assertion=lambda: "workload-jwt"
    )
    with trio.fail_after(BOUND):
        assert (await call(provider, world)).status_code == 200
    assert world.only("/token")[0].form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "assertion": "workload-jwt",
        "resource": MCP_URL,
        "client_id": "wl",
    }

    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            return httpx.Response(400, json={"error": "invalid_grant", "error_description": "expired"})
        return world.handle(request)

    world.tokens.clear()
    provider = JWTBearerProvider(MCP_URL, client=ClientInfo("wl"), assertion="expired-jwt")
    before = len(world.only("/token"))
    with trio.fail_after(BOUND), pytest.raises(OAuthError, match=r"HTTP 400 invalid_grant: expired$") as info:
        async with httpx.AsyncClient(transport=httpx.MockTransport(refuse), auth=provider) as http:
            await http.post(MCP_URL, content=b"{}")
    assert info.value.error == "invalid_grant"
    assert len(world.only("/token")) == before  # the refusing handler answered; nothing retried


async def test_file_token_storage_is_private_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "tokens.json"
    store = FileTokenStorage(path)
    tokens = TokenSet("acc", issuer="https://as", refresh_token="ref", scope="a b", expires_at=5.0, resource="r")
    await store.set_tokens("https://mcp/mcp", tokens)
    await store.set_client("https://as", ClientInfo("cid", "csecret", "client_secret_basic", "https://as"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = FileTokenStorage(path)
    assert await again.get_tokens("https://mcp/mcp") == tokens
    assert await again.get_client("https://as") == ClientInfo("cid", "csecret", "client_secret_basic", "https://as")
    assert await again.get_tokens("https://other") is None
    await again.set_tokens("https://mcp/mcp", None)
    assert await store.get_tokens("https://mcp/mcp") is None
    assert "acc" not in repr(store) and "csecret" not in repr(store)
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temporary file left


async def test_file_token_storage_tolerates_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text("not json")
    store = FileTokenStorage(path)
    assert await store.get_tokens("x") is None
    await store.set_tokens("x", TokenSet("t"))
    assert (await store.get_tokens("x")) == TokenSet("t")


async def test_loopback_redirect_receives_the_callback() -> None:
    """The listener binds 127.0.0.1 only, ignores other paths, returns the callback URL."""
    shown: list[str] = []
    with trio.fail_after(BOUND):
        async with open_loopback_redirect(show=shown.append) as handler:
            assert handler.redirect_uri.startswith("http://127.0.0.1:")
            assert handler.listener.socket.getsockname()[0] == "127.0.0.1"

            async def browser() -> None:
                # The listener is bound before authorize() accepts: connecting early just queues.
                async with httpx.AsyncClient() as http:
                    other = await http.get(handler.redirect_uri.replace("/callback", "/favicon.ico"))
                    assert other.status_code == 404
                    ok = await http.get(handler.redirect_uri + "?code=c1&state=s1")
                    assert ok.status_code == 200

            async with trio.open_nursery() as nursery:
                nursery.start_soon(browser)
                callback = await handler.authorize("https://as.example/authorize?x=1")
    assert shown == ["https://as.example/authorize?x=1"]
    assert callback == handler.redirect_uri + "?code=c1&state=s1"


async def test_loopback_redirect_times_out() -> None:
    with trio.fail_after(BOUND):
        async with open_loopback_redirect(show=lambda url: None) as handler:
            handler.timeout = 0.1
            with pytest.raises(trio.TooSlowError):
                await handler.authorize("https://as.example/authorize")


def test_login_cli_reports_an_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``mcpwire login`` fails with status 1 and a message; no token file appears."""
    from mcpwire.auth.cli import main

    store = tmp_path / "tokens.json"
    status = main(["http://127.0.0.1:9/mcp", "--store", str(store), "--no-browser", "--timeout", "20"])
    assert status == 1
    assert "mcpwire login: cannot connect to http://127.0.0.1:9/mcp" in capsys.readouterr().err
    assert not store.exists()


def _verify_proof(proof: str, method: str, url: str, token: str | None, nonce: str | None) -> dict[str, object]:
    """Checks a DPoP proof the way a resource server or AS would (RFC 9449 §4.3)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    head_b64, body_b64, sig_b64 = proof.split(".")
    head = json.loads(_b64d(head_b64))
    claims: dict[str, object] = json.loads(_b64d(body_b64))
    assert head["typ"] == "dpop+jwt" and head["alg"] == "ES256" and "d" not in head["jwk"]
    jwk = head["jwk"]
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(_b64d(jwk["x"]), "big"), int.from_bytes(_b64d(jwk["y"]), "big"), ec.SECP256R1()
    ).public_key()
    raw = _b64d(sig_b64)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head_b64}.{body_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    assert claims["htm"] == method and claims["htu"] == url and claims["jti"]
    if token is not None:
        digest = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
        assert claims["ath"] == digest
    assert claims.get("nonce") == nonce
    return claims


async def test_dpop_bound_tokens_with_server_nonces() -> None:
    """RFC 9449: a proof at the token request (retried with the AS nonce, §8), the DPoP scheme
    and a fresh proof with ``ath`` on each MCP request (retried with the RS nonce, §9)."""
    pytest.importorskip("cryptography")
    world = OAuthWorld()
    jtis: list[object] = []

    def handle(request: httpx.Request) -> httpx.Response:
        proof = request.headers.get("dpop")
        if request.url.path == "/.well-known/oauth-authorization-server":
            response = world.handle(request)
            meta = json.loads(response.content)
            return httpx.Response(200, json={**meta, "dpop_signing_alg_values_supported": ["ES256"]})
        if request.url.path == "/token":
            assert proof is not None
            if "nonce" not in json.loads(_b64d(proof.split(".")[1])):
                return httpx.Response(400, headers={"DPoP-Nonce": "as-n"}, json={"error": "use_dpop_nonce"})
            _verify_proof(proof, "POST", f"{AS_ORIGIN}/token", None, "as-n")
            response = world.handle(request)
            return httpx.Response(200, json={**json.loads(response.content), "token_type": "DPoP"})
        if request.url.host == "mcp.test" and request.url.path == "/mcp":
            auth = request.headers.get("authorization", "")
            if auth.startswith("DPoP "):
                assert proof is not None
                claims = json.loads(_b64d(proof.split(".")[1]))
                if claims.get("nonce") != "rs-n":
                    return httpx.Response(
                        401, headers={"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": "rs-n"}
                    )
                jtis.append(_verify_proof(proof, "POST", MCP_URL, auth[5:], "rs-n")["jti"])
                request.headers["authorization"] = "Bearer " + auth[5:]
            else:
                assert not auth
        return world.handle(request)

    provider = world.provider(dpop=True)
    with trio.fail_after(BOUND):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle), auth=provider) as http:
            for _ in range(2):
                response = await http.post(MCP_URL + "?q=1", json={"method": "tools/list"})
                assert response.status_code == 200
    assert len(jtis) == 2 and len(set(jtis)) == 2  # a fresh proof per request
    assert provider.counters["token_type:DPoP"] == 1
    assert provider.counters["dpop_nonce:token"] == 1 and provider.counters["dpop_nonce:resource"] == 1
    assert "DPoPKey(thumbprint=" in repr(provider._dpop)


async def test_a_new_provider_reuses_tokens_from_the_file_store(tmp_path: Path) -> None:
    """What ``mcpwire login`` relies on: a later process finds the token and sends it at once."""
    world = OAuthWorld()
    store = FileTokenStorage(tmp_path / "tokens.json")
    with trio.fail_after(BOUND):
        assert (await call(world.provider(storage=store), world)).status_code == 200
        flows = len(world.only("/token"))
        later = world.provider(storage=FileTokenStorage(tmp_path / "tokens.json"))
        assert (await call(later, world)).status_code == 200
    assert len(world.only("/token")) == flows
    assert world.paths()[-1] == "POST mcp.test/mcp" and world.paths()[-2] == "POST mcp.test/mcp"
