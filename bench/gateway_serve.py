"""The gateway alone, for the gateway benchmark: a host of one stdio backend behind
:class:`~mcpwire.service.gateway.Gateway`'s endpoint under :func:`~mcpwire.server.http.serve_http`
(the built-in trio + h11 server, as ``mcpwire serve`` runs it; the floor keeps hypercorn).

The host runs with its default policies (timeout, retry, breaker, approval of a read-only tool:
allowed) but no result cache, so that every call reaches the backend as it does through the
other proxies. The process's garbage collector is tuned as ``mcpwire serve`` tunes its own
once started (:func:`~mcpwire.service.runner.settle_memory`). No store, audit sink or service
middleware: ``mcpwire serve`` adds those (the benchmark measures it too, as ``serve``).

    python bench/gateway_serve.py [--port N] [--namespacing on|off] -- COMMAND [ARGS...]

It prints its endpoint URL on the first line once the backend is connected.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import trio

from mcpwire.host import Host
from mcpwire.host.config import HostConfig, parse_server
from mcpwire.server.http import serve_http
from mcpwire.service.gateway import Gateway
from mcpwire.service.runner import keep_memory_settled


async def main(command: list[str], port: int, namespacing: bool) -> None:
    entry = {"command": command[0], "args": command[1:], "policy": {"cache_ttl_seconds": 0}}
    config = HostConfig(servers=(parse_server("everything", entry),))
    async with Host(config, start_timeout=60.0) as host, trio.open_nursery() as nursery:
        gateway = Gateway(host, namespacing=namespacing)
        await nursery.start(gateway.run)
        binds = await nursery.start(partial(serve_http, gateway.asgi_app(), port=port))
        print(f"{binds[0]}/mcp", flush=True)
        nursery.start_soon(keep_memory_settled, trio.Event())  # until the process is stopped


if __name__ == "__main__":
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--namespacing", choices=["on", "off"], default="on")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if not command:
        parser.error("the backend's command goes after --")
    try:
        trio.run(main, command, args.port, args.namespacing == "on")
    except KeyboardInterrupt:
        sys.exit(0)
