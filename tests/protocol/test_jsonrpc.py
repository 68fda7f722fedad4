"""classify() and the encoders: JSON-RPC 2.0 as MCP uses it (JR-01, JR-02, JR-07..JR-09, JR-21)."""

from __future__ import annotations

import json

import msgspec
import pytest

from mcpwire.protocol import Batch, ErrorResponse, Notification, NotProtocol, Request, Response, classify
from mcpwire.protocol.jsonrpc import (
    answer_id,
    decode_json,
    encode_error,
    encode_json,
    encode_notification,
    encode_request,
    encode_result,
)
from mcpwire.protocol.types import Implementation


def raw(value: msgspec.Raw) -> object:
    return decode_json(value)


# -- each kind ---------------------------------------------------------------------------------


def test_request() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":7,"method":"roots/list","params":{"a":[1,2]}}')
    assert isinstance(message, Request)
    assert (message.id, message.method) == (7, "roots/list")
    assert bytes(message.params) == b'{"a":[1,2]}'  # kept raw, byte for byte


def test_request_without_params_has_empty_raw() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":"p","method":"ping"}')
    assert isinstance(message, Request)
    assert not message.params


def test_notification() -> None:
    """JR-07: a message with a method and no id is a notification."""
    message = classify(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}')
    assert isinstance(message, Notification)
    assert message.method == "notifications/progress"
    assert raw(message.params) == {"progress": 1}


def test_result() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')
    assert isinstance(message, Response)
    assert message.id == 1
    assert raw(message.result) == {"tools": []}


def test_result_may_be_null_for_jsonrpc() -> None:
    """JSON-RPC allows any result value; the method layer decides whether it fits."""
    message = classify(b'{"jsonrpc":"2.0","id":1,"result":null}')
    assert isinstance(message, Response)
    assert raw(message.result) is None


def test_error_with_id_and_data() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32022,"message":"no","data":{"supported":["x"]}}}')
    assert isinstance(message, ErrorResponse)
    assert (message.id, message.code, message.message) == (3, -32022, "no")
    assert message.data_value() == {"supported": ["x"]}


def test_error_without_data() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}')
    assert isinstance(message, ErrorResponse)
    assert message.data_value() is None


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
    ],
    ids=["absent", "null"],
)
def test_error_without_id(line: bytes) -> None:
    """JR-09: an error may lack an id when the peer could not read ours."""
    message = classify(line)
    assert isinstance(message, ErrorResponse)
    assert message.id is None
    assert message.code == -32700


def test_error_data_may_be_any_json() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":[null,"s",2.5]}}')
    assert isinstance(message, ErrorResponse)
    assert message.data_value() == [None, "s", 2.5]


def test_batch_of_every_kind() -> None:
    """JR-21: a 2025-03-26 batch; each element classified on its own."""
    message = classify(
        b'[{"jsonrpc":"2.0","id":1,"result":{}},'
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{}},'
        b'{"jsonrpc":"2.0","id":"r","method":"ping"},'
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}},'
        b'{"level":"info"}]'
    )
    assert isinstance(message, Batch)
    kinds = [type(m) for m in message.messages]
    assert kinds == [Response, Notification, Request, ErrorResponse, NotProtocol]


@pytest.mark.parametrize("line", [b"[]", b" [ ] "])
def test_empty_batch_is_not_protocol(line: bytes) -> None:
    message = classify(line)
    assert isinstance(message, NotProtocol)
    assert message.reason == "an empty batch"


def test_batch_with_a_non_object_element_is_not_protocol() -> None:
    message = classify(b'[{"jsonrpc":"2.0","method":"a"},1]')
    assert isinstance(message, NotProtocol)


@pytest.mark.parametrize(
    "line",
    [b"1", b'"text"', b"null", b"true", b"", b"   ", b"Server started on stdio", b"\x00\x01", b"\xff\xfe{"],
    ids=["number", "string", "null", "bool", "empty", "spaces", "banner", "binary", "bad-bytes"],
)
def test_non_object_is_not_protocol(line: bytes) -> None:
    """ST-08: banners and stray output are data, never an exception."""
    message = classify(line)
    assert isinstance(message, NotProtocol)
    assert message.line == line
    assert message.reason == "not a JSON object or array"


@pytest.mark.parametrize(
    "line",
    [
        b'{"level":"info","msg":"listening","id":1}',
        b'{"jsonrpc":"1.0","id":1,"result":{}}',
        b'{"jsonrpc":2.0,"id":1,"result":{}}',
        b'{"id":1,"method":"ping"}',
    ],
    ids=["log-record", "version-1.0", "number-version", "no-jsonrpc"],
)
def test_json_without_jsonrpc_2_is_not_protocol(line: bytes) -> None:
    """JR-01: ``"jsonrpc": "2.0"`` on every message; a JSON log line is not a message."""
    message = classify(line)
    assert isinstance(message, NotProtocol)
    assert message.line == line


def test_log_record_reason() -> None:
    message = classify(b'{"level":"info","msg":"hi"}')
    assert isinstance(message, NotProtocol)
    assert message.reason == 'no "jsonrpc": "2.0" member'


def test_request_with_null_id_is_not_protocol() -> None:
    """JR-02: "Unlike base JSON-RPC, the ID MUST NOT be null"."""
    message = classify(b'{"jsonrpc":"2.0","id":null,"method":"ping"}')
    assert isinstance(message, NotProtocol)
    assert message.reason == "a request with a null id (ids must be strings or integers)"


@pytest.mark.parametrize("id_json", [b"1.5", b"1.0", b"1e3", b"true", b"[1]", b'{"a":1}'])
def test_ids_that_are_not_strings_or_integers(id_json: bytes) -> None:
    """JR-02: ids are strings or integers."""
    message = classify(b'{"jsonrpc":"2.0","id":' + id_json + b',"method":"ping"}')
    assert isinstance(message, NotProtocol)


def test_result_with_null_id_is_not_protocol() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":null,"result":{}}')
    assert isinstance(message, NotProtocol)
    assert message.reason == "a result without an id"


def test_result_without_id_is_not_protocol() -> None:
    message = classify(b'{"jsonrpc":"2.0","result":{}}')
    assert isinstance(message, NotProtocol)


def test_both_result_and_error() -> None:
    """JR-08: "A response MUST NOT set both"."""
    message = classify(b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}')
    assert isinstance(message, NotProtocol)
    assert message.reason == "a response with both result and error"


@pytest.mark.parametrize("member", [b'"result":{}', b'"error":{"code":1,"message":"m"}'])
def test_method_with_result_or_error(member: bytes) -> None:
    message = classify(b'{"jsonrpc":"2.0","id":1,"method":"x",' + member + b"}")
    assert isinstance(message, NotProtocol)
    assert message.reason == "a message with both a method and a result or error"


@pytest.mark.parametrize(
    "error",
    [
        b"null",
        b'"boom"',
        b"{}",
        b'{"code":-1}',
        b'{"message":"m"}',
        b'{"code":1.5,"message":"m"}',
        b'{"code":"-32601","message":"m"}',
        b'{"code":-1,"message":7}',
    ],
)
def test_malformed_error_object(error: bytes) -> None:
    """JR-08: ``error.code`` is an integer and ``error.message`` a string."""
    message = classify(b'{"jsonrpc":"2.0","id":1,"error":' + error + b"}")
    assert isinstance(message, NotProtocol)
    assert message.reason.startswith("a malformed error object: ")


def test_neither_request_nor_response() -> None:
    message = classify(b'{"jsonrpc":"2.0","id":1}')
    assert isinstance(message, NotProtocol)
    assert message.reason == "neither a request, a notification nor a response"


@pytest.mark.parametrize(
    "line",
    [b'{"jsonrpc":"2.0","method":"x"', b'{"jsonrpc":"2.0","method":"x"} trailing', b"[{]", b"{,}"],
)
def test_invalid_json_is_not_protocol(line: bytes) -> None:
    message = classify(line)
    assert isinstance(message, NotProtocol)
    assert message.reason.startswith("not a JSON-RPC message: ")


def test_surrounding_whitespace_is_accepted() -> None:
    assert isinstance(classify(b' \t{"jsonrpc":"2.0","method":"x"} \r\n'), Notification)


def test_unknown_members_are_ignored() -> None:
    """JR-11: schemas are open."""
    message = classify(b'{"jsonrpc":"2.0","id":1,"result":{},"extra":{"deep":[1]}}')
    assert isinstance(message, Response)


# -- ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_id",
    [0, 1, -1, -(2**63), 2**63 - 1, 2**64 - 1, 2**64, 10**30, -(10**30)],
)
def test_big_and_negative_integer_ids(request_id: int) -> None:
    """JR-02: any integer is an id; big ones keep every digit."""
    line = b'{"jsonrpc":"2.0","id":%d,"result":{}}' % request_id
    message = classify(line)
    assert isinstance(message, Response)
    assert message.id == request_id and type(message.id) is int


@pytest.mark.parametrize("request_id", ["", "1", "abc", "идентификатор", "🦀-42", "a\u2028b", 'q"uote\\', "\x00"])
def test_unicode_string_ids(request_id: str) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode()
    message = classify(line)
    assert isinstance(message, Request)
    assert message.id == request_id and type(message.id) is str


def test_ids_keep_their_type() -> None:
    """JR-05: ``1`` is not ``"1"``."""
    number = classify(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    text = classify(b'{"jsonrpc":"2.0","id":"1","result":{}}')
    assert isinstance(number, Response) and isinstance(text, Response)
    assert type(number.id) is int and type(text.id) is str
    assert number.id != text.id


# -- robustness (classification is total) ------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"a\xff"}',
        b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","result":{}}',
        b'{"jsonrpc":"2.\xc3","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"\xff"}}',
        b'[{"jsonrpc":"2.0","method":"\xc0\xaf"}]',
    ],
    ids=["method", "id", "jsonrpc", "error-message", "batch"],
)
def test_invalid_utf8_is_not_protocol(line: bytes) -> None:
    """ST-02: messages MUST be UTF-8; anything else is NotProtocol, never an exception."""
    assert isinstance(classify(line), NotProtocol)


@pytest.mark.parametrize(
    "member",
    [b'"method":"x","params"', b'"id":1,"result"', b'"id":1,"error":{"code":1,"message":"m","data"'],
    ids=["params", "result", "error-data"],
)
def test_deeply_nested_json_is_not_an_exception(member: bytes) -> None:
    """A hostile server's deeply nested value is data (NotProtocol or a message), not a crash."""
    depth = 100_000
    close = b"}" if member.endswith(b'"data"') else b""
    line = b'{"jsonrpc":"2.0",' + member + b":" + b"[" * depth + b"]" * depth + close + b"}"
    message = classify(line)
    assert isinstance(message, NotProtocol)
    assert message.reason == "not a JSON-RPC message: nested too deeply"


def test_deep_nesting_at_the_top_level_is_not_protocol() -> None:
    assert isinstance(classify(b"[" * 100_000 + b"]" * 100_000), NotProtocol)


# -- encoding ----------------------------------------------------------------------------------


def compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_encode_request_exact_bytes() -> None:
    """JR-01/ST-03: compact, one line, ``jsonrpc`` first."""
    assert encode_request(1, "tools/list") == b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    assert encode_request("a", "tools/call", {"name": "echo", "arguments": {}}) == (
        b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{}}}'
    )


def test_encode_request_keeps_empty_params() -> None:
    """``params=None`` omits the member; an empty object is kept."""
    assert encode_request(2, "x", {}) == b'{"jsonrpc":"2.0","id":2,"method":"x","params":{}}'


def test_encode_notification_exact_bytes() -> None:
    assert encode_notification("notifications/initialized") == b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert encode_notification("notifications/cancelled", {"requestId": 3, "reason": "timeout"}) == (
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"timeout"}}'
    )


def test_encode_result_exact_bytes() -> None:
    assert encode_result(5, {}) == b'{"jsonrpc":"2.0","id":5,"result":{}}'
    assert encode_result("s", {"roots": []}) == b'{"jsonrpc":"2.0","id":"s","result":{"roots":[]}}'


def test_encode_error_exact_bytes() -> None:
    assert encode_error(4, -32601, "Method not found") == (
        b'{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found"}}'
    )
    assert encode_error(None, -32700, "Parse error", {"at": 3}) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"at":3}}}'
    )


NASTY = {
    "newline": "a\nb\r\nc",
    "separators": "\u2028\u2029\u0085",
    "controls": "\x00\x1c\x1f\x7f",
    "quotes": '"\\/',
    "emoji": "🦀",
    "nested": [{"k": [1, 2.5, None, True, False]}],
    "big": 2**70,
    "negative": -(2**40),
}


@pytest.mark.parametrize("request_id", [0, 1, -5, 2**64 + 1, "", "1", "ид"])
def test_request_round_trips(request_id: int | str) -> None:
    payload = encode_request(request_id, "tools/call", NASTY)
    assert b"\n" not in payload and b"\r" not in payload  # ST-03
    assert payload == compact({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": NASTY})
    message = classify(payload)
    assert isinstance(message, Request)
    assert message.id == request_id and type(message.id) is type(request_id)
    assert message.method == "tools/call"
    assert raw(message.params) == NASTY


def test_notification_round_trips() -> None:
    payload = encode_notification("notifications/message", NASTY)
    assert b"\n" not in payload
    message = classify(payload)
    assert isinstance(message, Notification)
    assert raw(message.params) == NASTY


@pytest.mark.parametrize("request_id", [7, "7"])
def test_result_round_trips(request_id: int | str) -> None:
    payload = encode_result(request_id, NASTY)
    assert b"\n" not in payload
    message = classify(payload)
    assert isinstance(message, Response)
    assert message.id == request_id and type(message.id) is type(request_id)
    assert raw(message.result) == NASTY


@pytest.mark.parametrize("request_id", [9, "9", None])
def test_error_round_trips(request_id: int | str | None) -> None:
    payload = encode_error(request_id, -32603, "line one\nline two", NASTY)
    assert b"\n" not in payload
    message = classify(payload)
    assert isinstance(message, ErrorResponse)
    assert message.id == request_id
    assert (message.code, message.message) == (-32603, "line one\nline two")
    assert message.data_value() == NASTY


def test_encode_json_handles_structs() -> None:
    """Structs encode with their wire names and without defaults."""
    assert encode_json(Implementation(name="n", version="1", website_url="https://x")) == (
        b'{"name":"n","version":"1","websiteUrl":"https://x"}'
    )


# -- answers that cannot be decoded still name their request ------------------------------------

_DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":5,"result":' + _DEEP + b"}", 5),
        (b'{"jsonrpc":"2.0","result":{"s":"]}\\"[{","v":' + _DEEP + b'},"id":"a\\u0042"}', "aB"),
        (b' { "id" : -7 , "error" : ' + _DEEP + b" } ", -7),
        (b'{"jsonrpc":"2.0","id":9,"result":' + b"[" * 100_000, 9),  # cut short after the id
        (b'{"jsonrpc":"2.0","method":"m","params":' + _DEEP + b',"id":1}', None),  # a request
        (b'{"jsonrpc":"2.0","result":' + _DEEP + b"}", None),  # no id
        (b'{"jsonrpc":"2.0","id":null,"error":' + _DEEP + b"}", None),
        (b'{"jsonrpc":"2.0","id":1.5,"result":' + _DEEP + b"}", None),
        (b'{"jsonrpc":"2.0","id":true,"result":' + _DEEP + b"}", None),
        (b'{"jsonrpc" "2.0","id":1,"result":' + _DEEP + b"}", None),  # not JSON
        (b"[" + _DEEP + b"]", None),
    ],
)
def test_an_undecodable_answer_still_names_its_request(data: bytes, expected: object) -> None:
    message = classify(data)
    assert isinstance(message, NotProtocol)
    assert message.answer_id == expected
    assert answer_id(data) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"m"}}', 4),
        (b'{"jsonrpc":"2.0","id":"x","error":{"code":"not a number"}}', "x"),
        (b'{"jsonrpc":"2.0","error":{"code":"not a number"}}', None),
        (b'{"id":4,"result":{}}', None),  # no "jsonrpc": "2.0": noise, not an answer
    ],
)
def test_a_malformed_answer_names_its_request(data: bytes, expected: object) -> None:
    message = classify(data)
    assert isinstance(message, NotProtocol)
    assert message.answer_id == expected
