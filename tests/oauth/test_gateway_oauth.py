"""``mcpwire serve`` as an OAuth 2.1 protected resource of a real identity provider (panva's
oidc-provider), from outside: its metadata and challenges, the checker's grade of them, and
clients nobody here wrote signing in through the provider and calling tools through the gateway
(the official Python SDK's OAuth client; ``mcpwire login`` and mcpwire's own client)."""

from __future__ import annotations

import base64
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _idp import ADMIN_TOKEN, Served, access_token, serving_with_idp, sign_in

from mcpwire.auth import FileTokenStorage, OAuthProvider

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SDK_PYTHON = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers")) / "py" / "bin" / "python"
FIXTURES = Path(__file__).with_name("fixtures")
ECHO = ("demo__echo", '{"text": "through the provider"}')


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    demo = {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server"]}
    with serving_with_idp(tmp_path_factory.mktemp("gateway-oauth"), {"demo": demo}) as running:
        yield running


def claims(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))  # type: ignore[no-any-return]


def test_the_gateway_publishes_its_resource_metadata_and_challenges(served: Served) -> None:
    metadata_url = f"{served.url}/.well-known/oauth-protected-resource/mcp"
    expected = {
        "resource": served.resource,
        "authorization_servers": [served.idp.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpwire gateway",
        "scopes_supported": ["mcp"],
    }
    for url in (metadata_url, f"{served.url}/.well-known/oauth-protected-resource"):
        answer = httpx.get(url, timeout=10)
        assert (answer.status_code, answer.headers["content-type"]) == (200, "application/json")
        assert answer.json() == expected
    challenge = f'Bearer realm="mcpwire", resource_metadata="{metadata_url}", scope="mcp"'
    for path in ("/mcp", "/api/v1/servers", "/metrics", "/events"):
        bare = httpx.get(served.url + path, timeout=10)
        assert (bare.status_code, bare.headers["www-authenticate"]) == (401, challenge)
        bad = httpx.get(served.url + path, headers={"Authorization": "Bearer a.b.c"}, timeout=10)
        assert (bad.status_code, bad.headers["www-authenticate"]) == (401, challenge + ', error="invalid_token"')


def test_the_checker_grades_the_authorization_challenge_as_passed(served: Served, tmp_path: Path) -> None:
    token = access_token(served.idp, served.resource, "bob")
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", "mcpwire", "check", served.resource, "--only", "SV-39", "--bearer-env",
            "GATEWAY_TOKEN", "--json", str(report)]  # fmt: skip
    env = {**os.environ, "GATEWAY_TOKEN": token}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(report.read_text())["results"]
    outcomes = {r["revision"]: r["outcome"] for r in results if r["id"] == "SV-39"}
    assert outcomes["2026-07-28"] == outcomes["2025-11-25"] == outcomes["2025-06-18"] == "pass", outcomes
    assert token not in report.read_text() + done.stdout + done.stderr


class Sdk:
    """The SDK's OAuth client script, answered like a browser would: the test signs in as ``user``
    on the provider's pages and hands back the URL the provider redirected to."""

    def __init__(self, served: Served, mode: str, bearer: str | None = None) -> None:
        if not SDK_PYTHON.exists():
            pytest.skip(f"{SDK_PYTHON} is missing: run tests/real/install_servers.sh")
        argv = [str(SDK_PYTHON), str(FIXTURES / "sdk_oauth_client.py"), served.resource, mode, *ECHO]
        env = {**os.environ, **({"GATEWAY_BEARER": bearer} if bearer is not None else {})}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )

    def line(self, timeout: float = 120) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"the SDK client stopped: {err[-3000:]}")
        return line.strip()

    def result(self, user: str | None) -> dict[str, Any]:
        try:
            line = self.line()
            if user is not None:
                assert line.startswith("AUTHORIZE "), line
                back = sign_in(line.split(" ", 1)[1], user, "http://127.0.0.1:9/callback")
                assert self.proc.stdin is not None
                self.proc.stdin.write(back + "\n")
                self.proc.stdin.flush()
                line = self.line()
            assert self.proc.wait(60) == 0
            return json.loads(line)  # type: ignore[no-any-return]
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_official_sdk_client_signs_in_through_the_provider_and_calls_tools(served: Served, mode: str) -> None:
    out = Sdk(served, mode).result("bob")
    assert out["registered"] is True  # dynamic registration at the provider
    assert out["token_claims"] == {"aud": served.resource, "sub": "bob"}
    assert "demo__echo" in out["tools"]
    assert (out["text"], out["is_error"]) == ("through the provider", False)
    audit = httpx.get(
        f"{served.url}/api/v1/audit?tool=echo", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    ).json()["items"]
    assert any(r["caller"] and "user:bob@example.com" in r["caller"] for r in audit), audit


def test_a_user_without_a_role_gets_no_tools(served: Served) -> None:
    # erin's groups map to no role: the provider signs her in, the gateway refuses her token
    sdk = Sdk(served, "2026-07-28")
    line = sdk.line()
    assert line.startswith("AUTHORIZE ")
    back = sign_in(line.split(" ", 1)[1], "erin", "http://127.0.0.1:9/callback")
    assert sdk.proc.stdin is not None
    sdk.proc.stdin.write(back + "\n")
    sdk.proc.stdin.flush()
    assert sdk.proc.wait(120) != 0
    token = access_token(served.idp, served.resource, "erin")
    refused = httpx.get(f"{served.url}/api/v1/tools", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert refused.status_code == 401
    log = (served.folder / "serve.log").read_text()
    assert "user:erin@example.com has no role here (claim 'groups' matches none of --oauth-roles)" in log
    assert token not in log


def _login(served: Served, store: Path, user: str) -> subprocess.CompletedProcess[str]:
    """``mcpwire login`` with the test as the browser: it signs in at the provider and follows
    the redirect to the command's loopback listener."""
    argv = [sys.executable, "-m", "mcpwire", "login", served.resource, "--store", str(store), "--no-browser",
            "--timeout", "120"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        # a thread reads the lines: select() on a buffered text file misses lines already read
        lines: queue.Queue[str] = queue.Queue()
        stderr = proc.stderr
        threading.Thread(target=lambda: [lines.put(x) for x in iter(stderr.readline, "")] + [lines.put("")],
                         daemon=True).start()  # fmt: skip
        deadline = time.monotonic() + 120
        seen = ""
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if not line:
                break
            seen += line
            if line.startswith("  http"):
                url = line.strip()
                callback = httpx.URL(url).params["redirect_uri"]
                back = sign_in(url, user, callback)
                try:
                    answered = httpx.get(back, timeout=30)
                except httpx.ConnectError:
                    raise AssertionError(f"{back}: {proc.poll()} {seen}")
                assert answered.status_code == 200  # the listener's "you can close this window"
                assert proc.stdout is not None
                out = proc.stdout.read()
                proc.wait(120)
                while (rest := lines.get(timeout=10)) != "":
                    seen += rest
                return subprocess.CompletedProcess(argv, proc.returncode, out, seen)
        raise AssertionError(f"mcpwire login printed no authorization URL: {seen}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_mcpwire_login_then_its_client_and_the_sdk_call_tools(served: Served, tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    done = await trio.to_thread.run_sync(_login, served, store, "alice")
    assert done.returncode == 0, done.stderr
    assert f"Logged in to mcpwire-gateway; tokens saved in {store}" in done.stderr
    assert store.stat().st_mode & 0o777 == 0o600
    storage = FileTokenStorage(store)
    provider = OAuthProvider(served.resource, storage=storage)
    tokens = await storage.get_tokens(provider.resource)
    assert tokens is not None and claims(tokens.access_token)["aud"] == served.resource
    import mcpwire

    # mcpwire's client with the stored token: no new authorization
    async with (
        httpx.AsyncClient(auth=provider, timeout=30) as http,
        mcpwire.open_client(served.resource, http_client=http) as client,
    ):
        result = await client.call_tool("demo__echo", {"text": "with the stored token"})
    assert [block.text for block in result.content] == ["with the stored token"]  # type: ignore[union-attr]
    assert "authorization_request" not in provider.counters
    # and the official SDK client with the token mcpwire's OAuth client obtained
    out = await trio.to_thread.run_sync(lambda: Sdk(served, "legacy", tokens.access_token).result(None))
    assert (out["text"], out["is_error"], out["registered"]) == ("through the provider", False, False)
