"""JSON-RPC 2.0 classification and encoding.

Theory of operation: one line (or HTTP body, or SSE ``data``) in, one message value out. The
envelope is decoded once with a prebuilt msgspec decoder; ``params``, ``result`` and ``error.data``
stay :class:`msgspec.Raw` slices of the input so the layer that knows the method decodes them
straight into their types, and a large result is never turned into Python objects twice.

Classification is total: every input maps to exactly one of :class:`Request`,
:class:`Notification`, :class:`Response`, :class:`ErrorResponse`, :class:`Batch` or
:class:`NotProtocol`. Nothing raises, so a reader loop needs no ``try``; a line a server printed
by mistake (a banner, a JSON log record without ``"jsonrpc": "2.0"``) is :class:`NotProtocol`.
Rules: JR-01 (``jsonrpc: "2.0"``), JR-02 (ids are strings or integers, never null, on requests),
JR-08 (exactly one of ``result``/``error``, integer codes), JR-09 (an error may lack an id).
"""

from __future__ import annotations

import re
from typing import Final, TypeAlias

import msgspec
from msgspec import UNSET, Raw, UnsetType

__all__ = [
    "DECODE_ERRORS",
    "answer_id",
    "Batch",
    "ErrorResponse",
    "Message",
    "NotProtocol",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "classify",
    "decode_json",
    "encode_error",
    "encode_json",
    "encode_notification",
    "encode_request",
    "encode_result",
]

RequestId: TypeAlias = int | str

_EMPTY: Final = Raw()


class Request(msgspec.Struct, frozen=True):
    """A request from the peer: it must be answered exactly once (JR-12)."""

    id: RequestId
    method: str
    params: Raw = _EMPTY  # empty when absent


class Notification(msgspec.Struct, frozen=True):
    """A notification: never answered (JR-07)."""

    method: str
    params: Raw = _EMPTY


class Response(msgspec.Struct, frozen=True):
    """A successful answer to one of our requests."""

    id: RequestId
    result: Raw


class ErrorResponse(msgspec.Struct, frozen=True):
    """An error answer. ``id`` is ``None`` when the peer could not read our id (JR-09)."""

    id: RequestId | None
    code: int
    message: str
    data: Raw = _EMPTY

    def data_value(self) -> object:
        """The ``data`` member decoded (``None`` when absent or not valid JSON)."""
        if not self.data:
            return None
        try:
            return msgspec.json.decode(self.data)
        except (msgspec.DecodeError, ValueError, RecursionError):  # invalid UTF-8, deep nesting
            return None


class NotProtocol(msgspec.Struct, frozen=True):
    """Input that is not a JSON-RPC message; ``reason`` says why.

    ``answer_id`` is set when the input still reads as an answer (a ``"jsonrpc": "2.0"`` object
    with ``result`` or ``error``, or an object too deeply nested or otherwise undecodable whose
    top-level ``id`` can be found): the request it answers can then fail at once instead of
    waiting for its timeout.
    """

    line: bytes
    reason: str
    answer_id: RequestId | None = None


class Batch(msgspec.Struct, frozen=True):
    """A JSON array of messages (2025-03-26 only; JR-21/JR-22). Elements are classified."""

    messages: tuple[Request | Notification | Response | ErrorResponse | NotProtocol, ...]


Message: TypeAlias = Request | Notification | Response | ErrorResponse | Batch | NotProtocol


class _ErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Raw = _EMPTY


class _Envelope(msgspec.Struct):
    jsonrpc: str | UnsetType = UNSET
    id: RequestId | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: Raw = _EMPTY
    result: Raw = _EMPTY
    error: Raw = _EMPTY


_envelope = msgspec.json.Decoder(_Envelope)
_envelopes = msgspec.json.Decoder(list[_Envelope])
_error_object = msgspec.json.Decoder(_ErrorObject)
_any = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def _first_byte(data: bytes) -> int:
    for b in data:
        if b not in b" \t\r\n":
            return b
    return -1


# msgspec reports malformed JSON as DecodeError, but invalid UTF-8 inside a string member
# surfaces as UnicodeDecodeError (a ValueError) and nesting deeper than the interpreter's
# recursion limit as RecursionError. ST-02: "messages MUST be UTF-8 encoded"; all three are input
# errors, so classification stays total.
DECODE_ERRORS: Final = (msgspec.DecodeError, ValueError, RecursionError)
_BAD_INPUT: Final = DECODE_ERRORS


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not a JSON-RPC message: invalid UTF-8 at byte {exc.start}"
    if isinstance(exc, RecursionError):
        return "not a JSON-RPC message: nested too deeply"
    return f"not a JSON-RPC message: {exc}"


def _from_envelope(env: _Envelope, line: bytes) -> Request | Notification | Response | ErrorResponse | NotProtocol:
    if env.jsonrpc != "2.0":
        return NotProtocol(line, 'no "jsonrpc": "2.0" member')
    msg_id = env.id
    answer_id = msg_id if isinstance(msg_id, int | str) and not isinstance(msg_id, bool) else None
    if not isinstance(env.method, UnsetType):
        if env.result or env.error:
            return NotProtocol(line, "a message with both a method and a result or error", answer_id)
        if isinstance(msg_id, UnsetType):
            return Notification(env.method, env.params)
        if msg_id is None:
            return NotProtocol(line, "a request with a null id (ids must be strings or integers)")
        return Request(msg_id, env.method, env.params)
    if env.error:
        if env.result:
            return NotProtocol(line, "a response with both result and error", answer_id)
        try:
            err = _error_object.decode(env.error)
        except _BAD_INPUT as exc:
            return NotProtocol(line, f"a malformed error object: {exc}", answer_id)
        rid = None if isinstance(msg_id, UnsetType) else msg_id
        return ErrorResponse(rid, err.code, err.message, err.data)
    if env.result:
        if isinstance(msg_id, UnsetType) or msg_id is None:
            return NotProtocol(line, "a result without an id")
        return Response(msg_id, env.result)
    return NotProtocol(line, "neither a request, a notification nor a response")


def classify(data: bytes) -> Message:
    """Classifies one complete JSON text. Never raises."""
    first = data[0] if data and data[0] == 0x7B else _first_byte(data)
    if first == 0x7B:  # {
        try:
            env = _envelope.decode(data)
        except _BAD_INPUT as exc:
            return NotProtocol(data, _reason(exc), answer_id(data))
        rid = env.id
        if (  # the common case, a result, without the general path's call
            env.result
            and not env.error
            and env.jsonrpc == "2.0"
            and type(env.method) is UnsetType
            and rid is not None
            and type(rid) is not UnsetType
        ):
            return Response(rid, env.result)
        return _from_envelope(env, data)
    if first == 0x5B:  # [
        try:
            envs = _envelopes.decode(data)
        except _BAD_INPUT as exc:
            return NotProtocol(data, _reason(exc))
        if not envs:
            return NotProtocol(data, "an empty batch")
        return Batch(tuple(_from_envelope(e, data) for e in envs))
    return NotProtocol(data, "not a JSON object or array")


#: one token of the top level of a JSON object: a string, a structural character, or a scalar
_TOKEN: Final = re.compile(rb'\s*(?:("(?:[^"\\]|\\.)*")|([\[\]{}:,])|([^\s\[\]{}:,"]+))', re.DOTALL)
#: inside a nested value only strings and brackets matter
_NESTED: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_ANSWER_KEYS: Final = frozenset({b'"result"', b'"error"'})


def answer_id(data: bytes) -> RequestId | None:
    """The top-level ``id`` of a JSON object that the decoder refused (nested deeper than it
    recurses, invalid UTF-8 in some string), when the object has a ``result`` or ``error``
    member: the request it answers. ``None`` when that cannot be read.

    An iterative scan, so no depth of nesting can make it recurse: a nested value is skipped by
    counting brackets outside strings. It runs only on input the decoder already refused.
    """
    pos, end = 0, len(data)
    match = _TOKEN.match(data, pos)
    if match is None or match.group(2) != b"{":
        return None
    pos = match.end()
    found: RequestId | None = None
    has_id = is_answer = False
    key: bytes | None = None
    expect = "key"  # key -> colon -> value -> comma
    while pos < end:
        match = _TOKEN.match(data, pos)
        if match is None:
            return None
        pos = match.end()
        string, punct, scalar = match.groups()
        if expect == "key":
            if punct == b"}":
                break
            if string is None:
                return None
            key, expect = string, "colon"
        elif expect == "colon":
            if punct != b":":
                return None
            expect = "value"
        elif expect == "value":
            assert key is not None
            is_answer = is_answer or key in _ANSWER_KEYS
            if has_id and is_answer:
                return found  # no need to walk the (deep) rest
            if punct in (b"[", b"{"):
                pos = _skip_nested(data, pos)
                if pos < 0:
                    break  # cut short: what was read so far may still name the request
            elif key == b'"id"':
                has_id, found = True, _scalar_id(string, scalar)
            expect = "comma"
        else:
            if punct == b"}":
                break
            if punct != b",":
                return None
            expect = "key"
    return found if has_id and is_answer else None


def _skip_nested(data: bytes, pos: int) -> int:
    """The position after the array or object whose opening bracket ends before ``pos``;
    -1 when the input ends first."""
    depth = 1
    for match in _NESTED.finditer(data, pos):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
        elif token in (b"]", b"}"):
            depth -= 1
            if depth == 0:
                return match.end()
    return -1


def _scalar_id(string: bytes | None, scalar: bytes | None) -> RequestId | None:
    try:
        if string is not None:
            value = msgspec.json.decode(string)
            return value if isinstance(value, str) else None
        if scalar is not None and scalar.lstrip(b"-").isdigit():
            return int(scalar)
    except (msgspec.DecodeError, ValueError):
        pass
    return None


# -- encoding -------------------------------------------------------------------------------


# ``jsonrpc`` has no default: ``omit_defaults`` would drop it.
class _OutRequest(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: RequestId
    method: str
    params: object = None


class _OutNotification(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: object = None


class _OutResult(msgspec.Struct):
    jsonrpc: str
    id: RequestId
    result: object


class _OutErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: object = None


class _OutError(msgspec.Struct):
    jsonrpc: str
    id: RequestId | None
    error: _OutErrorObject


def encode_request(request_id: RequestId, method: str, params: object = None) -> bytes:
    """A request as compact JSON (no trailing newline). ``params=None`` omits the member."""
    return _encoder.encode(_OutRequest("2.0", request_id, method, params))


def encode_notification(method: str, params: object = None) -> bytes:
    return _encoder.encode(_OutNotification("2.0", method, params))


def encode_result(request_id: RequestId, result: object) -> bytes:
    return _encoder.encode(_OutResult("2.0", request_id, result))


def encode_error(request_id: RequestId | None, code: int, message: str, data: object = None) -> bytes:
    return _encoder.encode(_OutError("2.0", request_id, _OutErrorObject(code, message, data)))


def encode_json(value: object) -> bytes:
    """Any JSON-compatible value (or msgspec Struct) as compact JSON."""
    return _encoder.encode(value)


def decode_json(data: bytes | Raw) -> object:
    """Decodes JSON into plain Python values.

    Raises:
        msgspec.DecodeError: not JSON, invalid UTF-8 inside a string, or nested too deeply.
    """
    try:
        return _any.decode(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        if isinstance(exc, msgspec.DecodeError):
            raise
        raise msgspec.DecodeError(_reason(exc)) from exc
