"""The ``mcpwire`` commands as a user meets them, through the installed entry point: help and
version, one target syntax (a URL positional works everywhere), call without arguments, "did you
mean", placeholders for images and resources, parameters, resources and prompts for one server
and for the servers of mcp.json, camelCase JSON, and honest exit statuses."""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import pytest
from _cli_run import DEMO_COMMAND, mcpwire

import mcpwire.cli as cli

# -- help, version, dispatch -----------------------------------------------------------------------


def test_version() -> None:
    from mcpwire._version import DISTRIBUTION, __version__

    for flag in ("--version", "-V"):
        proc = mcpwire(flag)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            0,
            f"mcpwire {__version__} (the {DISTRIBUTION} distribution)\n",
            "",
        )


def test_bare_mcpwire_prints_help_and_exits_0() -> None:
    proc = mcpwire()
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: mcpwire COMMAND [OPTIONS] [TARGET | -- CMD ARGS...]\n")
    for command in ("info", "tools", "call", "resources", "read", "prompts", "prompt", "servers", "check", "add"):
        assert f"\n  {command} " in proc.stdout
    assert "http://127.0.0.1:3001/mcp" in proc.stdout and "-- CMD ARGS..." in proc.stdout
    assert mcpwire("--help").stdout == proc.stdout


def test_an_unknown_command_suggests_one() -> None:
    proc = mcpwire("tool")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "mcpwire: unknown command 'tool'; did you mean tools? (mcpwire --help lists the commands)\n"


def test_options_may_come_before_the_command(tmp_path: Path) -> None:
    proc = mcpwire("--json", "tools", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "echo" in {t["name"] for t in json.loads(proc.stdout)}


@pytest.mark.parametrize("name", list(cli._COMMANDS))
def test_every_command_help_names_servers_and_lists_every_option(name: str) -> None:
    proc = mcpwire(name, "--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith(f"usage: mcpwire {name} [OPTIONS]")
    assert "examples:\n" in text
    if cli._COMMANDS[name].words:
        assert "naming a server:" in text and f"mcpwire {name} http://127.0.0.1:3001/mcp" in text
        for option in ("--config", "--header", "--bearer-env", "--transport", "--env", "--env-pass", "--cwd"):
            assert f"  {option} " in text, option
    for option in ("--json", "--era", "--timeout", "--connect-timeout", "--yes", "--verbose"):
        assert option in text, option
    parser = cli._parser(name)
    undocumented = [a.option_strings or a.dest for a in parser._actions if not a.help]
    assert undocumented == []
    assert all(a.help != argparse.SUPPRESS for a in parser._actions)


def test_call_help_lists_approve_and_config() -> None:
    text = mcpwire("call", "--help").stdout
    assert "--approve" in text and "--config FILE" in text


@pytest.mark.parametrize(
    ("command", "module"),
    [
        ("check", "mcpwire.conformance.cli"),
        ("fuzz", "mcpwire.fuzz.cli"),
        ("login", "mcpwire.auth.cli"),
        ("serve", "mcpwire.service.cli"),
        ("chat", "mcpwire.agent.cli"),
        ("add", "mcpwire.cliadd"),
    ],
)
def test_delegated_commands_reach_their_module(command: str, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType(module)
    fake.main = lambda argv: seen.append(list(argv)) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module, fake)
    assert cli.main([command, "--x", "y"]) == 7
    assert seen == [["--x", "y"]]


def test_a_delegated_command_that_is_not_installed_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcpwire.agent.cli", None)  # import fails
    assert cli.main(["chat"]) == 2
    assert capsys.readouterr().err == (
        "mcpwire chat: not available: mcpwire.agent.cli is not part of this installation of mcpwire\n"
    )

    def no_httpx(name: str) -> None:
        raise ModuleNotFoundError("No module named 'httpx'", name="httpx")

    monkeypatch.setattr("importlib.import_module", no_httpx)
    assert cli.main(["login", "http://h/mcp"]) == 2
    assert capsys.readouterr().err == (
        "mcpwire login: not available: No module named 'httpx'; it needs the http extra: "
        "pip install 'handwired-mcp[http]' (from a clone: pip install -e '.[http]')\n"
    )


# -- one target syntax -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["info"], "server:       mcpwire-everything 1.0.0"),
        (["tools"], "test_simple_text"),
        (["call", "test_simple_text"], "This is a simple text response for testing."),
        (["resources"], "test://static-text"),
        (["read", "test://static-text"], "This is the content of the static text resource."),
        (["prompts"], "test_prompt_with_arguments(arg1, arg2)"),
        (["prompt", "test_simple_prompt"], "[user]"),
    ],
)
def test_a_url_works_as_the_target_of_every_command(
    reference_url: str, args: list[str], expected: str, tmp_path: Path
) -> None:
    name, *rest = args
    proc = mcpwire(name, reference_url, *rest, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tools", "{url}", "extra"], "mcpwire tools: a URL takes no further words: {url} was followed by 'extra'\n"),
        (
            ["tools", "--", "{url}", "extra"],
            "mcpwire tools: a URL takes no further words: {url} was followed by extra; "
            "a stdio server's command starts with a program\n",
        ),
        (["call", "{url}", "echo", "{{}}", "more"], "mcpwire call: unexpected 'more': mcpwire call [TARGET] TOOL"),
        (["tools", "--config", "{url}"], "mcpwire tools: argument --config: expected a file name, not the URL"),
    ],
)
def test_a_url_never_becomes_something_else(args: list[str], message: str, tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/mcp"
    proc = mcpwire(*(a.format(url=url) for a in args), cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(message.format(url=url)), proc.stderr


# -- calls -----------------------------------------------------------------------------------------


def test_call_without_arguments_sends_an_empty_object(tmp_path: Path) -> None:
    proc = mcpwire("call", "notify", cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    proc = mcpwire("call", "fail", "--json", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["isError"] is True


def test_a_missing_tool_suggests_the_closest_and_exits_2(tmp_path: Path) -> None:
    proc = mcpwire("call", "ecoh", '{"text": "x"}', cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "mcpwire call: no tool named 'ecoh' on the bundled demo server; did you mean echo?\n"
    proc = mcpwire("call", "zzzz", "--", *DEMO_COMMAND, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.endswith("; known tools: add, ask, big, crash, echo, fail, notify, roots, sample, slow, touch\n")


def test_images_audio_and_resources_are_placeholders(reference_url: str, tmp_path: Path) -> None:
    def call(tool: str) -> str:
        proc = mcpwire("call", reference_url, tool, cwd=tmp_path, home=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert call("test_image_content") == "[image/png, 69 B]\n"
    assert call("test_audio_content") == "[audio/wav, 60 B]\n"
    assert call("test_embedded_resource") == (
        "[embedded resource, test://embedded-resource, text/plain, 37 B]\nThis is an embedded resource content.\n"
    )
    assert "[image/png, 69 B]" in call("test_multiple_content_types")
    proc = mcpwire("read", reference_url, "test://static-binary", cwd=tmp_path, home=tmp_path)
    assert proc.stdout == "[resource, test://static-binary, image/png, 69 B]\n"


def test_sizes_are_shown_as_people_read_them() -> None:
    from mcpwire.host.render import human_size

    assert [human_size(n) for n in (0, 1023, 1024, 1229, 5 * 1024 * 1024)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.2 KiB",
        "5.0 MiB",
    ]


def test_long_text_ends_with_an_ellipsis(tmp_path: Path) -> None:
    proc = mcpwire("info", cwd=tmp_path, home=tmp_path)
    instructions = proc.stdout.splitlines()[-1]
    assert instructions.endswith("to…") and len(instructions) == len("instructions: ") + 100


def test_tools_schema_shows_parameters(tmp_path: Path) -> None:
    proc = mcpwire("tools", "--schema", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:4] == [
        "echo(text: string)",
        "    Return the text unchanged.",
        "add(a: number, b: number)",
        "    Add two numbers.",
    ]
    assert "slow(seconds: number, steps?: integer)" in lines


def test_json_output_uses_mcp_camel_case(tmp_path: Path) -> None:
    tools = json.loads(mcpwire("tools", "--json", cwd=tmp_path, home=tmp_path).stdout)
    assert {"name", "inputSchema"} <= set(tools[0]) and "input_schema" not in tools[0]
    add = next(t for t in tools if t["name"] == "add")
    assert "outputSchema" in add
    call = json.loads(mcpwire("call", "add", '{"a": 1, "b": 2}', "--json", cwd=tmp_path, home=tmp_path).stdout)
    assert call == {"content": [{"type": "text", "text": "3"}], "isError": False, "structuredContent": {"sum": 3}}
    resources = json.loads(mcpwire("resources", "--json", cwd=tmp_path, home=tmp_path).stdout)
    assert set(resources) == {"resources", "resourceTemplates"}
    assert resources["resourceTemplates"][0]["uriTemplate"] == "demo://items/{id}"
    assert resources["resources"][0]["mimeType"] == "text/plain"


# -- resources and prompts, one server -------------------------------------------------------------


def test_resources_read_prompts_and_prompt(tmp_path: Path) -> None:
    resources = mcpwire("resources", cwd=tmp_path, home=tmp_path).stdout.splitlines()
    assert resources == [
        "demo://static/hello  text/plain                A greeting.",
        "demo://static/blob   application/octet-stream  The bytes 0..255.",
        "demo://items/{id}    text/plain                Item <id>.",
        "(2 resources, 1 templates)",
    ]
    assert mcpwire("read", "demo://items/7", cwd=tmp_path, home=tmp_path).stdout == "item 7\n"
    assert mcpwire("read", "demo://static/blob", cwd=tmp_path, home=tmp_path).stdout == (
        "[resource, demo://static/blob, application/octet-stream, 256 B]\n"
    )
    prompts = mcpwire("prompts", cwd=tmp_path, home=tmp_path).stdout.splitlines()
    assert prompts == ["greet(name)  Greet someone by name.", "plain()      A prompt without arguments.", "(2 prompts)"]
    for args in (["name=alice"], ['{"name": "alice"}']):
        proc = mcpwire("prompt", "greet", *args, cwd=tmp_path, home=tmp_path)
        assert (proc.returncode, proc.stdout) == (0, "# Greet someone by name.\n[user]\nHello, alice!\n"), proc.stderr
    proc = mcpwire("prompt", "greet", cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "mcpwire prompt: prompt 'greet' needs name=VALUE\n")
    proc = mcpwire("prompt", "gret", cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        "mcpwire prompt: no prompt named 'gret' on the bundled demo server; did you mean greet?\n",
    )
    proc = mcpwire("read", "demo://nope", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2 and "demo://nope" in proc.stderr


def test_a_server_without_resources_says_so(tmp_path: Path) -> None:
    hostile_free = tmp_path / "tools_only.py"
    hostile_free.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' not in m: continue\n"
        "    if m['method'] == 'initialize':\n"
        "        info = {'name': 't', 'version': '1'}\n"
        "        r = {'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}}, 'serverInfo': info}\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n"
        "    else:\n"
        "        e = {'code': -32601, 'message': 'no'}\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'error': e}), flush=True)\n"
    )
    proc = mcpwire("resources", "--", sys.executable, str(hostile_free), cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr.endswith("offers no resources (it did not advertise the 'resources' capability)\n")
    proc = mcpwire("prompts", "--json", "--", sys.executable, str(hostile_free), cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, json.loads(proc.stdout)) == (0, [])


# -- the servers of mcp.json -----------------------------------------------------------------------


def _config(path: Path, servers: dict[str, object]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _demo(name: str) -> dict[str, object]:
    return {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server", "--name", name]}


def test_resources_and_prompts_across_the_servers_of_a_config(tmp_path: Path) -> None:
    config = str(_config(tmp_path / "servers.json", {"a": _demo("a"), "b": _demo("b")}))

    def run(*args: str) -> str:
        proc = mcpwire(*args, "--config", config, cwd=tmp_path, home=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert sorted(run("resources").splitlines())[:2] == [
        "a  demo://items/{id}    text/plain                Item <id>.",
        "a  demo://static/blob   application/octet-stream  The bytes 0..255.",
    ]
    listed = json.loads(run("resources", "--json"))
    assert {r["server"] for r in listed["resources"]} == {"a", "b"}
    assert run("prompts").splitlines() == [
        "a__greet(name)  Greet someone by name.",
        "a__plain()      A prompt without arguments.",
        "b__greet(name)  Greet someone by name.",
        "b__plain()      A prompt without arguments.",
    ]
    assert run("prompt", "b__greet", "name=bo") == "# Greet someone by name.\n[user]\nHello, bo!\n"
    assert run("read", "a", "demo://items/2") == "item 2\n"  # a NAME of the config, then the URI
    proc = mcpwire("read", "demo://items/2", "--config", config, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "mcpwire read: cannot tell which server to read 'demo://items/2' from: several servers have it (a, b); "
        "name one: mcpwire read NAME URI\n"
    )
    one = str(_config(tmp_path / "one.json", {"a": _demo("a")}))
    proc = mcpwire("read", "demo://items/2", "--json", "--config", one, cwd=tmp_path, home=tmp_path)
    assert json.loads(proc.stdout)["contents"][0]["text"] == "item 2"


def test_a_name_of_the_config_is_a_target_for_every_command(tmp_path: Path) -> None:
    config = str(_config(tmp_path / "servers.json", {"a": _demo("alpha"), "b": _demo("beta")}))
    proc = mcpwire("info", "b", "--config", config, "--json", cwd=tmp_path, home=tmp_path)
    assert json.loads(proc.stdout)["serverInfo"]["name"] == "beta"
    proc = mcpwire("call", "a", "echo", '{"text": "plain name"}', "--config", config, cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "plain name\n")
    proc = mcpwire("info", "--config", config, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mcpwire info: name one of the servers of ")
    proc = mcpwire("tools", "c", "--config", config, cwd=tmp_path, home=tmp_path)
    assert proc.stderr == f"mcpwire tools: no server named 'c' in {config}; its servers: a, b\n"


def test_a_config_without_a_valid_entry_exits_2(tmp_path: Path) -> None:
    config = str(_config(tmp_path / "bad.json", {"a": {"comand": "x"}, "b": {"url": "ftp://x"}}))
    for command in ("servers", "tools", "call"):
        args = [command, "x__y"] if command == "call" else [command]
        proc = mcpwire(*args, "--config", config, cwd=tmp_path, home=tmp_path)
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr.startswith(
            f"mcpwire {command}: {config}: every server entry (2) is invalid:\n"
            "  $.mcpServers.a.comand: unknown key; did you mean 'command'?\n"
        )


def test_a_truncated_config_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "cut.json"
    config.write_text('{"mcpServers": {"a": {"command": "x"')
    proc = mcpwire("servers", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"mcpwire servers: config file '{config}' is not valid JSON: line 1, column 37: "
        "Expecting ',' delimiter (the file ends early; is it truncated?)\n"
    )


def test_servers_that_do_not_start_are_described(tmp_path: Path) -> None:
    config = _config(
        tmp_path / "servers.json",
        {
            "ok": _demo("ok"),
            "gone": {"command": str(tmp_path / "missing-program")},
            "off": {**_demo("x"), "enabled": False},
        },
    )
    proc = mcpwire("tools", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "mcpwire tools: warning: server 'gone' failed to start: " in proc.stderr
    assert proc.stderr.rstrip().endswith("; its tools are missing")
    assert "is error" not in proc.stderr and "not connected" not in proc.stderr
    proc = mcpwire("call", "gone__x", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mcpwire call: no tool named 'gone__x': server 'gone' failed to start: ")
    proc = mcpwire("call", "off__echo", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.stderr == "mcpwire call: no tool named 'off__echo': server 'off' is disabled in the configuration\n"
    proc = mcpwire("call", "broken__x", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert "known tools: ok__add, ok__ask" in proc.stderr and "known tools: none" not in proc.stderr
    servers = json.loads(mcpwire("servers", "--json", "--config", str(config), cwd=tmp_path, home=tmp_path).stdout)
    assert [(s["name"], s["status"]) for s in servers] == [("ok", "connected"), ("gone", "error"), ("off", "disabled")]
    assert {"protocolVersion", "tools", "error", "target"} <= set(servers[0]) and "protocol_version" not in servers[0]


def test_options_for_one_server_are_refused_for_many(tmp_path: Path) -> None:
    config = str(_config(tmp_path / "servers.json", {"a": _demo("a")}))
    proc = mcpwire("tools", "--env", "A=1", "--config", config, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mcpwire tools: --env apply to a server named on the command line")


def test_a_401_says_how_to_authorize(tmp_path: Path) -> None:
    """A server that wants a token: the message names both ways to give one, once."""
    import http.server
    import threading

    class Deny(http.server.BaseHTTPRequestHandler):
        def _deny(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="mcp"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _deny

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deny)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        proc = mcpwire("tools", url, cwd=tmp_path, home=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("mcpwire tools: server '127.0.0.1' answered HTTP 401")
    assert proc.stderr.count("--bearer-env") == 1 and f"mcpwire login {url}" in proc.stderr
