"""The HTTP floor of the gateway benchmark: a bare starlette endpoint under hypercorn's trio worker.

It answers just enough MCP for a legacy client at ``/mcp``: ``initialize`` (with an
``Mcp-Session-Id``), notifications (202), ``tools/list`` (one tool, ``echo``) and ``tools/call``
(``Echo: <message>``, as server-everything's ``echo`` says it), every answer one JSON body. No
session state, no validation, no backend: what serving an MCP call over HTTP on this stack costs
at the least, which the gateway's added latency is measured against.

    python bench/gateway_floor.py [--port N]      # prints its endpoint URL on the first line
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import msgspec
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
_TOOLS = {
    "tools": [
        {
            "name": "echo",
            "description": "Echoes back the input",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        }
    ]
}


def _answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "tools/call":
        message = (params.get("arguments") or {}).get("message", "")
        return {"result": {"content": [{"type": "text", "text": f"Echo: {message}"}]}}
    if method == "tools/list":
        return {"result": _TOOLS}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "floor", "version": "0"},
            }
        }
    if method == "ping":
        return {"result": {}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


async def mcp(request: Request) -> Response:
    if request.method != "POST":
        return Response(status_code=405)
    message = _decode(await request.body())
    if "id" not in message:
        return Response(status_code=202)
    method = message.get("method", "")
    body = {"jsonrpc": "2.0", "id": message["id"], **_answer(method, message.get("params") or {})}
    headers = {"Mcp-Session-Id": uuid.uuid4().hex} if method == "initialize" else None
    return Response(_encode(body), media_type="application/json", headers=headers)


app = Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST", "DELETE"])])


async def main(port: int) -> None:
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        print(f"{binds[0]}/mcp", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    try:
        trio.run(main, parser.parse_args().port)
    except KeyboardInterrupt:
        sys.exit(0)
