"""``mcpwire.cliargs``: one target syntax and one spelling per option, project-config trust, and
clean SIGINT/SIGTERM handling (in-process, deterministic)."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from mcpwire.cliargs import (
    UsageError,
    add_target_options,
    confirm_project_config,
    load_target_config,
    output_file,
    resolve_target,
    run_cli,
    split_command,
    target_epilog,
    trust_file,
)
from mcpwire.redaction import REDACTED
from mcpwire.transports import DEFAULT_INHERITED_ENV, HttpServer, StdioServer


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user config, trust file or project mcp.json of the machine running the tests."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("MCPWIRE_CONFIG", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "MCPWIRE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _parse(argv: list[str], **flags: bool) -> tuple[argparse.Namespace, list[str], list[str] | None]:
    parser = argparse.ArgumentParser(prog="mcpwire test")
    parser.add_argument("words", nargs="*")
    add_target_options(parser, **flags)
    options, command = split_command(argv)
    args = parser.parse_intermixed_args(options)
    return args, args.words, command


def _resolve(argv: list[str], **kwargs: object) -> object:
    args, words, command = _parse(argv)
    return resolve_target(args, words, command, **kwargs)  # type: ignore[arg-type]


# -- split_command -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--json"], (["--json"], None)),
        (["--json", "--", "npx", "-y", "pkg", "--", "x"], (["--json"], ["npx", "-y", "pkg", "--", "x"])),
        (["--", "uvx", "mcp-server-time"], ([], ["uvx", "mcp-server-time"])),
    ],
)
def test_split_command(argv: list[str], expected: tuple[list[str], list[str] | None]) -> None:
    assert split_command(argv) == expected


def test_nothing_after_the_separator_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"^nothing after '--': give the server's command, e\.g\. -- npx -y "):
        split_command(["tools", "--"])


# -- options ---------------------------------------------------------------------------------------


def test_every_option_has_help_and_one_spelling() -> None:
    parser = argparse.ArgumentParser()
    add_target_options(parser)
    flags = {s for a in parser._actions for s in a.option_strings}
    assert {
        "--config",
        "--header",
        "--bearer-env",
        "--transport",
        "--env",
        "--env-pass",
        "--cwd",
        "--era",
        "--protocol-version",
        "--timeout",
        "--connect-timeout",
        "--yes",
        "--trust",
        "-v",
        "--verbose",
    } <= flags
    assert all(a.help for a in parser._actions)
    transport = next(a for a in parser._actions if a.dest == "transport")
    assert transport.choices == ("auto", "streamable-http", "sse")


def test_option_groups_can_be_left_out() -> None:
    parser = argparse.ArgumentParser()
    add_target_options(parser, config=False, stdio=False, http=False)
    flags = {s for a in parser._actions for s in a.option_strings}
    assert not flags & {"--config", "--header", "--bearer-env", "--transport", "--env", "--env-pass", "--cwd"}
    assert {"--era", "--timeout", "--yes", "-v"} <= flags


def test_defaults_can_be_changed_and_the_help_follows() -> None:
    parser = argparse.ArgumentParser(prog="x")
    add_target_options(parser)
    parser.set_defaults(timeout=5.0)
    assert parser.parse_args([]).timeout == 5.0
    assert "(default 5)" in " ".join(parser.format_help().split())


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf"])
def test_timeouts_must_be_positive_numbers(value: str) -> None:
    parser = argparse.ArgumentParser()
    add_target_options(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--timeout", value])


def test_a_file_option_never_swallows_a_url() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=output_file)
    assert parser.parse_args(["--json", "report.json"]).json == "report.json"
    with pytest.raises(argparse.ArgumentTypeError, match=r"^expected a file name, not the URL 'http://h/mcp'"):
        output_file("http://h/mcp")
    with pytest.raises(UsageError, match=r"expected a file name, not the URL 'https://\*\*\*@h/mcp'"):
        _parse_config_url()


def _parse_config_url() -> None:
    class Strict(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(message)

    parser = Strict()
    add_target_options(parser)
    parser.parse_args(["--config", "https://user:pw@h/mcp"])


def test_the_epilog_shows_how_to_name_a_server() -> None:
    text = target_epilog("mcpwire tools", "examples:\n  mcpwire tools --schema\n")
    assert "mcpwire tools http://127.0.0.1:3001/mcp" in text
    assert "mcpwire tools -- npx -y @modelcontextprotocol/server-everything" in text
    assert "mcpwire tools --config mcp.json NAME" in text
    assert text.endswith("examples:\n  mcpwire tools --schema\n")


# -- resolve_target ------------------------------------------------------------------------------


def test_a_url_positional_is_an_http_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "tok-0123456789")
    target = _resolve(
        [
            "https://user:pw@example.com/mcp?api_key=k-123456&x=1",
            "--header",
            "X-Team: blue-team",
            "--header",
            "X-Key=abc:def",
            "--bearer-env",
            "MY_TOKEN",
            "--transport",
            "sse",
        ]
    )
    assert target.kind == "url"  # type: ignore[attr-defined]
    spec = target.spec  # type: ignore[attr-defined]
    assert isinstance(spec, HttpServer)
    assert spec.headers == {"X-Team": "blue-team", "X-Key": "abc:def"}
    assert (spec.bearer_token, spec.transport) == ("tok-0123456789", "sse")
    assert target.label == f"https://{REDACTED}@example.com/mcp?api_key={REDACTED}&x=1"  # type: ignore[attr-defined]
    masked = target.secrets.mask("blue-team abc:def tok-0123456789")  # type: ignore[attr-defined]
    assert masked == f"{REDACTED} {REDACTED} {REDACTED}"


def test_the_older_dash_dash_url_form_still_works() -> None:
    target = _resolve(["--", "http://127.0.0.1:9/mcp"])
    assert isinstance(target.spec, HttpServer)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["http://h/mcp", "echo"], r"^a URL takes no further words: http://h/mcp was followed by 'echo'$"),
        (
            ["--", "http://h/mcp", "--port", "3"],
            r"^a URL takes no further words: http://h/mcp was followed by --port; "
            r"a stdio server's command starts with a program$",
        ),
        (["http://h/mcp", "--", "npx", "x"], r"^give either a URL or a command after '--', not both$"),
        (["demo", "--", "npx", "x"], r"^give either a server name \('demo'\) or a command after '--', not both$"),
        (["http://h/mcp", "--env", "A=1"], r"^--env, --env-pass and --cwd are for servers we start; "),
        (["--header", "A: b", "--", "npx", "x"], r"^--header and --bearer-env are for HTTP servers; "),
        (["--header", "sk-secret-token", "http://h/mcp"], r"^--header: expected NAME: VALUE or NAME=VALUE$"),
        (["--bearer-env", "NOT_SET_ANYWHERE", "http://h/mcp"], r"^--bearer-env NOT_SET_ANYWHERE: that environment "),
        (["--env", "NOVALUE", "--", "x"], r"^--env takes KEY=VALUE, not 'NOVALUE'$"),
        (["--env-pass", "NOT_SET_ANYWHERE", "--", "x"], r"^--env-pass NOT_SET_ANYWHERE: that variable is not set$"),
        (["ftp://h/x"], r"^'ftp://h/x' is not a URL, and there is no mcp.json to find a server of that name in"),
    ],
)
def test_target_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        _resolve(argv)


def test_a_command_gets_the_minimal_environment_plus_env_and_env_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI_SECRET", "do-not-pass-me")
    monkeypatch.setenv("PASS_ME", "passed-value")
    target = _resolve(["--env", "API_KEY=k-0123456789", "--env-pass", "PASS_ME", "--cwd", "/tmp", "--", "srv", "-x"])
    spec = target.spec  # type: ignore[attr-defined]
    assert isinstance(spec, StdioServer)
    assert (spec.command, spec.args, spec.cwd, spec.inherit_env) == ("srv", ("-x",), "/tmp", False)
    assert spec.env == {"API_KEY": "k-0123456789", "PASS_ME": "passed-value"}
    env = spec.environment()
    assert "CI_SECRET" not in env
    assert set(env) <= {*DEFAULT_INHERITED_ENV, "API_KEY", "PASS_ME"}
    assert target.secrets.mask("k-0123456789 passed-value") == f"{REDACTED} {REDACTED}"  # type: ignore[attr-defined]


def test_a_command_label_hides_secret_flags_and_control_characters() -> None:
    target = _resolve(["--", "srv\x1b[2J", "--api-key", "k-0123456789", "--token=abc"])
    assert target.label == f"'srv\\x1b[2J' --api-key {REDACTED} '--token={REDACTED}'"  # type: ignore[attr-defined]


def test_nothing_is_the_bundled_demo_server() -> None:
    target = _resolve([])
    assert target.kind == "demo"  # type: ignore[attr-defined]
    assert target.spec.argv == [sys.executable, "-m", "mcpwire.testing.demo_server"]  # type: ignore[attr-defined]


def test_one_server_at_a_time() -> None:
    with pytest.raises(UsageError, match=r"^one server at a time: unexpected 'b' after 'a'$"):
        _resolve(["a", "b"])


def _write_config(path: Path, servers: dict[str, object]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_a_name_is_an_entry_of_the_given_config(tmp_path: Path) -> None:
    config = _write_config(
        tmp_path / "elsewhere.json",
        {
            "local": {"command": "srv", "args": ["--flag"], "env": {"TOKEN": "t-0123456789"}},
            "remote": {"url": "https://h/mcp", "headers": {"X-Api-Key": "h-0123456789"}},
        },
    )
    target = _resolve(["--config", str(config), "local", "--env", "EXTRA=e-0123456789"])
    assert target.kind == "config" and target.name == "local"  # type: ignore[attr-defined]
    assert target.spec.env == {"TOKEN": "t-0123456789", "EXTRA": "e-0123456789"}  # type: ignore[attr-defined]
    assert target.label == "local (srv --flag)"  # type: ignore[attr-defined]
    assert target.secrets.mask("t-0123456789") == REDACTED  # type: ignore[attr-defined]
    remote = _resolve(["--config", str(config), "remote", "--header", "X-More: m-0123456789"])
    assert remote.spec.headers == {"X-Api-Key": "h-0123456789", "X-More": "m-0123456789"}  # type: ignore[attr-defined]
    assert remote.secrets.mask("h-0123456789 m-0123456789") == f"{REDACTED} {REDACTED}"  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match=r"^no server named 'locl' in .*elsewhere\.json; did you mean local\?$"):
        _resolve(["--config", str(config), "locl"])
    with pytest.raises(UsageError, match=r"^--config .*elsewhere\.json: name one of its servers"):
        _resolve(["--config", str(config)])


def test_a_config_whose_entries_are_all_invalid_is_refused(tmp_path: Path) -> None:
    config = _write_config(tmp_path / "bad.json", {"a": {"comand": "x"}, "b": {"url": "ftp://x"}})
    with pytest.raises(
        UsageError,
        match=r"^.*bad\.json: every server entry \(2\) is invalid:\n  "
        r"\$\.mcpServers\.a\.comand: unknown key; did you mean 'command'\?\n",
    ):
        _resolve(["--config", str(config), "a"])


def test_a_missing_config_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^config file '.*missing\.json' does not exist$"):
        _resolve(["--config", str(tmp_path / "missing.json"), "x"])


# -- project-local configs -------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _project(tmp_path: Path) -> Path:
    return _write_config(
        tmp_path / "mcp.json",
        {
            "gh": {"command": "npx", "args": ["-y", "gh-server", "--token", "${env:GITHUB_TOKEN}"]},
            "web": {"url": "https://u:p@h/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
        },
    )


def test_a_project_config_is_refused_without_a_terminal(tmp_path: Path) -> None:
    path = _project(tmp_path)
    err = io.StringIO()
    assert not confirm_project_config(path, assume_yes=False, stdin=io.StringIO(), stderr=err)
    assert err.getvalue() == (
        f"mcpwire: {path} is a project config not trusted yet (it would start 2 server(s)): "
        "review it and pass --yes to trust it, or run once in a terminal to be asked\n"
    )
    assert not trust_file().exists()


def test_the_question_shows_the_commands_redacted_and_the_answer_is_remembered(tmp_path: Path) -> None:
    path = _project(tmp_path)
    err = io.StringIO()
    assert confirm_project_config(path, assume_yes=False, stdin=_Terminal("y\n"), stderr=err)
    assert err.getvalue().splitlines() == [
        f"{path} is a project-local config that has not been trusted yet. It would start or reach:",
        f"  gh: npx -y gh-server --token {REDACTED}  [reads $GITHUB_TOKEN]",
        f"  web: https://{REDACTED}@h/mcp  [reads $API_TOKEN]",
        "Trust this file and run its servers? [y/N] ",
    ]
    # remembered: no question, even without a terminal
    quiet = io.StringIO()
    assert confirm_project_config(path, assume_yes=False, stdin=io.StringIO(), stderr=quiet)
    assert quiet.getvalue() == ""
    # a changed file is asked about again
    path.write_text(path.read_text().replace("gh-server", "other-server"))
    assert not confirm_project_config(path, assume_yes=False, stdin=io.StringIO(), stderr=quiet)


def test_a_refusal_is_remembered_and_yes_overrides_it(tmp_path: Path) -> None:
    path = _project(tmp_path)
    err = io.StringIO()
    assert not confirm_project_config(path, assume_yes=False, stdin=_Terminal("\n"), stderr=err)
    assert err.getvalue().endswith(
        f"mcpwire: not trusted: the servers of {path} were not started (pass --yes to trust it later)\n"
    )
    again = io.StringIO()
    assert not confirm_project_config(path, assume_yes=False, stdin=_Terminal("y\n"), stderr=again)
    assert again.getvalue() == f"mcpwire: the servers of {path} were refused earlier; pass --yes to trust this file\n"
    assert confirm_project_config(path, assume_yes=True, stdin=io.StringIO(), stderr=again)
    assert confirm_project_config(path, assume_yes=False, stdin=io.StringIO(), stderr=again)
    assert oct(trust_file().stat().st_mode & 0o777) == "0o600"


def test_only_a_config_found_in_the_working_directory_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", "g-0123456789")
    monkeypatch.setenv("API_TOKEN", "a-0123456789")
    args, _, _ = _parse([])
    with pytest.raises(UsageError, match=r"is a project config not trusted yet"):
        load_target_config(args, stdin=io.StringIO(), stderr=io.StringIO())
    args, _, _ = _parse(["--config", "mcp.json"])  # named on the command line: the user chose it
    assert load_target_config(args, stdin=io.StringIO(), stderr=io.StringIO()) is not None
    monkeypatch.setenv("MCPWIRE_CONFIG", str(tmp_path / "mcp.json"))
    args, _, _ = _parse([])
    assert load_target_config(args, stdin=io.StringIO(), stderr=io.StringIO()) is not None


def test_the_trust_file_follows_the_data_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert trust_file() == Path.home() / ".local" / "share" / "mcpwire" / "trusted-configs.json"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert trust_file() == tmp_path / "data" / "mcpwire" / "trusted-configs.json"
    monkeypatch.setenv("MCPWIRE_DATA_DIR", str(tmp_path / "own"))
    assert trust_file() == tmp_path / "own" / "trusted-configs.json"


def test_an_unreadable_trust_file_is_ignored(tmp_path: Path) -> None:
    path = _project(tmp_path)
    trust_file().parent.mkdir(parents=True)
    trust_file().write_text("{not json")
    assert confirm_project_config(path, assume_yes=True, stdin=io.StringIO(), stderr=io.StringIO())
    assert confirm_project_config(path, assume_yes=False, stdin=io.StringIO(), stderr=io.StringIO())


# -- run_cli ---------------------------------------------------------------------------------------


def test_run_cli_returns_what_main_returns() -> None:
    async def main() -> int:
        await trio.lowlevel.checkpoint()
        return 3

    assert run_cli(main) == 3


def test_run_cli_raises_main_errors_unwrapped() -> None:
    async def main() -> int:
        raise LookupError("plain")

    with pytest.raises(LookupError, match=r"^plain$"):
        run_cli(main)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_cancels_main_and_cleanup_runs(signum: int, status: int) -> None:
    cleaned: list[str] = []

    async def main() -> int:
        try:
            os.kill(os.getpid(), signum)
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.lowlevel.checkpoint()  # shielded cleanup may still await
                cleaned.append("closed")
        return 0  # pragma: no cover - cancelled before

    assert run_cli(main) == status
    assert cleaned == ["closed"]
