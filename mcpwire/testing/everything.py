"""The reference server for ``mcpwire check``: stdio, both eras, every feature, stdlib only.

    python -m mcpwire.testing.everything [--page-size N] [-v]

Theory of operation: the protocol engine is :class:`mcpwire.testing.demo_server.DemoServer`
(both eras, tools, resources, templates, prompts, completion, logging, pagination,
subscriptions, MRTR); :class:`EverythingServer` adds the fixture names of the official
conformance runner (``test_simple_text``, ``test://static-text``, ``test_simple_prompt``) so that
results can be cross-checked. It is the default target of ``mcpwire check`` and must pass every
check in every revision.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

from mcpwire.testing.demo_server import (
    DemoServer,
    Message,
    encode_message,
)

__all__ = ["SIMPLE_PROMPT", "SIMPLE_TEXT", "STATIC_TEXT_URI", "EverythingServer", "main"]

_Obj = dict[str, Any]
_log = logging.getLogger(__name__)

SIMPLE_TEXT: Final = "This is a simple text response for testing."
STATIC_TEXT_URI: Final = "test://static-text"
STATIC_TEXT: Final = "This is the content of the static text resource."
SIMPLE_PROMPT: Final = "This is a simple prompt for testing."

_FIXTURE_TOOL: Final[_Obj] = {
    "name": "test_simple_text",
    "description": "Return a fixed text block.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
_FIXTURE_RESOURCE: Final[_Obj] = {
    "uri": STATIC_TEXT_URI,
    "name": "static-text",
    "description": "A fixed text resource.",
    "mimeType": "text/plain",
}
_FIXTURE_PROMPT: Final[_Obj] = {"name": "test_simple_prompt", "description": "A fixed prompt without arguments."}
_EXTRA: Final[dict[str, _Obj]] = {"tools": _FIXTURE_TOOL, "resources": _FIXTURE_RESOURCE, "prompts": _FIXTURE_PROMPT}


class EverythingServer(DemoServer):
    """The demo server plus the official runner's fixture tool, resource and prompt."""

    def _paginated(self, call: Any, kind: str, items: Sequence[_Obj]) -> _Obj:
        extra = _EXTRA.get(kind)
        return super()._paginated(call, kind, [*items, extra] if extra is not None else items)

    def _fixture(self, call: Any) -> _Obj | None:
        params: _Obj = call.params
        if call.method == "tools/call" and params.get("name") == "test_simple_text":
            return {"content": [{"type": "text", "text": SIMPLE_TEXT}]}
        if call.method == "resources/read" and params.get("uri") == STATIC_TEXT_URI:
            result: _Obj = {"contents": [{"uri": STATIC_TEXT_URI, "mimeType": "text/plain", "text": STATIC_TEXT}]}
            if call.era == "modern":
                result.update(ttlMs=0, cacheScope="public")
            return result
        if call.method == "prompts/get" and params.get("name") == "test_simple_prompt":
            return {"messages": [{"role": "user", "content": {"type": "text", "text": SIMPLE_PROMPT}}]}
        return None

    def _execute(self, call: Any) -> None:
        result = self._fixture(call)
        if result is None:
            super()._execute(call)
            return
        with self._lock:
            self._inflight.pop(call.id, None)
        call.finish({"jsonrpc": "2.0", "id": call.id, "result": self._decorate(call, result)})


def main(argv: Sequence[str] | None = None) -> int:
    """Serve on stdin/stdout until end of input; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m mcpwire.testing.everything", description="The mcpwire reference MCP server (stdio)."
    )
    parser.add_argument("--page-size", type=int, default=0, metavar="N", help="items per list page (0 = one page)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    options = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if options.verbose else logging.WARNING,
        format="everything server %(levelname)s: %(message)s",
    )
    stdout = sys.stdout.buffer

    def write(message: Message) -> None:
        try:
            stdout.write(encode_message(message) + b"\n")
            stdout.flush()
        except (OSError, ValueError):
            _log.warning("stdout is closed; exiting")
            os._exit(0)

    server = EverythingServer(write, page_size=max(0, options.page_size), name="mcpwire-everything")
    try:
        # 2026-07-28 basic/transports/stdio: "Servers SHOULD exit promptly when their standard
        # input is closed or reads return end-of-file."
        for line in iter(sys.stdin.buffer.readline, b""):
            server.handle_line(line)
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    os._exit(main())
