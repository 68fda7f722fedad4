"""A reference server that answers ping with an error whose message would drive a terminal: escape
sequences, a bell, a carriage return, and the bidi marks U+200F and U+061C."""

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

from _base import serve

TEXT = "pwned\x1b]0;title\x07\x1b[2J\r\u200fRLM\u061cALM"


def on_input(message: Any, write: Any) -> bool:
    if isinstance(message, dict) and message.get("method") == "ping" and "id" in message:
        write({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": TEXT}})
        return True
    return False


serve(on_input=on_input)
