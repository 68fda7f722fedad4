"""``mcpwire add``: catalogue servers and registry server.json files become validated mcp.json
entries, written without clobbering the file (its comments, unknown keys and other entries stay;
a backup is kept), and the entries start the real servers."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from _cli_run import mcpwire

from mcpwire.catalog import PRESETS, CatalogError, entry_from_preset, entry_from_server_json, environment_names
from mcpwire.host.config import parse_server

REPO = Path(__file__).resolve().parents[2]
SERVERS = REPO / ".cache" / "servers"
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"


def _read(path: Path) -> dict[str, object]:
    value = json.loads(path.read_text())
    assert isinstance(value, dict)
    return value


def test_the_catalogue_has_the_well_known_servers() -> None:
    assert {"everything", "filesystem", "memory", "time", "fetch", "git", "sequential-thinking", "sqlite"} <= set(
        PRESETS
    )
    proc = mcpwire("add", "--list")
    assert proc.returncode == 0
    listed = [line.split()[0] for line in proc.stdout.splitlines()]
    assert listed == list(PRESETS)
    assert "filesystem FOLDER..." in proc.stdout


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_gives_an_entry_the_host_accepts(name: str, tmp_path: Path) -> None:
    preset = PRESETS[name]
    values = [str(tmp_path)] if any(p.required for p in preset.params) else []
    entry = entry_from_preset(preset, values)
    environ = dict.fromkeys(environment_names(preset), "set")
    server = parse_server(name, entry, base_path=tmp_path, environ=environ)
    assert server.type == ("http" if preset.url else "stdio")
    # a credential is only ever a placeholder the host fills in from its environment
    assert ("${env:" in json.dumps(entry)) == bool(environment_names(preset))


def test_preset_values_fill_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes").mkdir()
    entry = entry_from_preset(PRESETS["filesystem"], ["~/notes", str(tmp_path)])
    assert entry["args"] == ["-y", "@modelcontextprotocol/server-filesystem", str(Path.home() / "notes"), str(tmp_path)]
    assert entry_from_preset(PRESETS["git"], [])["args"] == ["mcp-server-git"]
    assert entry_from_preset(PRESETS["sqlite"], ["d.db"])["args"] == [
        "mcp-server-sqlite",
        "--db-path",
        str(Path("d.db").resolve()),
    ]
    with pytest.raises(CatalogError, match=r"^filesystem needs FOLDER: a folder the server may use$"):
        entry_from_preset(PRESETS["filesystem"], [])
    with pytest.raises(CatalogError, match=r"^time takes no more values: unexpected 'x'$"):
        entry_from_preset(PRESETS["time"], ["x"])


def test_a_folder_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    config = tmp_path / "mcp.json"
    proc = mcpwire("add", "filesystem", "~/notes", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"mcpwire add: filesystem: {tmp_path / 'notes'} does not exist (from '~/notes'); give a folder that exists\n"
    )
    proc = mcpwire("add", "git", "a-file", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.stderr.splitlines() == [
        f"mcpwire add: git: {tmp_path / 'a-file'} is not a folder (from 'a-file'); give a folder that exists"
    ]
    assert not config.exists()


def test_adding_to_the_user_wide_config_says_it_is_the_default_everywhere(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    proc = mcpwire("add", "time", cwd=tmp_path / "work", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    user = tmp_path / ".config" / "mcpwire" / "mcp.json"
    assert proc.stdout.splitlines() == [
        f"added 'time' to {user}: uvx mcp-server-time",
        "it needs uv (uvx)",
        f"{user} is the user-wide config: every mcpwire command (tools, call, chat, serve...) now starts 'time', "
        "in any folder without its own mcp.json (--config or $MCPWIRE_CONFIG names another)",
        "try: mcpwire tools time",
    ]
    # a project's own file says nothing of the kind
    (tmp_path / "work" / "mcp.json").write_text("{}")
    proc = mcpwire("add", "memory", cwd=tmp_path / "work", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "user-wide" not in proc.stdout


def test_add_writes_a_new_file(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "mcp.json"
    proc = mcpwire("add", "time", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"added 'time' to {config}: uvx mcp-server-time",
        "it needs uv (uvx)",
        f"try: mcpwire tools time --config {config}",
    ]
    assert _read(config) == {
        "mcpServers": {
            "time": {
                "command": "uvx",
                "args": ["mcp-server-time"],
                "description": "the current time and time-zone conversions",
            }
        }
    }
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert not (tmp_path / "conf" / "mcp.json.bak").exists()


def test_add_keeps_the_rest_of_the_file_and_a_backup(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    original = (
        "{\n"
        "  // the team's servers\n"
        '  "mcpServers": {\n'
        '    "demo": {"command": "python3", "args": ["-m", "demo"]},\n'
        "  },\n"
        '  "x-editor": {"theme": "dark"}\n'
        "}\n"
    )
    config.write_text(original)
    config.chmod(0o640)
    proc = mcpwire(
        "add", "memory", "--config", str(config), "--env", "MEMORY_FILE_PATH=/tmp/m.json", cwd=tmp_path, home=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    text = config.read_text()
    assert text.startswith(
        '{\n  // the team\'s servers\n  "mcpServers": {\n    "demo": {"command": "python3", "args": ["-m", "demo"]},\n'
    )
    assert text.endswith('  },\n  "x-editor": {"theme": "dark"}\n}\n')
    assert '    "memory": {\n      "command": "npx",\n' in text
    assert (tmp_path / "mcp.json.bak").read_text() == original
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    from mcpwire.jsonedit import decode

    assert decode(text) == {
        "mcpServers": {
            "demo": {"command": "python3", "args": ["-m", "demo"]},
            "memory": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-memory"],
                "env": {"MEMORY_FILE_PATH": "/tmp/m.json"},
                "description": "a knowledge graph kept between conversations",
            },
        },
        "x-editor": {"theme": "dark"},
    }


def test_an_existing_entry_is_never_clobbered(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "my-own-time"}}}))
    before = config.read_text()
    proc = mcpwire("add", "time", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"mcpwire add: {config} already has a server named 'time': pass --force to replace it\n"
    assert config.read_text() == before and not (tmp_path / "mcp.json.bak").exists()
    assert mcpwire("add", "time", "--config", str(config), "--as", "clock", cwd=tmp_path, home=tmp_path).returncode == 0
    assert (
        mcpwire(
            "add", "fetch", "--as", "time", "--force", "--config", str(config), cwd=tmp_path, home=tmp_path
        ).returncode
        == 0
    )
    servers = _read(config)["mcpServers"]
    assert isinstance(servers, dict)
    assert list(servers) == ["time", "clock"] and servers["time"]["args"] == ["mcp-server-fetch"]


def test_dry_run_and_json_write_nothing(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    proc = mcpwire(
        "add", "sqlite", "data.db", "--dry-run", "--json", "--config", str(config), cwd=tmp_path, home=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "name": "sqlite",
        "entry": {
            "command": "uvx",
            "args": ["mcp-server-sqlite", "--db-path", str(tmp_path / "data.db")],
            "description": "query and change a SQLite database",
        },
        "config": str(config),
        "written": False,
    }
    assert not config.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["fech"],
            "mcpwire add: no server named 'fech' in the catalogue; did you mean fetch? (mcpwire add --list shows it)\n",
        ),
        (["filesystem"], "mcpwire add: filesystem needs FOLDER: a folder the server may use\n"),
        (["time", "--as", "a b"], "mcpwire add: --as: entry names use letters, digits, '_', '-' and '.', not 'a b'\n"),
        (
            ["time", "--header", "A: b"],
            "mcpwire add: --header is for servers reached by URL; this one is started (use --env)\n",
        ),
        (
            ["github", "--env", "A=b"],
            "mcpwire add: --env is for servers mcpwire starts; this one is reached by URL (use --header)\n",
        ),
        (
            ["time", "--config", "http://h/mcp.json"],
            "mcpwire add: argument --config: expected a file name, not the URL",
        ),
    ],
)
def test_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    proc = mcpwire("add", *args, cwd=tmp_path, home=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(message)


def test_vs_code_files_keep_their_servers_key(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"servers": {}, "inputs": []}')
    assert mcpwire("add", "time", "--config", str(config), cwd=tmp_path, home=tmp_path).returncode == 0
    assert set(_read(config)) == {"servers", "inputs"}


def test_a_file_that_is_not_json_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": ')
    proc = mcpwire("add", "time", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"mcpwire add: cannot edit {config}: the text ends too early (a '}}' or ']' is missing)\n"
    assert config.read_text() == '{"mcpServers": {"a": '


def test_adding_to_a_new_project_config_keeps_it_trusted(tmp_path: Path) -> None:
    assert mcpwire("add", "time", cwd=tmp_path, home=tmp_path).returncode == 0
    proc = mcpwire("servers", "--json", cwd=tmp_path, home=tmp_path)
    assert "not trusted" not in proc.stderr  # written by the user's own command
    untrusted = tmp_path / "other"
    untrusted.mkdir()
    (untrusted / "mcp.json").write_text(json.dumps({"mcpServers": {"x": {"command": "evil"}}}))
    assert mcpwire("add", "time", cwd=untrusted, home=tmp_path).returncode == 0
    proc = mcpwire("servers", cwd=untrusted, home=tmp_path)
    assert proc.returncode == 2 and "is a project config not trusted yet" in proc.stderr


# -- server.json -------------------------------------------------------------------------------------

WEATHER = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
    "name": "io.github.example/weather",
    "description": "Weather data",
    "version": "1.0.0",
    "packages": [
        {
            "registryType": "pypi",
            "identifier": "weather-mcp",
            "version": "0.5.0",
            "transport": {"type": "stdio"},
            "packageArguments": [
                {"type": "named", "name": "--units", "default": "metric", "isRequired": True},
                {"type": "positional", "valueHint": "city", "isRequired": True},
            ],
            "environmentVariables": [
                {"name": "WEATHER_API_KEY", "isSecret": True, "isRequired": True},
                {"name": "LOG_LEVEL", "default": "info"},
                {"name": "REGION", "value": "eu"},
            ],
        }
    ],
}


def test_a_server_json_package_becomes_an_entry() -> None:
    name, entry = entry_from_server_json(WEATHER, ["Paris"], {})
    assert name == "weather"
    assert entry == {
        "command": "uvx",
        "args": ["weather-mcp==0.5.0", "--units", "metric", "Paris"],
        "env": {"WEATHER_API_KEY": "${env:WEATHER_API_KEY}", "REGION": "eu"},
        "description": "Weather data",
    }
    _, entry = entry_from_server_json(WEATHER, [], {"city": "Oslo", "units": "imperial"})
    assert entry["args"] == ["weather-mcp==0.5.0", "--units", "imperial", "Oslo"]
    with pytest.raises(
        CatalogError, match=r"^\$\.packages\[0\]\[1\]: give CITY after the file name \(or --set city=VALUE\)$"
    ):
        entry_from_server_json(WEATHER, [], {})
    with pytest.raises(CatalogError, match=r"^unexpected 'Rome': the server takes no more values$"):
        entry_from_server_json(WEATHER, ["Paris", "Rome"], {})


def test_npm_and_oci_packages_and_remotes() -> None:
    npm = {
        "name": "a/b",
        "description": "d",
        "version": "1",
        "packages": [{"registryType": "npm", "identifier": "@s/x", "version": "2.0.1", "transport": {"type": "stdio"}}],
    }
    assert entry_from_server_json(npm, [], {})[1]["args"] == ["-y", "@s/x@2.0.1"]
    oci = {
        "name": "a/db",
        "description": "d",
        "version": "1",
        "packages": [
            {
                "registryType": "oci",
                "identifier": "example/db:3.1",
                "transport": {"type": "stdio"},
                "runtimeArguments": [
                    {
                        "type": "named",
                        "name": "-e",
                        "value": "DB_TYPE={db}",
                        "variables": {"db": {"default": "postgres"}},
                    }
                ],
            }
        ],
    }
    assert entry_from_server_json(oci, [], {})[1]["args"] == [
        "run",
        "-i",
        "--rm",
        "-e",
        "DB_TYPE=postgres",
        "example/db:3.1",
    ]
    remote = {
        "name": "io.example/remote",
        "description": "d",
        "version": "1",
        "remotes": [
            {
                "type": "sse",
                "url": "https://{tenant}.example.com/sse",
                "headers": [{"name": "X-API-Key", "isSecret": True}],
            }
        ],
    }
    assert entry_from_server_json(remote, [], {"tenant": "acme"})[1] == {
        "type": "sse",
        "url": "https://acme.example.com/sse",
        "headers": {"X-API-Key": "${env:X_API_KEY}"},
        "description": "d",
    }
    with pytest.raises(CatalogError, match=r"^\$\.remotes\[0\]\.url needs \{tenant\}: pass --set tenant=VALUE$"):
        entry_from_server_json(remote, [], {})
    with pytest.raises(CatalogError, match=r"^\$: no stdio package and no remote: nothing mcpwire can start or reach$"):
        entry_from_server_json({"name": "a/b"}, [], {})


def test_add_from_a_server_json_file(tmp_path: Path) -> None:
    document = tmp_path / "server.json"
    document.write_text(json.dumps(WEATHER))
    config = tmp_path / "mcp.json"
    proc = mcpwire("add", str(document), "Paris", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "set $WEATHER_API_KEY in the environment before it starts" in proc.stdout
    servers = _read(config)["mcpServers"]
    assert isinstance(servers, dict) and servers["weather"]["env"]["WEATHER_API_KEY"] == "${env:WEATHER_API_KEY}"
    proc = mcpwire("add", str(document), "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2 and "give CITY after the file name" in proc.stderr


# -- the entries start the real servers --------------------------------------------------------------

#: catalogue name -> the installed peer that its npx/uvx command would run
_INSTALLED = {
    "everything": NPM_BIN / "mcp-server-everything",
    "filesystem": NPM_BIN / "mcp-server-filesystem",
    "memory": NPM_BIN / "mcp-server-memory",
    "time": PY_BIN / "mcp-server-time",
    "git": PY_BIN / "mcp-server-git",
    # mcp-server-sqlite 2025.4.25 cannot start on the SDK installed beside it (AttributeError:
    # 'Server' object has no attribute 'list_resources'): only its arguments are checked below.
}


@pytest.mark.slow
@pytest.mark.real
def test_added_entries_start_the_real_servers(tmp_path: Path) -> None:
    """Each entry, with its npx/uvx launcher swapped for the installed peer (no network in
    tests), starts and lists tools: the arguments the catalogue writes are the right ones."""
    missing = [str(p) for p in _INSTALLED.values() if not p.exists()]
    if missing:
        pytest.skip(f"{missing[0]} is missing: run tests/real/install_servers.sh")
    (tmp_path / "repo").mkdir()
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    values = {"filesystem": [str(tmp_path)], "git": [str(tmp_path / "repo")]}
    config = tmp_path / "mcp.json"
    for name in _INSTALLED:
        proc = mcpwire("add", name, *values.get(name, []), "--config", str(config), cwd=tmp_path, home=tmp_path)
        assert proc.returncode == 0, proc.stderr
    document = _read(config)
    servers = document["mcpServers"]
    assert isinstance(servers, dict)
    for name, program in _INSTALLED.items():
        entry = servers[name]
        launcher_words = 2 if entry["command"] == "npx" else 1  # "-y PKG" or "PKG"
        entry["command"], entry["args"] = str(program), entry["args"][launcher_words:]
    config.write_text(json.dumps(document))
    proc = mcpwire(
        "servers",
        "--json",
        "--config",
        str(config),
        "--connect-timeout",
        "90",
        cwd=tmp_path,
        home=tmp_path,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert {name: rows[name]["status"] for name in _INSTALLED} == {name: "connected" for name in _INSTALLED}
    assert all(rows[name]["tools"] > 0 for name in _INSTALLED)


@pytest.mark.real
def test_the_sqlite_entry_takes_the_arguments_the_server_takes(tmp_path: Path) -> None:
    program = PY_BIN / "mcp-server-sqlite"
    if not program.exists():
        pytest.skip(f"{program} is missing: run tests/real/install_servers.sh")
    import subprocess

    usage = subprocess.run([str(program), "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    args = entry_from_preset(PRESETS["sqlite"], [str(tmp_path / "db.sqlite")])["args"]
    assert isinstance(args, list) and args[1] == "--db-path" and "--db-path DB_PATH" in usage


def test_help() -> None:
    proc = mcpwire("add", "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: mcpwire add [OPTIONS] (NAME | FILE.json) [VALUE...]")
    assert "examples:" in proc.stdout and "--force" in proc.stdout and "--config FILE" in proc.stdout
