"""The pieces under the checks: SSE parsing, header encoding, argument synthesis, tool policy,
schema compilation, spec links, transport detection and the command line's targets."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from _targets import fixture_argv, http_server, reference_argv
from mcpwire.conformance.cli import main
from mcpwire.conformance.context import Target, ToolPolicy, example_arguments
from mcpwire.conformance.evidence import Redactor, WireRecord, collect
from mcpwire.conformance.http_harness import (
    HttpReply,
    TargetUnreachable,
    encode_header_value,
    open_http_wire,
)
from mcpwire.conformance.registry import CATALOGUE
from mcpwire.conformance.runner import detect_transport, run, spec_url
from mcpwire.conformance.schema import SchemaProblem, compile_schema
from mcpwire.conformance.sse import SseParser


def test_sse_parser_follows_the_event_stream_rules() -> None:
    parser = SseParser()
    events = parser.feed(b': keep-alive\r\nid: 1.0\r\nretry: 500\r\ndata: \r\n\r\nevent: message\ndata: {"a":')
    events += parser.feed(b"\ndata: 1}\n\n")
    events += parser.feed("data: \u00e9t\u00e9".encode()[:-1])  # a multi-byte character split across reads
    events += parser.feed("\u00e9".encode()[-1:] + b"\r")
    events += parser.feed(b"\n\r")
    assert [(e.event, e.id, e.retry, e.data) for e in events] == [
        ("message", "1.0", 500, ""),  # a priming event: an id and empty data
        ("message", None, None, '{"a":\n1}'),
        ("message", None, None, "\u00e9t\u00e9"),
    ]
    assert parser.comments == 1


def test_header_values_use_the_base64_sentinel_when_needed() -> None:
    assert encode_header_value("us-west1") == "us-west1"
    assert encode_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert encode_header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="


def test_example_arguments_satisfy_the_input_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 3},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "where": {"$ref": "#/$defs/place"},
            "note": {"type": "string"},
        },
        "required": ["n", "mode", "tags", "where"],
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    }
    arguments = example_arguments(schema)
    assert arguments == {"n": 3, "mode": "fast", "tags": ["x"], "where": {"city": "x"}}
    compile_schema(schema).validate(arguments)


def test_tool_policy() -> None:
    read_only = {"name": "r", "annotations": {"readOnlyHint": True}}
    destructive = {"name": "d", "annotations": {"readOnlyHint": True, "destructiveHint": True}}
    plain = {"name": "p"}
    assert [ToolPolicy().refuses(t) is None for t in (read_only, destructive, plain)] == [False, False, False]
    assert [ToolPolicy("read-only").refuses(t) is None for t in (read_only, destructive, plain)] == [True, False, False]
    assert [ToolPolicy("all").refuses(t) is None for t in (read_only, destructive, plain)] == [True, True, True]
    assert ToolPolicy("none", ("p",)).refuses(plain) is None
    assert ToolPolicy("read-only").refuses(destructive) == "tool 'd' is annotated destructiveHint"


def test_schema_problems_are_named() -> None:
    with pytest.raises(SchemaProblem, match=r"^'strin' is not valid under any of the given schemas"):
        compile_schema({"type": "object", "properties": {"a": {"type": "strin"}}})
    with pytest.raises(SchemaProblem, match=r"^unknown JSON Schema dialect 'https://example.com/dialect'$"):
        compile_schema({"$schema": "https://example.com/dialect", "type": "object"})
    with pytest.raises(SchemaProblem, match=r"^a schema must be a JSON object, not list$"):
        compile_schema([])
    validator = compile_schema({"$ref": "https://example.com/remote.json"})
    with pytest.raises(Exception, match=r"^Unresolvable: https://example.com/remote.json$"):  # never fetched
        validator.validate({})


def test_spec_urls_and_quotes_per_revision() -> None:
    assert spec_url("basic/transports.mdx §Session Management", "2025-06-18") == (
        "https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#session-management"
    )
    assert spec_url("schema.ts MethodNotFoundError", "2025-06-18") is None
    sv20 = CATALOGUE["SV-20"]
    assert sv20.reference("2025-11-25")[0] == "basic/transports.mdx §Sending Messages to the Server"
    assert sv20.reference("2026-07-28")[0] == "basic/transports/streamable-http.mdx §Sending Messages"


def test_http_evidence_masks_secrets() -> None:
    reply = HttpReply(1, "POST", "http://127.0.0.1/mcp", {"Authorization": "Bearer s3cret", "X-Other": "shown"}, b"{}")
    reply.headers = {"set-cookie": "a=b", "cookie": "c=d", "x-echo": "Bearer s3cret"}
    assert reply.to_dict()["request_headers"]["Authorization"] == "Bearer s3cret"  # recorded as it was
    # redacted once, when the evidence is collected: by name, and every value the user gave
    _, (shown,) = collect([WireRecord([], http=[reply.to_dict()])], Redactor(values=["Bearer s3cret"]))
    assert shown["request_headers"] == {"Authorization": "***", "X-Other": "shown"}
    assert shown["response_headers"] == {"set-cookie": "***", "cookie": "***", "x-echo": "***"}
    assert "s3cret" not in repr(shown)


async def test_a_stream_closed_before_its_response_is_resumed_after_its_retry_delay() -> None:
    """2025-11-25 basic/transports: the client resumes with GET and Last-Event-ID, waiting the
    stream's retry delay first; the request then gets its answer as if nothing happened."""
    from mcpwire.conformance.context import CLIENT_INFO

    async with http_server(reference_argv()) as url, open_http_wire(url, "2025-11-25", headers={}) as wire:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
        await wire.request("initialize", params, timeout=10)
        await wire.notify("notifications/initialized")
        # the reference server closes this call's stream after the priming event (retry: 500)
        answer = await wire.request("tools/call", {"name": "test_reconnection", "arguments": {}}, timeout=10)
    assert answer["result"]["content"] == [{"type": "text", "text": "reconnection test complete"}]
    post = wire.reply_for(answer["id"])
    assert post is not None and post.complete and post.messages == []
    assert [(e.data, e.retry) for e in post.events] == [("", 500)]
    (resumed,) = [r for r in wire.replies if r.method == "GET"]
    assert resumed.request_headers["Last-Event-ID"] == post.events[0].id
    assert any(m.get("id") == answer["id"] for m in resumed.messages)
    closed = max(e.at for e in wire.exchanges if e.text.startswith(post.label))
    asked = min(e.at for e in wire.exchanges if e.text.startswith(resumed.label))
    assert asked - closed >= 0.45  # retry: 500 (ms)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_unreachable_url_is_a_connection_error() -> None:
    target = Target(url=f"http://127.0.0.1:{_closed_port()}/mcp", transport="auto")
    with pytest.raises(OSError, match=r"^cannot reach http://127\.0\.0\.1:\d+/mcp: "):
        await detect_transport(target)
    with pytest.raises(TargetUnreachable, match="no 'endpoint' event"):
        async with open_http_wire(f"http://127.0.0.1:{_closed_port()}/sse", "2024-11-05", transport="sse"):
            pass


async def test_url_target_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    async with http_server(reference_argv()) as url:
        argv = ["-q", "--only", "SV-20,SV-13", "--revision", "2025-11-25,2026-07-28", url]
        import trio

        code = await trio.to_thread.run_sync(main, argv)
    assert code == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "result: PASS"


async def test_json_report_of_an_http_target_shows_the_http_exchange(tmp_path: Path) -> None:
    import trio

    out = tmp_path / "r.json"
    async with http_server(fixture_argv("no_host_check")) as url:
        argv = ["-q", "--json", str(out), "--only", "SV-22b", "--revision", "2025-11-25", url]
        assert await trio.to_thread.run_sync(main, argv) == 0  # a SHOULD: a warning
    (result,) = json.loads(out.read_text())["results"]
    assert (result["id"], result["outcome"]) == ("SV-22b", "warning")
    (post,) = result["http"]
    assert (post["method"], post["url"], post["status"]) == ("POST", url, 200)
    assert post["request_headers"]["Host"] == "evil.example.com"
    assert post["response_headers"]["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--header", "no-colon", "http://127.0.0.1:9/mcp"],
            "mcpwire check: --header: expected NAME: VALUE or NAME=VALUE",
        ),
        (
            ["--header", "A: b", "--", "cmd"],
            "mcpwire check: --header and --bearer-env are for HTTP servers; give a URL instead of a command",
        ),
        (["http://"], "mcpwire check: not an http(s) URL: 'http://'"),
        (
            ["http://127.0.0.1:9/mcp", "extra"],
            "mcpwire check: a URL takes no further words: http://127.0.0.1:9/mcp was followed by 'extra'",
        ),
    ],
)
def test_target_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


def test_unreachable_url_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    assert main(["-q", url]) == 2
    assert capsys.readouterr().err.startswith(f"mcpwire check: cannot reach {url}: ")


def test_unreachable_url_with_credentials_is_redacted_and_keeps_its_colon(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    assert main(["-q", f"http://user:hunter22@127.0.0.1:{port}/mcp?api_key=s3cr3t-value"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mcpwire check: cannot reach http://***@127.0.0.1:{port}/mcp?api_key=***: "), err
    assert "hunter22" not in err and "s3cr3t-value" not in err


async def test_http_server_from_mcp_json_with_headers_and_an_era_pin(tmp_path: Path) -> None:
    import trio

    async with http_server(reference_argv()) as url:
        config = tmp_path / "mcp.json"
        entry = {"type": "http", "url": url, "headers": {"X-Check": "yes"}, "era": "modern"}
        config.write_text(json.dumps({"mcpServers": {"ref": entry, "bad": {"url": url, "era": "old"}}}))
        code = await trio.to_thread.run_sync(
            main, ["-q", "--json", str(tmp_path / "out.json"), "--config", str(config), "--only", "SV-13,SV-12", "ref"]
        )
        assert code == 0
        report = json.loads((tmp_path / "out.json").read_text())
        assert report["revisions"] == ["2026-07-28"]  # the pin: modern only
        assert await trio.to_thread.run_sync(main, ["-q", "--config", str(config), "bad"]) == 2


def test_stdio_server_from_mcp_json_runs_with_its_env(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    command, *args = reference_argv()
    config.write_text(json.dumps({"servers": {"ref": {"command": command, "args": args, "env": {"A": "1"}}}}))
    assert main(["-q", "--config", str(config), "--only", "SV-12", "--revision", "2025-11-25", "ref"]) == 0


def test_call_tools_option_reaches_the_run(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["-q", "--json", str(out), "--only", "SV-30", "--revision", "2025-11-25", "--call-tool", "add"]) == 0
    assert [r["outcome"] for r in json.loads(out.read_text())["results"]] == ["pass"]


async def test_run_with_unknown_transport_names_is_refused_by_applicability() -> None:
    async with http_server(reference_argv()) as url:
        outcome = await run(Target(url=url, transport="http"), revisions=["2025-11-25"], only=["SV-01", "HS-01"])
    assert {(r.id, r.status, r.message) for r in outcome.results} == {
        ("SV-01", "skipped", "applies to stdio only"),
        ("HS-01", "skipped", "applies to the 2024-11-05 HTTP+SSE transport only"),
    }
