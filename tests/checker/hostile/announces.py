"""A reference server that sends ``notifications/tools/list_changed`` before its answer to
``initialize``, as server-everything does; with ``--unadvertised`` its answer drops
``tools.listChanged``, so the notification breaks SV-11 (in every session, reused or not)."""

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

from _base import serve

NOTE = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
UNADVERTISED = "--unadvertised" in sys.argv


def on_output(message: Any) -> Any:
    result = message.get("result") if isinstance(message, dict) else None
    if isinstance(result, dict) and "protocolVersion" in result and "serverInfo" in result:
        if UNADVERTISED:
            result["capabilities"]["tools"] = {}
        sys.stdout.buffer.write((json.dumps(NOTE) + "\n").encode())
        sys.stdout.buffer.flush()
    return message


serve(on_output=on_output)
