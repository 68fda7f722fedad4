"""The official MCP conformance runner grades mcpwire's client, one scenario at a time.

Every non-auth client scenario of runner 0.1.16 and 0.2.0-alpha.12 runs against
``official_client.py``. A scenario passes when the runner reports no FAILURE and no WARNING, at
least one graded check succeeded, the client exited 0, and the client's own trace shows it made
the requests the scenario is about (a client that exits 0 doing nothing passes ``initialize``
otherwise). The runner and a Node >= 22 are installed by ``install_runner.sh`` into
``.cache/conformance``; the runner's servers listen on 127.0.0.1 only (``loopback.cjs``).

Left out: the ``auth/*`` scenarios (OAuth is its own feature), and 0.2.0-alpha.12's
``sep-2640-*`` scenarios, which test the optional Skills extension (``skills/list``), which
mcpwire does not implement.
"""

from __future__ import annotations

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

#: scenario -> what the client's trace must show (substrings, in order).
EXPECTED: dict[str, list[str]] = {
    "initialize": ["connected legacy", "closed"],
    "tools_call": ["connected", "list_tools", "call_tool add_numbers", "closed"],
    "elicitation-sep1034-client-defaults": ["connected legacy", "call_tool test_client_elicitation_defaults", "closed"],
    "sse-retry": ["connected legacy", "call_tool test_reconnection", "closed"],
    "request-metadata": ["connected modern 2026-07-28", "closed"],
    "sep-2322-client-request-state": ["connected modern", "call_tool", "closed"],
    "http-standard-headers": ["connected modern", "call_tool", "closed"],
    "http-custom-headers": ["connected modern", "call_tool test_custom_headers", "closed"],
    "http-invalid-tool-headers": ["connected modern", "call_tool valid_tool", "closed"],
    "json-schema-ref-no-deref": ["connected modern", "list_tools", "closed"],
    "json-schema-2020-12-preservation": ["connected", "call_tool json_schema_echo", "closed"],
}

CASES = (
    [("0.1.16", s, None) for s in ("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry")]
    + [
        ("0.2.0-alpha.12", s, None)
        for s in (
            "initialize",
            "tools_call",
            "elicitation-sep1034-client-defaults",
            "sse-retry",
            "request-metadata",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
            "json-schema-2020-12-preservation",
        )
    ]
    + [("0.2.0-alpha.12", s, "2026-07-28") for s in ("tools_call", "json-schema-2020-12-preservation")]
)


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


@pytest.mark.parametrize(
    ("version", "scenario", "spec_version"),
    CASES,
    ids=[f"{v}-{s}" + (f"-{sv}" if sv else "") for v, s, sv in CASES],
)
def test_scenario(
    runner_installed: Path, tmp_path: Path, version: str, scenario: str, spec_version: str | None
) -> None:
    package = runner_installed / f"runner-{version}" / "node_modules" / "@modelcontextprotocol" / "conformance"
    entry = package / "dist" / "index.js"
    trace = tmp_path / "trace.txt"
    out = tmp_path / "out"
    client = f"{sys.executable} {HERE / 'official_client.py'}"
    argv = [str(NODE), "--require", str(HERE / "loopback.cjs"), str(entry), "client", "--command", client]
    argv += ["--scenario", scenario, "--timeout", "30000", "-o", str(out)]
    if spec_version:
        argv += ["--spec-version", spec_version]
    env = {**os.environ, "MCPWIRE_CONFORMANCE_TRACE": str(trace), "PATH": f"{NODE.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90)
    log = proc.stdout + proc.stderr
    checks = _checks(out)
    bad = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks if c["status"] in ("FAILURE", "WARNING")
    ]
    assert not bad, "\n".join(bad) + "\n" + log[-3000:]
    assert "CLIENT EXITED WITH ERROR" not in log and "TIMED OUT" not in log, log[-3000:]
    assert proc.returncode == 0, log[-3000:]
    assert any(c["status"] == "SUCCESS" for c in checks), f"no graded check succeeded:\n{log[-2000:]}"
    done = trace.read_text().splitlines() if trace.exists() else []
    if spec_version is not None:  # the scenario ran in that revision's era, not the default one
        assert any(line.startswith(f"connected modern {spec_version}") for line in done), done
    position = 0
    for expected in EXPECTED[scenario]:
        while position < len(done) and expected not in done[position]:
            position += 1
        assert position < len(done), f"the client's trace lacks {expected!r} (in order): {done}"
        position += 1
