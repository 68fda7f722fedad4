"""``mcpwire serve --stdio`` answers a desktop client at once, whatever its backends are doing,
and says ``tools/list_changed`` as they arrive. A raw client on the process's pipes, timed."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _harness import demo_entry, write_config
from _process import clean_env

pytestmark = pytest.mark.slow

#: seconds the slow backend takes before it starts
SLOW_S = 8.0
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "desktop", "version": "1"},
}


class Pipe:
    """``mcpwire serve --stdio`` and JSON-RPC lines on its stdin and stdout."""

    def __init__(self, tmp_path: Path, config: Path) -> None:
        argv = [sys.executable, "-m", "mcpwire", "serve", "--stdio", "--config", str(config),
                "--db", f"sqlite:///{tmp_path / 's.db'}"]  # fmt: skip
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=clean_env(tmp_path)
        )
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"nothing from the gateway within {timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError("the gateway closed its stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        result: dict[str, Any] = json.loads(line)
        return result

    def answer(self, request_id: int, timeout: float, seen: list[str] | None = None) -> dict[str, Any]:
        while True:
            message = self.read(timeout)
            if message.get("id") == request_id and "method" not in message:
                return message
            if seen is not None and "method" in message:
                seen.append(message["method"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _first_answer(tmp_path: Path, config: Path, first: dict[str, Any]) -> tuple[float, Pipe]:
    pipe = Pipe(tmp_path, config)
    pipe.send(first)
    answer = pipe.answer(1, timeout=60)
    assert "result" in answer, answer
    return time.monotonic() - pipe.started, pipe


def _initialize() -> dict[str, Any]:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "desktop", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def _discover() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}}


@pytest.mark.parametrize("first", [_initialize, _discover], ids=["initialize", "server/discover"])
def test_the_gateway_answers_at_once_and_says_when_backends_arrive(tmp_path: Path, first: Any) -> None:
    slow = {
        "command": sys.executable,
        "args": [str(Path(__file__).with_name("fixtures") / "slow_start.py"), str(SLOW_S)],
    }
    crashing = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    alone = write_config(tmp_path / "alone.json", {})
    busy = write_config(tmp_path / "busy.json", {"demo": demo_entry(), "slow": slow, "crashing": crashing})
    # what the process itself takes to answer (start-up, imports, the store), measured here
    baseline, pipe = _first_answer(tmp_path / "a", alone, first())
    pipe.close()
    took, pipe = _first_answer(tmp_path / "b", busy, first())
    try:
        assert took - baseline < 1.0, (took, baseline)
        assert took < SLOW_S
        if first is _initialize:
            pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            listing: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        else:
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}}
            # 2026-07-28: list changes come to a client that listens for them
            wanted = {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}
            pipe.send({"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen", "params": wanted})
        seen: list[str] = []
        pipe.send(listing)
        tools = pipe.answer(2, timeout=30, seen=seen)["result"]["tools"]
        # the slow backend arrives later; the client is told, and then lists its tools
        n = 3
        deadline = time.monotonic() + SLOW_S + 60
        while not any(t["name"].startswith("slow__") for t in tools):
            assert time.monotonic() < deadline, f"the slow backend's tools never came: {sorted(seen)}"
            while "notifications/tools/list_changed" not in seen:
                message = pipe.read(timeout=max(1.0, deadline - time.monotonic()))
                if "method" in message:
                    seen.append(message["method"])
            seen.clear()
            pipe.send({**listing, "id": n})
            tools = pipe.answer(n, timeout=30, seen=seen)["result"]["tools"]
            n += 1
        names = {t["name"] for t in tools}
        assert {"demo__echo", "slow__echo"} <= names
        assert not any(name.startswith("crashing__") for name in names)
    finally:
        pipe.close()
