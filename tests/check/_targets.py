"""Targets for the checker tests: the reference server and the broken fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

from conformance.context import Target

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_target(name: str, *, eof_grace: float = 2.0) -> Target:
    """A broken fixture server, run with this interpreter."""
    return Target((sys.executable, "-u", str(FIXTURES / f"{name}.py")), name=name, eof_grace=eof_grace)


def fixture_argv(name: str) -> list[str]:
    return [sys.executable, "-u", str(FIXTURES / f"{name}.py")]
