"""A reference server that answers ping with a result nested 200,000 levels deep (SV-12 fails, and
its evidence carries that answer into every report)."""

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

from _base import serve

DEPTH = 200_000


def on_input(message: Any, write: Any) -> bool:
    if isinstance(message, dict) and message.get("method") == "ping" and "id" in message:
        nested = "[" * DEPTH + "]" * DEPTH
        line = '{"jsonrpc":"2.0","id":' + str(message["id"]) + ',"result":{"deep":' + nested + "}}"
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return True
    return False


serve(on_input=on_input)
