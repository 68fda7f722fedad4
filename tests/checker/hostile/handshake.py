"""A reference server whose answer to ``initialize`` for one revision breaks the handshake.

    python handshake.py MODE REVISION

MODE: ``no-version`` (the result has no protocolVersion), ``bad-version`` (it names 1999-01-01),
``id-type`` (the answer's id is a string for a numeric request id), ``array`` (the answer comes in a
JSON array although the request came alone). Every other revision is served correctly.
"""

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

from _base import serve

MODE, REVISION = sys.argv[1], sys.argv[2]
broken_ids: set[Any] = set()


def on_input(message: Any, write: Any) -> bool:
    if not isinstance(message, dict):
        return False
    if message.get("method") == "initialize" and (message.get("params") or {}).get("protocolVersion") == REVISION:
        broken_ids.add(message.get("id"))
    return False


def on_output(message: Any) -> Any:
    if not isinstance(message, dict) or message.get("id") not in broken_ids or "result" not in message:
        return message
    if MODE == "no-version":
        message["result"].pop("protocolVersion", None)
    elif MODE == "bad-version":
        message["result"]["protocolVersion"] = "1999-01-01"
    elif MODE == "id-type":
        message["id"] = str(message["id"])
    elif MODE == "array":
        return [message]
    return message


serve(on_input=on_input, on_output=on_output)
