"""A client nobody here wrote: the official MCP Python SDK lists and calls namespaced tools through
the gateway over Streamable HTTP, in the legacy era and in 2026-07-28."""

from __future__ import annotations

import json

import pytest
import trio
from _gateway import FIXTURES, PY_BIN, everything, gateway, reference, require

pytestmark = [pytest.mark.real, pytest.mark.slow]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_python_sdk_lists_and_calls_namespaced_tools(mode: str) -> None:
    python = require(PY_BIN / "python")
    async with gateway({"ref": reference(), "everything": everything()}) as running:
        argv = [python, str(FIXTURES / "sdk_client.py"), running.url, mode, "everything__echo", '{"message": "sdk"}']
        with trio.fail_after(120):
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        out = json.loads(done.stdout.decode().strip().splitlines()[-1])
        assert set(out["tools"]) == {t.name for t in running.host.tools()}
        assert {"ref__test_simple_text", "everything__echo"} <= set(out["tools"])
        assert (out["text"], out["is_error"]) == ("Echo: sdk", False)
