from __future__ import annotations

from pathlib import Path

import pytest
from _faulty import Record


@pytest.fixture
def record(tmp_path: Path) -> Record:
    """The faulty server's ``--record`` file: pass ``*record.flags`` to the server."""
    return Record(tmp_path / "received.jsonl")
