"""A reference server that sends a log notification nobody asked for after every response: no
process of it may serve a second check."""

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

from _base import serve

NOTE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "unasked"}}


def on_output(message: Any) -> Any:
    if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
        lines = json.dumps(message) + "\n" + json.dumps(NOTE) + "\n"
        sys.stdout.buffer.write(lines.encode())
        sys.stdout.buffer.flush()
        return None
    return message


serve(on_output=on_output)
