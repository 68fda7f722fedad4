"""The environment and working directory a stdio server is started with.

The fixture's ``environment`` tool answers with its ``os.environ`` and ``os.getcwd()``, so each
test compares the whole environment the process really got with what the spec promises: the safe
inherited base (``DEFAULT_INHERITED_ENV``) plus the configured variables, or everything with
``inherit_env=True``; and ``cwd``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from _demo import QUIET_ENV, demo_spec

import mcpwire
from mcpwire import StdioServer
from mcpwire.transports import DEFAULT_INHERITED_ENV

SECRET = "MCPWIRE_TEST_SECRET_TOKEN"


@pytest.fixture(autouse=True)
def parent_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret and a base variable in the parent's environment, so both cases are exercised."""
    monkeypatch.setenv(SECRET, "s3cret")
    monkeypatch.setenv("TZ", "Europe/Paris")


def safe_base() -> dict[str, str]:
    return {key: os.environ[key] for key in DEFAULT_INHERITED_ENV if key in os.environ}


def make_dir(path: Path) -> Path:
    path.mkdir()
    return path.resolve()


async def report(spec: StdioServer) -> dict[str, Any]:
    with trio.fail_after(10):
        async with mcpwire.open_client(spec, era="legacy", era_cache=False) as client:
            answer: dict[str, Any] = json.loads((await client.call_tool("environment", {})).text())
    return answer


async def test_by_default_the_server_gets_the_safe_base_only() -> None:
    """ST-15 (credentials come from the environment: only those configured): the process sees
    exactly the safe base of the parent's environment, not its secret, in the parent's directory."""
    answer = await report(demo_spec(None))
    assert answer["env"] == {**safe_base(), **QUIET_ENV}
    assert "TZ" in answer["env"] and "HOME" in answer["env"] and "PATH" in answer["env"]
    assert SECRET not in answer["env"]
    assert answer["cwd"] == os.getcwd()


async def test_configured_variables_are_added_and_win() -> None:
    """``env`` adds variables (here a token the parent does not have) and overrides base ones."""
    answer = await report(demo_spec(None, env={"SERVER_TOKEN": "tok-1", "TZ": "UTC"}))
    assert answer["env"] == {**safe_base(), **QUIET_ENV, "SERVER_TOKEN": "tok-1", "TZ": "UTC"}
    assert SECRET not in answer["env"]


async def test_inherit_env_passes_everything_plus_the_configured_variables() -> None:
    answer = await report(demo_spec(None, env={"SERVER_TOKEN": "tok-2"}, inherit_env=True))
    assert answer["env"] == {**os.environ, **QUIET_ENV, "SERVER_TOKEN": "tok-2"}
    assert answer["env"][SECRET] == "s3cret"


async def test_cwd_takes_effect(tmp_path: Path) -> None:
    """The process starts in ``cwd`` (the command and its script are found all the same)."""
    workdir = make_dir(tmp_path / "work dir")
    answer = await report(demo_spec(None, cwd=str(workdir)))
    assert answer["cwd"] == str(workdir)
    assert answer["env"] == {**safe_base(), **QUIET_ENV}


async def test_a_python_c_server_reports_the_same() -> None:
    """A one-line ``python -c`` server (no mcpwire in it) that answers ``initialize`` with its
    environment in ``instructions``: the spawn rules do not depend on the server."""
    code = (
        "import json,os,sys\n"
        "for line in sys.stdin:\n"
        "    m=json.loads(line)\n"
        "    if m.get('method')=='initialize':\n"
        "        r={'protocolVersion':m['params']['protocolVersion'],'capabilities':{},"
        "'serverInfo':{'name':'env','version':'1'},"
        "'instructions':json.dumps({'env':dict(os.environ),'cwd':os.getcwd()})}\n"
        "        print(json.dumps({'jsonrpc':'2.0','id':m['id'],'result':r}),flush=True)\n"
        "    elif 'id' in m:\n"
        "        print(json.dumps({'jsonrpc':'2.0','id':m['id'],'error':{'code':-32601,'message':'no'}}),flush=True)\n"
    )
    spec = StdioServer(command=sys.executable, args=("-c", code), env={"EXTRA": "1", **QUIET_ENV}, name="env")
    with trio.fail_after(10):
        async with mcpwire.open_client(spec, era="legacy", era_cache=False) as client:
            assert client.instructions is not None
            answer = json.loads(client.instructions)
    assert answer["env"] == {**safe_base(), **QUIET_ENV, "EXTRA": "1"}
    assert answer["cwd"] == os.getcwd()
