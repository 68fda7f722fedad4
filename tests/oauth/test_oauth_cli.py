"""``mcpwire serve``'s OAuth flags: every bad value is one line at start, naming the flag, and
exit status 2; the secret file's content is never repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwire.service.cli import main

ISSUER = ["--oauth-issuer", "https://login.example.com"]
ROLES = ["--oauth-roles", "mcp-users=caller"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--oauth-issuer", "http://login.example.com", *ROLES],
         "--oauth-issuer 'http://login.example.com': must be https (plain http only on a loopback address)"),
        (["--oauth-issuer", "login.example.com", *ROLES],
         "--oauth-issuer 'login.example.com': expected an http(s) URL"),
        (["--oauth-issuer", "https://login.example.com?tenant=1", *ROLES],
         "--oauth-issuer 'https://login.example.com?tenant=1': an issuer has no query"),
        (ISSUER, "--oauth-issuer needs --oauth-roles (claim values to roles) or --oauth-default-role: otherwise no "
                 "token of the provider can do anything"),
        ([*ISSUER, "--oauth-roles", "mcp-users=boss"],
         "--oauth-roles: unknown role 'boss': expected one of viewer, caller, approver, admin"),
        ([*ISSUER, "--oauth-roles", "mcp-users"], "--oauth-roles: 'mcp-users' is not VALUE=ROLE"),
        ([*ISSUER, "--oauth-default-role", "root"],
         "--oauth-default-role: unknown role 'root': expected one of viewer, caller, approver, admin"),
        ([*ISSUER, *ROLES, "--oauth-scope", 'a"b'],
         "--oauth-scope 'a\"b': a scope is printable ASCII without spaces or quotes"),
        ([*ISSUER, *ROLES, "--oauth-scope", "offline_access"],
         "--oauth-scope offline_access: refresh tokens are the client's choice, not a scope of the gateway"),
        ([*ISSUER, *ROLES, "--oauth-role-claim", "my groups"], "--oauth-role-claim 'my groups': expected a claim name"),
        ([*ISSUER, *ROLES, "--oauth-resource", "http://mcp.example.com/mcp"],
         "--oauth-resource 'http://mcp.example.com/mcp': must be https (plain http only on a loopback address)"),
        ([*ISSUER, *ROLES, "--oauth-resource", "https://mcp.example.com/mcp#x"],
         "--oauth-resource 'https://mcp.example.com/mcp#x': must have no fragment and no user name or password"),
        ([*ISSUER, *ROLES, "--port", "0"],
         "--oauth-resource is needed when listening on 127.0.0.1:0: the gateway's URL as clients reach it (e.g. "
         "https://mcp.example.com/mcp) is the audience its tokens must name"),
        ([*ISSUER, *ROLES, "--no-auth"], "--oauth-issuer needs authentication: it cannot be combined with --no-auth"),
        (["--oauth-roles", "mcp-users=caller"], "--oauth-roles needs --oauth-issuer"),
        (["--oidc-client-id", "console"], "--oidc-client-id needs --oauth-issuer"),
        ([*ISSUER, *ROLES, "--oidc-client-secret-file", "/nonexistent/secret"],
         "--oidc-client-secret-file /nonexistent/secret: cannot read it (FileNotFoundError)"),
    ],
)  # fmt: skip
def test_a_bad_value_is_one_line_at_start(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err == f"mcpwire serve: {message}\n"


def test_the_client_secret_is_never_repeated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the-console-secret-0123456789\n")
    assert main([*ISSUER, *ROLES, "--oidc-client-secret-file", str(secret)]) == 2
    err = capsys.readouterr().err
    assert err == "mcpwire serve: --oidc-client-secret-file needs --oidc-client-id\n"
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert main([*ISSUER, *ROLES, "--oidc-client-id", "c", "--oidc-client-secret-file", str(empty)]) == 2
    assert capsys.readouterr().err == f"mcpwire serve: --oidc-client-secret-file {empty}: the first line is empty\n"
