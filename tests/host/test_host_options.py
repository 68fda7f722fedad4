"""The client options a host gives its servers: one frozen ClientOptions value for every server,
each server's own settings on top, and the deprecated mapping form (it warns, then works)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mcpwire.client import ClientOptions
from mcpwire.host import Host, ServerStatus
from mcpwire.protocol.types import Implementation

DEPRECATED = (
    r"^Host\(client_options=\.\.\.\) as a mapping is deprecated; pass a mcpwire\.ClientOptions value "
    r"\(e\.g\. client_options=ClientOptions\(era='legacy'\)\)$"
)


def _config(tmp_path: Path, servers: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _demo(name: str, **entry: object) -> dict[str, object]:
    args = ["-u", "-m", "mcpwire.testing.demo_server", "--name", name]
    return {"command": sys.executable, "args": args, **entry}


async def test_every_server_gets_the_hosts_options_with_its_own_settings_on_top(tmp_path: Path) -> None:
    me = Implementation(name="options-probe", version="9.9")
    options = ClientOptions(era="legacy", client_info=me, max_input_rounds=3, timeout=12.0)
    path = _config(
        tmp_path,
        {
            "plain": _demo("plain"),
            "own": _demo("own", era="modern", connect_timeout_seconds=7, policy={"timeout_seconds": 4}),
        },
    )
    async with Host.from_config(path, health_interval=0, client_options=options) as host:
        plain, own = host.get("plain"), host.get("own")
        assert (plain.status, own.status) == (ServerStatus.CONNECTED, ServerStatus.CONNECTED)
        assert (plain.era, own.era) == ("legacy", "modern")
        assert plain.client is not None and own.client is not None
        # the server's policy timeout is its request timeout; the rest is the host's value
        assert plain.client.options == options.replace(timeout=plain.config.policy.timeout_seconds)
        assert own.client.options == options.replace(timeout=4.0, connect_timeout=7.0, era="modern")
        result = await host.call_tool("plain__echo", {"text": "hi"})
        assert result.text == "hi"


async def test_a_gateways_per_server_options_go_over_the_hosts(tmp_path: Path) -> None:
    host = Host.from_config(
        _config(tmp_path, {"a": _demo("a")}), health_interval=0, client_options=ClientOptions(max_input_rounds=2)
    )
    asked: list[str] = []

    def per_server(config: object) -> dict[str, object]:
        asked.append(getattr(config, "name", "?"))
        return {"max_input_rounds": 5, "strict": True}

    host.client_options_for = per_server
    async with host:
        client = host.get("a").client
        assert client is not None
        assert (client.options.max_input_rounds, client.options.strict) == (5, True)
    assert asked == ["a"]


async def test_a_mapping_of_options_still_works_and_warns(tmp_path: Path) -> None:
    path = _config(tmp_path, {"a": _demo("a")})
    with pytest.warns(DeprecationWarning, match=DEPRECATED) as caught:
        host = Host.from_config(path, health_interval=0, client_options={"era": "legacy", "max_input_rounds": 4})
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]
    async with host:
        info = host.get("a")
        assert info.era == "legacy"
        assert info.client is not None and info.client.options.max_input_rounds == 4


def test_a_mapping_warns_where_the_host_is_made() -> None:
    with pytest.warns(DeprecationWarning, match=DEPRECATED) as caught:
        Host(client_options={"era": "legacy"})
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_a_mapping_with_an_unknown_option_is_refused_when_the_host_is_made() -> None:
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ValueError, match=r"^unknown client option 'eraa'; did you mean 'era'\?$"),
    ):
        Host(client_options={"eraa": "legacy"})


def test_a_value_makes_no_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        host = Host(client_options=ClientOptions(era="modern"))
        Host()
    assert host._supervisor.client_options == ClientOptions(era="modern")
