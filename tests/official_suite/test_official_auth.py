"""The official MCP conformance runner grades mcpwire's OAuth client, one auth scenario at a time.

Every ``auth/*`` client scenario of runner 0.1.16 and 0.2.0-alpha.12 runs against
``official_auth_client.py`` (``mcpwire.auth`` providers behind ``open_client``). A scenario
passes when the runner reports no FAILURE and no WARNING, at least one graded check succeeded,
and the runner's own verdict is a pass. Anti-vacuity: the client's trace must show the steps the
scenario is about (the token request really happened, with the right grant; a refusal happened
before any token request), so a client that gives up early cannot pass a "reject" scenario
without having reached the step it rejects.

The runner and Node >= 22 are installed by ``install_runner.sh`` into ``.cache/conformance``;
the runner's servers listen on 127.0.0.1 only (``loopback.cjs``).

Expected failure: 0.1.16 ``auth/2025-03-26-oauth-metadata-backcompat``. That runner's mock
serves AS metadata whose ``issuer`` differs from the URL it was fetched for, and mcpwire refuses
such metadata (AU-08; 0.2.x fixed the mock).

``auth/client-credentials-jwt`` and the DPoP scenarios need the optional ``cryptography``
package; they are skipped without it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("MCPWIRE_CONFORMANCE_DIR", REPO / ".cache" / "conformance"))
NODE = CACHE / "node22" / "node_modules" / "node" / "bin" / "node"

pytestmark = pytest.mark.real

CODE_FLOW = ["counter prm 1", "counter authorization_request 1", "counter token:authorization_code 1", "closed"]
DCR_FLOW = [*CODE_FLOW, "counter registration 1"]
#: A refusal after the redirect: the authorization request was made, no token was requested.
REFUSED_AFTER_REDIRECT = ["counter authorization_request 1", "refused"]

#: scenario -> substrings the client's trace must contain (any order).
EXPECTED: dict[str, list[str]] = {
    "auth/metadata-default": DCR_FLOW,
    "auth/metadata-var1": DCR_FLOW,
    "auth/metadata-var2": DCR_FLOW,
    "auth/metadata-var3": DCR_FLOW,
    "auth/basic-cimd": CODE_FLOW,
    "auth/scope-from-www-authenticate": DCR_FLOW,
    "auth/scope-from-scopes-supported": DCR_FLOW,
    "auth/scope-omitted-when-undefined": DCR_FLOW,
    "auth/scope-step-up": ["counter authorization_request 2", "counter token:authorization_code 2", "closed"],
    "auth/scope-retry-limit": ["counter authorization_request 3", "counter token:authorization_code 3", "failed"],
    "auth/token-endpoint-auth-basic": DCR_FLOW,
    "auth/token-endpoint-auth-post": DCR_FLOW,
    "auth/token-endpoint-auth-none": DCR_FLOW,
    "auth/pre-registration": CODE_FLOW,
    "auth/2025-03-26-oauth-metadata-backcompat": ["counter as_metadata 1", "counter token:authorization_code 1"],
    "auth/2025-03-26-oauth-endpoint-fallback": ["counter registration 1", "counter token:authorization_code 1"],
    "auth/resource-mismatch": ["refused"],
    "auth/offline-access-scope": CODE_FLOW,
    "auth/offline-access-not-supported": DCR_FLOW,
    "auth/authorization-server-migration": ["counter registration 2", "counter token:authorization_code 2", "closed"],
    "auth/iss-supported": DCR_FLOW,
    "auth/iss-not-advertised": DCR_FLOW,
    "auth/iss-supported-missing": REFUSED_AFTER_REDIRECT,
    "auth/iss-wrong-issuer": REFUSED_AFTER_REDIRECT,
    "auth/iss-unexpected": REFUSED_AFTER_REDIRECT,
    "auth/iss-normalized": REFUSED_AFTER_REDIRECT,
    "auth/metadata-issuer-mismatch": ["counter prm 1", "refused"],
    "auth/client-credentials-basic": ["counter token:client_credentials 1", "closed"],
    "auth/client-credentials-jwt": ["counter token:client_credentials 1", "closed"],
    "auth/cross-app-access-complete-flow": ["counter token:token-exchange 1", "counter token:jwt-bearer 1", "closed"],
    "auth/enterprise-managed-authorization": [
        "counter token:token-exchange 1",
        "counter token:jwt-bearer 1",
        "closed",
    ],
    "auth/wif-jwt-bearer": ["counter token:jwt-bearer 1", "closed"],
    "auth/dpop": ["counter token_type:DPoP 1", "closed"],
    "auth/dpop-nonce": [
        "counter token_type:DPoP 1",
        "counter dpop_nonce:token 1",
        "counter dpop_nonce:resource 1",
        "closed",
    ],
}

#: Scenarios where no token may be requested at all.
NO_TOKEN = {
    "auth/resource-mismatch",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
}

COMMON = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
]
ONLY_016 = ["auth/cross-app-access-complete-flow"]
ONLY_A12 = [
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
]

NEEDS_CRYPTOGRAPHY = {"auth/client-credentials-jwt", "auth/dpop", "auth/dpop-nonce"}

XFAIL: dict[tuple[str, str], str] = {
    ("0.1.16", "auth/2025-03-26-oauth-metadata-backcompat"): "the 0.1.16 mock serves a wrong issuer (AU-08)",
}


def _cases() -> list[object]:
    cases: list[object] = []
    for version, names in (("0.1.16", COMMON + ONLY_016), ("0.2.0-alpha.12", COMMON + ONLY_A12)):
        for name in names:
            reason = XFAIL.get((version, name))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            if name in NEEDS_CRYPTOGRAPHY and importlib.util.find_spec("cryptography") is None:
                marks.append(pytest.mark.skip(reason="needs the optional 'cryptography' package"))
            cases.append(pytest.param(version, name, marks=marks, id=f"{version}-{name}"))
    return cases


@pytest.fixture(scope="session")
def runner_installed() -> Path:
    try:
        subprocess.run(["bash", str(HERE / "install_runner.sh")], check=True, timeout=600, capture_output=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        message = f"cannot install the conformance runner: {exc} {detail.decode(errors='replace')[-500:]}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CACHE


def _checks(out: Path) -> list[dict[str, object]]:
    checks: list[dict[str, object]] = []
    for path in out.rglob("checks.json"):
        checks.extend(json.loads(path.read_text()))
    return checks


def test_every_listed_scenario_is_covered(runner_installed: Path) -> None:
    """The parametrization covers exactly the auth scenarios each runner lists."""
    for version, names in (("0.1.16", COMMON + ONLY_016), ("0.2.0-alpha.12", COMMON + ONLY_A12)):
        entry = _entry(runner_installed, version)
        proc = subprocess.run(
            [str(NODE), str(entry), "list", "--client"], capture_output=True, text=True, timeout=60, check=True
        )
        listed = {line.split()[1] for line in proc.stdout.splitlines() if line.strip().startswith("- auth/")}
        assert listed == set(names), version


def _entry(cache: Path, version: str) -> Path:
    package = cache / f"runner-{version}" / "node_modules" / "@modelcontextprotocol" / "conformance"
    return package / "dist" / "index.js"


@pytest.mark.parametrize(("version", "scenario"), _cases())
def test_auth_scenario(runner_installed: Path, tmp_path: Path, version: str, scenario: str) -> None:
    trace = tmp_path / "trace.txt"
    out = tmp_path / "out"
    client = f"{sys.executable} {HERE / 'official_auth_client.py'}"
    argv = [str(NODE), "--require", str(HERE / "loopback.cjs"), str(_entry(runner_installed, version)), "client"]
    argv += ["--command", client, "--scenario", scenario, "--timeout", "30000", "-o", str(out)]
    env = {**os.environ, "MCPWIRE_CONFORMANCE_TRACE": str(trace), "PATH": f"{NODE.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90)
    log = proc.stdout + proc.stderr
    checks = _checks(out)
    bad = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')} {c.get('description', '')}"
        for c in checks
        if c["status"] in ("FAILURE", "WARNING")
    ]
    assert not bad, "\n".join(bad) + "\n" + log[-3000:]
    assert "TIMED OUT" not in log, log[-3000:]
    assert proc.returncode == 0, log[-3000:]
    assert any(c["status"] == "SUCCESS" for c in checks), f"no graded check succeeded:\n{log[-2000:]}"
    done = trace.read_text().splitlines() if trace.exists() else []
    missing = [want for want in EXPECTED[scenario] if not any(want in line for line in done)]
    assert not missing, f"the client's trace lacks {missing}: {done}"
    if scenario in NO_TOKEN:
        assert not any(line.startswith("counter token:") for line in done), done
