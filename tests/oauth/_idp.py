"""The identity provider of the OAuth tests: panva's oidc-provider as a real process (installed by
tests/real/install_idp.sh, configured by fixtures/idp.mjs), its signing keys (made here, so tests
can also forge the tokens it will not issue on demand: expired, for another audience, signed by
another key), and a user agent that signs in on its own pages. Imported as ``from _idp import ...``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import select
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "service"))
from _process import ServeProcess, clean_env  # noqa: E402

IDP_DIR = Path(os.environ.get("MCPWIRE_IDP_DIR", REPO / ".cache" / "idp"))
NODE = IDP_DIR / "node_modules" / "node" / "bin" / "node"
LAUNCHER = Path(__file__).with_name("fixtures") / "idp.mjs"
#: the groups each test user is in (the gateway maps them to roles)
ACCOUNTS = {
    "alice": {"groups": ["mcp-admins"]},
    "bob": {"groups": ["mcp-users"]},
    "carol": {"groups": ["mcp-viewers"]},
    "dave": {"groups": ["mcp-approvers", "mcp-viewers"]},
    "erin": {"groups": ["sales"]},
}
#: the ``mcpwire serve`` flags mapping those groups
ROLE_FLAGS = [
    "--oauth-role-claim", "groups",
    "--oauth-roles", "mcp-admins=admin,mcp-approvers=approver,mcp-users=caller,mcp-viewers=viewer",
    "--oauth-scope", "mcp",
]  # fmt: skip


def require_idp() -> None:
    for path in (NODE, IDP_DIR / "node_modules" / "oidc-provider" / "lib" / "index.js"):
        if not path.exists():
            message = f"{path} is missing: run tests/real/install_idp.sh"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int(value: int, width: int | None = None) -> str:
    return _b64(value.to_bytes(width or (value.bit_length() + 7) // 8, "big"))


@dataclass
class SigningKey:
    """A private key with its ``kid`` and ``alg``, as a JWK and as a signer."""

    kid: str
    alg: str
    key: Any = field(repr=False)

    @classmethod
    def rsa(cls, kid: str) -> SigningKey:
        return cls(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))

    def private_jwk(self) -> dict[str, str]:
        if self.alg == "RS256":
            n = self.key.private_numbers()
            p = n.public_numbers
            return {"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig", "n": _int(p.n), "e": _int(p.e),
                    "d": _int(n.d), "p": _int(n.p), "q": _int(n.q), "dp": _int(n.dmp1), "dq": _int(n.dmq1),
                    "qi": _int(n.iqmp)}  # fmt: skip
        n = self.key.private_numbers()
        x, y = n.public_numbers.x, n.public_numbers.y
        return {"kty": "EC", "kid": self.kid, "alg": "ES256", "use": "sig", "crv": "P-256",
                "x": _int(x, 32), "y": _int(y, 32), "d": _int(n.private_value, 32)}  # fmt: skip

    def sign(self, claims: Mapping[str, Any], **header: Any) -> str:
        head = {"alg": self.alg, "typ": "at+jwt", "kid": self.kid, **header}
        data = f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(dict(claims)).encode())}".encode()
        if self.alg == "RS256":
            signature = self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        else:
            r, s = decode_dss_signature(self.key.sign(data, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{data.decode()}.{_b64(signature)}"


@dataclass
class Idp:
    """A running oidc-provider: its issuer URL and keys (those it publishes and signs with)."""

    proc: subprocess.Popen[bytes]
    issuer: str
    keys: list[SigningKey]
    log: Path

    def metadata(self) -> dict[str, Any]:
        return httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=10).json()  # type: ignore[no-any-return]

    def forge(self, resource: str, user: str = "alice", *, key: SigningKey | None = None, **claims: Any) -> str:
        """A token as the provider would issue it for ``user`` and ``resource`` (signed with its
        ES256 key unless ``key``), with ``claims`` laid over it."""
        now = int(time.time())
        body = {"iss": self.issuer, "sub": user, "aud": resource, "iat": now, "exp": now + 300, "scope": "mcp",
                "client_id": "forged", "email": f"{user}@example.com", "groups": ACCOUNTS[user]["groups"]}  # fmt: skip
        body.update(claims)
        signer = key or next(k for k in self.keys if k.alg == "ES256")
        return signer.sign({k: v for k, v in body.items() if v is not None})

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@contextmanager
def running_idp(
    folder: Path, clients: Sequence[Mapping[str, Any]] = (), *, keys: list[SigningKey] | None = None, **options: Any
) -> Iterator[Idp]:
    """oidc-provider on a free loopback port (or ``port=``) with ``clients`` pre-registered
    (dynamic registration is open too) and ``keys`` (an RSA and an EC key by default; the EC one
    signs access tokens), until the block ends."""
    require_idp()
    keys = keys or [SigningKey.rsa("rs1"), SigningKey.ec("es1")]
    config = {
        "modules": str(IDP_DIR / "node_modules"),
        "keys": [k.private_jwk() for k in keys],
        "clients": [dict(c) for c in clients],
        "accounts": ACCOUNTS,
        **options,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "idp.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    log = folder / "idp.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([str(NODE), str(LAUNCHER), str(path)], stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("READY "):
        proc.kill()
        raise AssertionError(f"oidc-provider did not start: {line!r}\n{log.read_text(errors='replace')}")
    idp = Idp(proc, line.split()[1], keys, log)
    try:
        yield idp
    finally:
        idp.stop()


_FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', re.S)
_INPUT = re.compile(r"<input([^>]*)>")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def sign_in(authorization_url: str, user: str, redirect_uri: str, *, timeout: float = 30) -> str:
    """Plays the user at the provider: follows the authorization URL, fills its login page (any
    password) and confirms its consent page, until the provider redirects to ``redirect_uri``;
    returns that URL (with the code)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=10, follow_redirects=False) as browser:
        response = browser.get(authorization_url)
        while time.monotonic() < deadline:
            location = response.headers.get("location")
            if location is not None:
                target = urllib.parse.urljoin(str(response.url), location)
                if target.startswith(redirect_uri):
                    return target
                response = browser.get(target)
                continue
            forms = _FORM.findall(response.text)
            assert response.status_code == 200 and forms, f"no form on the provider's page: {response.text[:500]}"
            action, inner = forms[0]
            fields = {}
            for attributes in _INPUT.findall(inner):
                named = dict(_ATTRIBUTE.findall(attributes))
                if "name" in named:
                    fields[named["name"]] = named.get("value", "")
            if "login" in fields:
                fields.update(login=user, password=secrets.token_hex(4))
            response = browser.post(urllib.parse.urljoin(str(response.url), action.replace("&amp;", "&")), data=fields)
    raise AssertionError("the provider did not redirect back in time")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, _b64(hashlib.sha256(verifier.encode()).digest())


def access_token(idp: Idp, resource: str, user: str) -> str:
    """A real access token of the provider for ``user`` and ``resource``: a public client
    registered dynamically, the authorization code flow with PKCE on the provider's own pages."""
    meta = idp.metadata()
    redirect_uri = "http://127.0.0.1:9/callback"
    registered = httpx.post(
        meta["registration_endpoint"],
        json={
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
        },
        timeout=10,
    ).json()
    verifier, challenge = pkce()
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": registered["client_id"], "redirect_uri": redirect_uri, "scope": "mcp",
        "state": "s", "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource,
    })  # fmt: skip
    back = sign_in(f"{meta['authorization_endpoint']}?{query}", user, redirect_uri)
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(back).query))["code"]
    answer = httpx.post(
        meta["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
            "client_id": registered["client_id"],
            "resource": resource,
        },
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: the console's client at the provider (its secret goes to mcpwire serve in a file)
CONSOLE_CLIENT = "mcpwire-console"
CONSOLE_SECRET = "console-secret-" + secrets.token_hex(16)
ADMIN_TOKEN = "oauth-tests-admin-token-0123456789"


def console_client(port: int) -> dict[str, Any]:
    """The console as a confidential client of the provider, its callback on ``port``."""
    return {
        "client_id": CONSOLE_CLIENT,
        "client_secret": CONSOLE_SECRET,
        "redirect_uris": [f"http://127.0.0.1:{port}/login/oidc/callback"],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }


@dataclass
class Served:
    """``mcpwire serve`` as a process, with the identity provider it trusts."""

    process: ServeProcess
    idp: Idp
    folder: Path

    @property
    def url(self) -> str:
        return str(self.process.url)

    @property
    def resource(self) -> str:
        return f"{self.url}/mcp"


@contextmanager
def serving_with_idp(folder: Path, servers: Mapping[str, Any], *, extra: Sequence[str] = ()) -> Iterator[Served]:
    """The provider (with the console's client) and ``mcpwire serve`` on a free port trusting it:
    the roles of ROLE_FLAGS, the console signing in through it; the admin token ADMIN_TOKEN."""
    port = free_port()
    with running_idp(folder / "idp", [console_client(port)]) as idp:
        config = folder / "mcp.json"
        config.write_text(json.dumps({"mcpServers": dict(servers)}))
        secret = folder / "oidc-secret"
        secret.write_text(CONSOLE_SECRET + "\n")
        secret.chmod(0o600)
        argv = [sys.executable, "-m", "mcpwire", "serve", "--config", str(config), "--port", str(port),
                "--db", f"sqlite:///{folder / 'service.db'}", "--oauth-issuer", idp.issuer, *ROLE_FLAGS,
                "--oidc-client-id", CONSOLE_CLIENT, "--oidc-client-secret-file", str(secret),
                "--oidc-scope", "groups", "-v", *extra]  # fmt: skip
        env = clean_env(folder, MCPWIRE_TOKEN=ADMIN_TOKEN)
        with (folder / "serve.log").open("wb") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, cwd=folder
            )
        process = ServeProcess(proc)
        try:
            process.read_until("Ctrl+C stops.", timeout=90)
            yield Served(process, idp, folder)
        finally:
            process.stop()
