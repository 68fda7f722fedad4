"""The server side's sans-I/O rules: decoding, classification, admission, negotiation, HTTP headers."""

from __future__ import annotations

import pytest

from mcpwire.protocol.serving import (
    InNotification,
    InRequest,
    InResponse,
    Invalid,
    ModernMeta,
    Refusal,
    check_modern_headers,
    classify_incoming,
    decode,
    decode_header_value,
    encode,
    error_message,
    is_modern_request,
    modern_meta,
    negotiate,
)

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def test_decode_accepts_what_json_allows_and_names_what_it_refuses() -> None:
    assert decode(b'{"a": [1, 2.5, null, true]}') == {"a": [1, 2.5, None, True]}
    assert decode('"\\ud800"') == "\ud800"  # a lone surrogate escape: msgspec refuses, JSON allows
    assert decode(b"1" * 30) == int("1" * 30)
    with pytest.raises(ValueError, match=r"^the JSON text is nested too deeply$"):
        decode(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ValueError, match=r"^invalid UTF-8 \(invalid start byte\)$"):
        decode(b'"\xff"')
    with pytest.raises(ValueError, match=r"^JSON is malformed: invalid character \(byte 0\)$"):
        decode(b"garbage")
    with pytest.raises(ValueError):
        decode(b"NaN")


def test_encode_is_compact_and_survives_lone_surrogates() -> None:
    assert encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert encode({"s": "\ud800"}) == b'{"s":"\\ud800"}'
    assert error_message(None, -32700, "Parse error: x") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: x"},
    }
    assert error_message(3, -32602, "bad", {"uri": "u"})["error"] == {
        "code": -32602,
        "message": "bad",
        "data": {"uri": "u"},
    }


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, InRequest(1, "ping", {})),
        ({"jsonrpc": "2.0", "id": "a", "method": "x", "params": {"k": 1}}, InRequest("a", "x", {"k": 1})),
        ({"jsonrpc": "2.0", "method": "notifications/x", "params": 5}, InNotification("notifications/x", {})),
        (
            {"jsonrpc": "2.0", "id": "srv-1", "result": {}},
            InResponse("srv-1", {"jsonrpc": "2.0", "id": "srv-1", "result": {}}),
        ),
        ({"jsonrpc": "2.0", "method": 7}, Invalid(None)),
    ],
)
def test_classify_incoming(message: object, expected: object) -> None:
    assert classify_incoming(message) == expected


@pytest.mark.parametrize(
    ("message", "answer_id", "text"),
    [
        ([1], None, "Invalid Request: a message must be a JSON object"),
        ({"jsonrpc": "1.0", "id": 4, "method": "ping"}, 4, "Invalid Request: 'jsonrpc' must be \"2.0\""),
        ({"jsonrpc": "2.0", "id": 4, "method": 7}, 4, "Invalid Request: 'method' must be a string"),
        (
            {"jsonrpc": "2.0", "id": None, "method": "ping"},
            None,
            "Invalid Request: 'id' must be a string or an integer",
        ),
        (
            {"jsonrpc": "2.0", "id": True, "method": "ping"},
            None,
            "Invalid Request: 'id' must be a string or an integer",
        ),
        ({"jsonrpc": "2.0", "id": 4}, 4, "Invalid Request: expected 'method', 'result' or 'error'"),
    ],
)
def test_invalid_requests_carry_their_error_answer(message: object, answer_id: object, text: str) -> None:
    item = classify_incoming(message)
    assert isinstance(item, Invalid)
    assert item.answer == {"jsonrpc": "2.0", "id": answer_id, "error": {"code": -32600, "message": text}}


def test_params_that_are_not_an_object_are_invalid_params() -> None:
    item = classify_incoming({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": [1]})
    assert item == Invalid(error_message(9, -32602, "Invalid params: 'params' must be an object"))


def test_the_era_of_a_request() -> None:
    assert is_modern_request("server/discover", {})
    assert is_modern_request("subscriptions/listen", {})
    assert is_modern_request("tools/list", {"_meta": META})
    assert not is_modern_request("tools/list", {"_meta": {"progressToken": 1}})
    assert not is_modern_request("initialize", {})


def test_modern_meta_admits_a_complete_request() -> None:
    meta = {**META, "io.modelcontextprotocol/clientInfo": {"name": "c"}, "io.modelcontextprotocol/logLevel": "debug"}
    assert modern_meta({"_meta": meta}) == ModernMeta(MODERN, {}, {"name": "c"}, "debug")
    assert modern_meta({"_meta": META}) == ModernMeta(MODERN, {}, {}, None)


@pytest.mark.parametrize(
    ("meta", "code", "text"),
    [
        (None, -32602, "Invalid params: _meta must carry 'io.modelcontextprotocol/protocolVersion'"),
        ({"io.modelcontextprotocol/protocolVersion": 7}, -32602, "Invalid params: _meta 'io.modelcontextprotocol/protocolVersion' must be a string"),  # noqa: E501
        ({**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}, -32022, "Unsupported protocol version"),
        ({"io.modelcontextprotocol/protocolVersion": MODERN}, -32602, "Invalid params: _meta must carry 'io.modelcontextprotocol/clientCapabilities', an object"),  # noqa: E501
        ({**META, "io.modelcontextprotocol/clientInfo": "x"}, -32602, "Invalid params: _meta 'io.modelcontextprotocol/clientInfo' must be an object"),  # noqa: E501
        ({**META, "io.modelcontextprotocol/logLevel": "loud"}, -32602, "Invalid params: unknown log level 'loud'"),
    ],
)  # fmt: skip
def test_modern_meta_refuses_precisely(meta: object, code: int, text: str) -> None:
    with pytest.raises(Refusal) as caught:
        modern_meta({} if meta is None else {"_meta": meta})
    assert (caught.value.code, caught.value.message) == (code, text)
    if code == -32022:
        assert caught.value.data == {"supported": [MODERN], "requested": "2099-01-01"}


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-06-18", "2025-06-18"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ],
)
def test_negotiation_echoes_a_known_legacy_revision_else_offers_the_latest(requested: str, answered: str) -> None:
    assert negotiate(requested) == answered


def test_header_values_decode_the_base64_sentinel() -> None:
    assert decode_header_value("  plain \t") == "plain"
    assert decode_header_value("=?base64?ZXUgd2VzdA==?=") == "eu west"
    with pytest.raises(ValueError, match=r"^'=\?base64\?\*\*\?=' is not valid base64$"):
        decode_header_value("=?base64?**?=")


def _call(arguments: dict[str, object]) -> dict[str, object]:
    params = {"name": "t", "arguments": arguments, "_meta": META}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "n": {}}}
GOOD = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "t", "mcp-param-region": "eu"}


def test_modern_headers_that_mirror_the_body_pass() -> None:
    check_modern_headers(GOOD, _call({"region": "eu"}), lambda name: SCHEMA)
    # "Server MUST NOT expect the header" when the argument is absent or null
    check_modern_headers(
        {k: v for k, v in GOOD.items() if k != "mcp-param-region"}, _call({"region": None}), lambda n: SCHEMA
    )


@pytest.mark.parametrize(
    ("headers", "text"),
    [
        ({"mcp-protocol-version": None}, "Header mismatch: the MCP-Protocol-Version header is missing"),
        ({"mcp-protocol-version": "2025-11-25"}, "Header mismatch: MCP-Protocol-Version '2025-11-25' does not match _meta '2026-07-28'"),  # noqa: E501
        ({"mcp-method": None}, "Header mismatch: the Mcp-Method header is missing"),
        ({"mcp-method": "tools/list"}, "Header mismatch: Mcp-Method 'tools/list' does not match 'tools/call'"),
        ({"mcp-name": None}, "Header mismatch: the Mcp-Name header is missing"),
        ({"mcp-name": "u"}, "Header mismatch: Mcp-Name 'u' does not match 't'"),
        ({"mcp-param-region": None}, "Header mismatch: the Mcp-Param-Region header is missing"),
        ({"mcp-param-region": "us"}, "Header mismatch: Mcp-Param-Region 'us' does not match 'eu'"),
        ({"mcp-param-region": "=?base64?!?="}, "Header mismatch: Mcp-Param-Region '=?base64?!?=' is not valid base64"),
    ],
)  # fmt: skip
def test_modern_headers_that_do_not_mirror_the_body_are_32020(headers: dict[str, str | None], text: str) -> None:
    sent = {k: v for k, v in {**GOOD, **headers}.items() if v is not None}
    with pytest.raises(Refusal) as caught:
        check_modern_headers(sent, _call({"region": "eu"}), lambda name: SCHEMA)
    assert (caught.value.code, caught.value.message) == (-32020, text)


def test_a_modern_post_without_capabilities_is_32602_after_the_header_checks() -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
    }
    with pytest.raises(Refusal) as caught:
        check_modern_headers({"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}, message, lambda n: None)
    assert caught.value.code == -32602
