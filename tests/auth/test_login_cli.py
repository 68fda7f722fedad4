"""``mcpwire login`` end to end: the MCP server and its AS are the in-process fakes (through the
CLI's transport seam), the loopback listener is real, and a simulated user reads the terminal,
opens the printed URL and comes back to 127.0.0.1, as on a machine without a browser."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

import httpx
import pytest
import trio
from oauth_fakes import AS_ORIGIN, MCP_URL, OAuthWorld, basic_credentials

from mcpwire.auth import FileTokenStorage
from mcpwire.auth.cli import main

AUTHORIZE = f"{AS_ORIGIN}/authorize?"


class _User(io.StringIO):
    """stderr as the user sees it: the first authorization URL printed is opened, on another
    device as it were (the AS approves at once), and the browser is sent back to the loopback
    listener."""

    def __init__(self, world: OAuthWorld) -> None:
        super().__init__()
        self.world = world
        self.opened: list[str] = []
        self.callback_status: int | None = None
        self.thread: threading.Thread | None = None

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.thread is None:
            urls = [word for word in self.getvalue().split() if word.startswith(AUTHORIZE)]
            if urls:
                self.opened.append(urls[0])
                self.thread = threading.Thread(target=self._visit, args=(urls[0],), daemon=True)
                self.thread.start()
        return written

    def _visit(self, url: str) -> None:
        with httpx.Client(transport=httpx.MockTransport(self.world.handle)) as device:
            location = device.get(url).headers["location"]
        with httpx.Client(trust_env=False, timeout=10) as browser:
            self.callback_status = browser.get(location).status_code

    def finish(self) -> None:
        if self.thread is not None:
            self.thread.join(10)


def _login(world: OAuthWorld, user: _User, monkeypatch: pytest.MonkeyPatch, browsers: list[str], *args: str) -> int:
    def no_browser_here(url: str, *rest: object, **kw: object) -> bool:
        browsers.append(url)
        return False  # a headless machine: nothing opens

    monkeypatch.setattr("webbrowser.open", no_browser_here)
    monkeypatch.setattr("sys.stderr", user)
    try:
        return main([MCP_URL, "--timeout", "20", *args], transport=world.transport())
    finally:
        user.finish()


@pytest.mark.parametrize("no_browser", [False, True], ids=["browser-tried", "no-browser"])
def test_login_prints_the_url_and_stores_the_token_privately(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_browser: bool
) -> None:
    """The issue: the loopback listener "prints the URL to open", with or without a browser
    attempt; the token lands in the file store with mode 0600 (AU-24), the registered client
    next to it, keyed by its issuer (AU-15)."""
    world = OAuthWorld(challenge_scope="mcp:read")
    user = _User(world)
    browsers: list[str] = []
    store = tmp_path / "config" / "tokens.json"
    flags = ["--no-browser"] if no_browser else []
    status = _login(world, user, monkeypatch, browsers, "--store", str(store), *flags)
    terminal = user.getvalue()
    assert status == 0, terminal
    assert user.opened and user.callback_status == 200
    assert user.opened[0] in terminal
    # The URL is the authorization request itself (AU-09, AU-16, loopback redirect AU-21).
    assert world.only("/authorize")[0].url == user.opened[0]
    query = world.only("/authorize")[0].query
    assert query["redirect_uri"].startswith("http://127.0.0.1:") and query["resource"] == MCP_URL
    assert browsers == ([] if no_browser else user.opened)
    assert terminal.endswith(f"Logged in to oauth-fake; tokens saved in {store}\n")
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o600
    stored = trio.run(FileTokenStorage(store).get_tokens, MCP_URL)
    assert stored is not None and stored.access_token in world.tokens
    assert (stored.issuer, stored.scope) == (AS_ORIGIN, "mcp:read")
    client = trio.run(FileTokenStorage(store).get_client, AS_ORIGIN)
    assert client is not None and client.client_id == "client-1"
    # Nothing secret reached the terminal.
    assert not [secret for secret in world.secrets() if secret in terminal]


def test_login_with_pre_registered_credentials_bound_to_an_issuer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AU-12, AU-15: ``--client-id`` with ``--issuer``; the secret comes from the environment."""
    world = OAuthWorld(registration=False, auth_methods=["client_secret_basic"])
    monkeypatch.setenv("MCPWIRE_TEST_SECRET", "pre-secret")
    user = _User(world)
    store = tmp_path / "tokens.json"
    args = ["--store", str(store), "--client-id", "pre", "--client-secret-env", "MCPWIRE_TEST_SECRET"]
    status = _login(world, user, monkeypatch, [], *args, "--issuer", AS_ORIGIN, "--no-browser")
    assert status == 0, user.getvalue()
    assert world.only("/authorize")[0].query["client_id"] == "pre"
    assert basic_credentials(world.only("/token")[0]) == ("pre", "pre-secret")
    assert "pre-secret" not in user.getvalue()


def test_login_refuses_pre_registered_credentials_for_another_issuer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AU-15: the server's AS is not the one the credentials belong to: nothing is sent to it."""
    world = OAuthWorld(registration=False, auth_methods=["client_secret_basic"])
    monkeypatch.setenv("MCPWIRE_TEST_SECRET", "pre-secret")
    user = _User(world)
    store = tmp_path / "tokens.json"
    args = ["--store", str(store), "--client-id", "pre", "--client-secret-env", "MCPWIRE_TEST_SECRET"]
    status = _login(world, user, monkeypatch, [], *args, "--issuer", "https://other-as.example", "--no-browser")
    assert status == 1
    assert user.getvalue() == (
        f"mcpwire login: cannot authorize to '{MCP_URL}': the configured client credentials belong to "
        "'https://other-as.example', but the server's authorization server is 'http://as.test'; configure "
        "credentials for that authorization server\n"
    )
    assert not world.only("/authorize") and not world.only("/token")
    assert trio.run(FileTokenStorage(store).get_tokens, MCP_URL) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--client-id", "pre"], "mcpwire login: --client-id needs --issuer, the authorization server it was"),
        (["--issuer", AS_ORIGIN], "mcpwire login: --issuer binds a pre-registered --client-id; give both or neither"),
    ],
    ids=["client-id-alone", "issuer-alone"],
)
def test_login_client_id_and_issuer_go_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status = main([MCP_URL, "--store", str(tmp_path / "tokens.json"), *args])
    assert status == 2
    assert capsys.readouterr().err.startswith(message)
    assert not (tmp_path / "tokens.json").exists()
