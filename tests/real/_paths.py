"""Where tests/real/install_servers.sh puts the third-party servers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"


def require(path: Path) -> str:
    """The path as a string; skips the test when missing (fails it under CI)."""
    if not path.exists():
        message = f"{path} is missing: run tests/real/install_servers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)
