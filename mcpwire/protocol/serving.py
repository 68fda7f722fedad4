"""The server side's rules, without I/O: what an incoming message is, and whether it may be served.

Theory of operation: a server reads a JSON value and must decide, before any handler runs, what
it is and which era's rules apply. :func:`decode` turns bytes into a JSON value (msgspec first,
the standard library for what msgspec refuses but JSON allows: lone surrogate escapes, numbers
past float range); :func:`classify_incoming` maps the value to exactly one of
:class:`InRequest`, :class:`InNotification`, :class:`InResponse` or :class:`Invalid` (which
carries the error answer to send, if any). Nothing raises on bad input: a malformed message is
data, answered with a precise JSON-RPC error.

The era of a request is a question of its ``_meta`` and method (:func:`is_modern_request`); a
modern request is admitted by :func:`modern_meta`, which checks the fields every 2026-07-28
request must carry; a legacy ``initialize`` negotiates with :func:`negotiate`. For Streamable
HTTP, :func:`check_modern_headers` holds a 2026-07-28 POST's headers against its body (-32020).
Every refusal is a :class:`Refusal` (code, message, data), which the server turns into an error
answer; its messages say what was expected and what came.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

import msgspec

from .types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
)
from .versions import LATEST_LEGACY, LEGACY_REVISIONS, MODERN_REVISIONS

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LOG_LEVELS",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "MODERN_ONLY_METHODS",
    "MODERN_STATUS",
    "NAME_FIELDS",
    "PARSE_ERROR",
    "HEADER_MISMATCH",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "InNotification",
    "InRequest",
    "InResponse",
    "Incoming",
    "Invalid",
    "ModernMeta",
    "Refusal",
    "check_modern_headers",
    "classify_incoming",
    "decode",
    "decode_header_value",
    "encode",
    "error_message",
    "is_modern_request",
    "is_request_id",
    "modern_meta",
    "negotiate",
]

JSON: TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"
JSONObject: TypeAlias = dict[str, object]
RequestId: TypeAlias = int | str

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# 2025-11-25 server/resources: "Resource not found: -32002" (legacy only; 2026-07-28 uses -32602).
RESOURCE_NOT_FOUND: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: RFC 5424 severities, least severe first.
LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: Methods that exist only in 2026-07-28: a request for one is modern whatever its ``_meta``.
MODERN_ONLY_METHODS: Final = frozenset({"server/discover", "subscriptions/listen"})
#: 2026-07-28 streamable-http: the error codes whose answers carry an HTTP status of their own.
MODERN_STATUS: Final[Mapping[int, int]] = {
    METHOD_NOT_FOUND: 404,
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
}
#: 2026-07-28 §Standard Headers: the body field Mcp-Name mirrors, by method; SEP-2663 §Streamable
#: HTTP: Routing Headers adds the tasks methods ("the client MUST set the Mcp-Name header ... to
#: the value of params.taskId").
NAME_FIELDS: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_SENTINEL: Final = re.compile(r"^=\?base64\?(.*)\?=$", re.S)
_TCHAR: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_DECODER: Final = msgspec.json.Decoder()
_ENCODER: Final = msgspec.json.Encoder()


class Refusal(Exception):
    """A request the server will not serve: the JSON-RPC error to answer it with."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


# -- JSON ------------------------------------------------------------------------------------


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def decode(data: bytes | str) -> object:
    """One JSON text as Python values.

    Raises:
        ValueError: not JSON (or nested too deeply to decode); the message says why.
    """
    try:
        return _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as first:
        # msgspec refuses two things JSON allows: lone surrogate escapes ("\ud800", which a
        # client may send and a server must survive) and numbers beyond float range
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            return json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise ValueError("the JSON text is nested too deeply") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"invalid UTF-8 ({exc.reason})") from None
        except ValueError:
            raise ValueError(str(first)) from None


def encode(message: object) -> bytes:
    """One compact JSON text in UTF-8 (a lone surrogate falls back to an escape)."""
    try:
        return _ENCODER.encode(message)
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def error_message(request_id: RequestId | None, code: int, message: str, data: object = None) -> JSONObject:
    """A JSON-RPC error answer."""
    error: JSONObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


# -- classification ----------------------------------------------------------------------------


def is_request_id(value: object) -> bool:
    """2025-11-25 basic: "Requests MUST include a string or integer ID" ... "MUST NOT be null"."""
    return isinstance(value, str | int) and not isinstance(value, bool)


class InRequest(msgspec.Struct, frozen=True):
    """A request from the client: answered exactly once (unless cancelled)."""

    id: RequestId
    method: str
    params: JSONObject


class InNotification(msgspec.Struct, frozen=True):
    """A notification from the client: never answered."""

    method: str
    params: JSONObject


class InResponse(msgspec.Struct, frozen=True):
    """The client's answer to one of the server's requests (a ``result`` or an ``error`` member)."""

    id: object
    message: JSONObject


class Invalid(msgspec.Struct, frozen=True):
    """Not a message that can be served; ``answer`` is the error to send (None: nothing)."""

    answer: JSONObject | None


Incoming: TypeAlias = InRequest | InNotification | InResponse | Invalid


def classify_incoming(message: object) -> Incoming:
    """What one decoded message (not a batch) is; total, never raises."""
    if not isinstance(message, dict):
        return Invalid(error_message(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object"))
    raw_id = message.get("id")
    error_id = raw_id if is_request_id(raw_id) else None
    if message.get("jsonrpc") != "2.0":
        return Invalid(error_message(error_id, INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be \"2.0\""))
    if "method" in message:
        method = message["method"]
        if not isinstance(method, str):
            if "id" not in message:
                return Invalid(None)
            return Invalid(error_message(error_id, INVALID_REQUEST, "Invalid Request: 'method' must be a string"))
        params = message.get("params", {})
        if "id" not in message:
            return InNotification(method, params if isinstance(params, dict) else {})
        if not is_request_id(raw_id):
            return Invalid(error_message(None, INVALID_REQUEST, "Invalid Request: 'id' must be a string or an integer"))
        if not isinstance(params, dict):
            return Invalid(error_message(raw_id, INVALID_PARAMS, "Invalid params: 'params' must be an object"))
        return InRequest(raw_id, method, params)  # type: ignore[arg-type]
    if "result" in message or "error" in message:
        return InResponse(raw_id, message)
    return Invalid(error_message(error_id, INVALID_REQUEST, "Invalid Request: expected 'method', 'result' or 'error'"))


def is_modern_request(method: str, params: Mapping[str, object]) -> bool:
    """A dual-era server serves this request statelessly, as 2026-07-28."""
    if method in MODERN_ONLY_METHODS:
        return True
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


# -- admission -----------------------------------------------------------------------------------


class ModernMeta(msgspec.Struct, frozen=True):
    """What a 2026-07-28 request declares about its client in ``params._meta``."""

    version: str
    capabilities: JSONObject
    client_info: JSONObject
    log_level: str | None


def modern_meta(params: Mapping[str, object], supported: tuple[str, ...] = MODERN_REVISIONS) -> ModernMeta:
    """Admit one 2026-07-28 request by its ``_meta``.

    Raises:
        Refusal: -32602 for a missing or malformed field, -32022 for a version not in
            ``supported`` (with ``data.supported`` and ``data.requested``).
    """
    # 2026-07-28 basic: "A request missing any required field is malformed; the server MUST
    # reject it with JSON-RPC error code -32602 (Invalid params)."
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_PROTOCOL_VERSION not in meta:
        raise Refusal(INVALID_PARAMS, f"Invalid params: _meta must carry {META_PROTOCOL_VERSION!r}")
    version = meta[META_PROTOCOL_VERSION]
    if not isinstance(version, str):
        raise Refusal(INVALID_PARAMS, f"Invalid params: _meta {META_PROTOCOL_VERSION!r} must be a string")
    if version not in supported:
        raise Refusal(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(supported), "requested": version},
        )
    caps = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        raise Refusal(INVALID_PARAMS, f"Invalid params: _meta must carry {META_CLIENT_CAPABILITIES!r}, an object")
    info = meta.get(META_CLIENT_INFO, {})
    if not isinstance(info, dict):
        raise Refusal(INVALID_PARAMS, f"Invalid params: _meta {META_CLIENT_INFO!r} must be an object")
    level = meta.get(META_LOG_LEVEL)
    # 2026-07-28 server/utilities/logging: an unrecognized level "SHOULD" get -32602.
    if level is not None and level not in LOG_LEVELS:
        raise Refusal(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
    return ModernMeta(version, caps, info, level)


def negotiate(requested: str) -> str:
    """The revision a legacy server answers ``initialize`` with.

    2025-11-25 basic/lifecycle: "If the server supports the requested protocol version, it MUST
    respond with the same version. Otherwise, the server MUST respond with another protocol
    version it supports. This SHOULD be the latest version supported by the server."
    """
    return requested if requested in LEGACY_REVISIONS else LATEST_LEGACY


# -- 2026-07-28 Streamable HTTP headers -----------------------------------------------------------


def decode_header_value(value: str) -> str:
    """A header value with the base64 sentinel decoded (2026-07-28 §Value Encoding).

    Raises:
        ValueError: the sentinel's payload is not valid base64 of UTF-8.
    """
    value = value.strip(" \t")
    match = _SENTINEL.match(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise ValueError(f"{value!r} is not valid base64") from None


def _header_text(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def check_modern_headers(
    headers: Mapping[str, str],
    message: Mapping[str, object],
    input_schema: Callable[[str], Mapping[str, object] | None],
) -> None:
    """2026-07-28 §Server Validation: the headers of one POSTed request against its body.

    ``headers`` maps lower-case names to values; ``input_schema(tool)`` is the inputSchema of a
    tool (None when unknown), whose ``x-mcp-header`` properties must be mirrored.

    Raises:
        Refusal: -32020 for a header missing or not matching the body; -32602 for a body whose
            ``_meta`` lacks a required field.
    """
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise Refusal(HEADER_MISMATCH, "Header mismatch: the MCP-Protocol-Version header is missing")
    if isinstance(meta, dict) and META_PROTOCOL_VERSION in meta and meta[META_PROTOCOL_VERSION] != version.strip():
        raise Refusal(
            HEADER_MISMATCH,
            f"Header mismatch: MCP-Protocol-Version {version!r} does not match _meta {meta[META_PROTOCOL_VERSION]!r}",
        )
    method = message.get("method")
    sent_method = headers.get("mcp-method")
    if sent_method is None:
        raise Refusal(HEADER_MISMATCH, "Header mismatch: the Mcp-Method header is missing")
    if sent_method.strip(" \t") != method:
        raise Refusal(HEADER_MISMATCH, f"Header mismatch: Mcp-Method {sent_method!r} does not match {method!r}")
    # the _meta rules (basic/index §_meta): a request missing a required field is -32602 + 400
    if not isinstance(meta, dict) or not isinstance(meta.get(META_PROTOCOL_VERSION), str):
        raise Refusal(INVALID_PARAMS, f"Invalid params: _meta must carry {META_PROTOCOL_VERSION!r}")
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
        raise Refusal(INVALID_PARAMS, f"Invalid params: _meta must carry {META_CLIENT_CAPABILITIES!r}, an object")
    assert isinstance(params, dict)  # a dict _meta implies dict params
    field = NAME_FIELDS.get(str(method))
    if field is not None and isinstance(params.get(field), str):
        _check_one(headers, "Mcp-Name", params[field])
    if method == "tools/call" and isinstance(params.get("name"), str):
        schema = input_schema(params["name"])
        properties = schema.get("properties") if schema is not None else None
        arguments = params.get("arguments")
        if isinstance(properties, dict) and isinstance(arguments, dict):
            for prop, spec in properties.items():
                header = spec.get("x-mcp-header") if isinstance(spec, dict) else None
                value = arguments.get(prop)
                if isinstance(header, str) and _TCHAR.match(header) and value is not None:
                    # "Server MUST NOT expect the header" when the value is null or absent
                    _check_one(headers, f"Mcp-Param-{header}", _header_text(value), shown=value)


def _check_one(headers: Mapping[str, str], name: str, expected: str | None, *, shown: object = None) -> None:
    sent = headers.get(name.lower())
    if sent is None:
        raise Refusal(HEADER_MISMATCH, f"Header mismatch: the {name} header is missing")
    try:
        decoded = decode_header_value(sent)
    except ValueError as exc:
        raise Refusal(HEADER_MISMATCH, f"Header mismatch: {name} {exc}") from None
    if decoded != expected:
        want = expected if shown is None else shown
        raise Refusal(HEADER_MISMATCH, f"Header mismatch: {name} {sent!r} does not match {want!r}")
