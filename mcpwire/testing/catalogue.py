"""The reference catalogue: what both reference engines serve, standard library only.

The fixture names of the official conformance runner (``test_simple_text``, ``test://static-text``,
``test_simple_prompt``, the ``test_input_required_result_*`` tools of the 2026-07-28 scenarios...),
their contents, completions and prompts, the requests the fixture tools send the client, and the
small helpers that read its answers. :class:`~mcpwire.testing.everything.EverythingServer` (the
standard-library engine that the checker's broken fixtures subclass) and
:class:`~mcpwire.testing.reference.ReferenceServer` (the reference server, on :mod:`mcpwire.server`)
both serve it, so the two cannot drift apart; neither imports the other.

Like :mod:`mcpwire.testing.demo_server`, this module needs nothing but the standard library.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from mcpwire.testing.demo_server import (
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    V2025_03_26,
    JSONValue,
    b64_json,
    since,
    unb64_json,
)
from mcpwire.testing.tasks import TASKS_EXTENSION

__all__ = [
    "PNG_B64",
    "SIMPLE_PROMPT",
    "SIMPLE_TEXT",
    "STATIC_TEXT_URI",
    "MissingPromptArguments",
    "Refused",
    "fixture_contents",
    "fixture_prompt",
    "sort_answers",
    "with_fixture_tools",
]

_Obj = dict[str, Any]

SIMPLE_TEXT: Final = "This is a simple text response for testing."
STATIC_TEXT_URI: Final = "test://static-text"
STATIC_TEXT: Final = "This is the content of the static text resource."
STATIC_BINARY_URI: Final = "test://static-binary"
WATCHED_URI: Final = "test://watched-resource"
TEMPLATE_URI: Final = "test://template/{id}/data"
SIMPLE_PROMPT: Final = "This is a simple prompt for testing."
ERROR_TEXT: Final = "This tool intentionally returns an error for testing"
JSON_SCHEMA_TOOL: Final = "json_schema_2020_12_tool"
HEADER_TOOL: Final = "test_header_param"
#: seconds ``test_reconnection`` waits after closing its response stream
RECONNECT_PAUSE_S: Final = 0.3
LOG_STEP_S: Final = 0.05


def _png_1x1_red() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence(samples: int = 8) -> bytes:
    data = b"\x00\x00" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + (struct.pack("<I", len(data)) + data)
    )


PNG_B64: Final = base64.b64encode(_png_1x1_red()).decode()
WAV_B64: Final = base64.b64encode(_wav_silence()).decode()

_STRING: Final[_Obj] = {"type": "string"}
_NO_ARGS: Final[_Obj] = {"type": "object", "properties": {}}
_READ_ONLY: Final[_Obj] = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}

_JSON_SCHEMA_2020_12: Final[_Obj] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": _STRING, "city": _STRING},
        }
    },
    "properties": {
        "name": _STRING,
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": _STRING,
        "email": _STRING,
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _schema(properties: _Obj, required: Sequence[str] = ()) -> _Obj:
    schema: _Obj = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


#: name -> (description, inputSchema, handler attribute); listed after the demo tools.
FIXTURE_TOOLS: Final[dict[str, tuple[str, _Obj, str]]] = {
    "test_simple_text": ("Return a fixed text block.", _NO_ARGS, "_fx_simple_text"),
    "test_image_content": ("Return a 1x1 PNG image.", _NO_ARGS, "_fx_image"),
    "test_audio_content": ("Return a short WAV clip.", _NO_ARGS, "_fx_audio"),
    "test_embedded_resource": ("Return an embedded text resource.", _NO_ARGS, "_fx_embedded"),
    "test_multiple_content_types": ("Return text, an image and a resource.", _NO_ARGS, "_fx_mixed"),
    "test_tool_with_logging": ("Send three info log messages while running.", _NO_ARGS, "_fx_logging"),
    "test_logging_tool": ("Send one info log message.", _NO_ARGS, "_fx_logging_short"),
    "test_error_handling": ("Always return a tool error (isError).", _NO_ARGS, "_fx_error"),
    "test_tool_with_progress": ("Report progress 0, 50, 100 of 100.", _NO_ARGS, "_fx_progress"),
    "test_sampling": (
        "Ask the client's model (sampling) and return its reply.",
        _schema({"prompt": _STRING}, ["prompt"]),
        "_fx_sampling",
    ),
    "test_elicitation": (
        "Ask the user for a username and an email (elicitation).",
        _schema({"message": _STRING}, ["message"]),
        "_fx_elicitation",
    ),
    "test_elicitation_sep1034_defaults": (
        "Elicit every primitive type with a default value.",
        _NO_ARGS,
        "_fx_elicitation_defaults",
    ),
    "test_elicitation_sep1330_enums": ("Elicit the five enum schema variants.", _NO_ARGS, "_fx_elicitation_enums"),
    "test_reconnection": (
        "Close the response stream mid-call (HTTP), then answer on the resumed stream.",
        _NO_ARGS,
        "_fx_reconnection",
    ),
    JSON_SCHEMA_TOOL: ("Tool with JSON Schema 2020-12 features", _JSON_SCHEMA_2020_12, "_fx_json_schema"),
    HEADER_TOOL: (
        "Echo a region that is mirrored into the Mcp-Param-Region header.",
        _schema({"region": {"type": "string", "x-mcp-header": "Region"}, "note": _STRING}, ["region"]),
        "_fx_header_param",
    ),
    "test_missing_capability": ("Needs the client's sampling capability.", _NO_ARGS, "_fx_missing_capability"),
    "test_streaming_elicitation": ("Ask the user a question (elicitation).", _NO_ARGS, "_fx_streaming_elicitation"),
    "test_trigger_tool_change": ("Announce a tools list change.", _NO_ARGS, "_fx_trigger_tools"),
    "test_trigger_prompt_change": ("Announce a prompts list change.", _NO_ARGS, "_fx_trigger_prompts"),
    "test_input_required_result_elicitation": ("2026-07-28: elicit a name.", _NO_ARGS, "_ir_elicitation"),
    "test_input_required_result_sampling": ("2026-07-28: sample a reply.", _NO_ARGS, "_ir_sampling"),
    "test_input_required_result_list_roots": ("2026-07-28: list the client's roots.", _NO_ARGS, "_ir_roots"),
    "test_input_required_result_request_state": ("2026-07-28: confirm, with state.", _NO_ARGS, "_ir_request_state"),
    "test_input_required_result_multiple_inputs": ("2026-07-28: three inputs at once.", _NO_ARGS, "_ir_multiple"),
    "test_input_required_result_multi_round": ("2026-07-28: two rounds of input.", _NO_ARGS, "_ir_multi_round"),
    "test_input_required_result_tampered_state": (
        "2026-07-28: integrity-protected state.",
        _NO_ARGS,
        "_ir_tampered",
    ),
    "test_input_required_result_capabilities": (
        "2026-07-28: ask only for what the client declared.",
        _NO_ARGS,
        "_ir_capabilities",
    ),
    # the Tasks extension (SEP-2663): the fixture names of the official runner's tasks scenarios
    "greet": ("Say hello to a name; never runs as a task.", _schema({"name": _STRING}, ["name"]), "_tk_greet"),
    "slow_compute": (
        "Wait `seconds`, then answer; a task when the request declares io.modelcontextprotocol/tasks.",
        _schema({"seconds": {"type": "number", "minimum": 0, "maximum": 3600}, "label": _STRING}, ["seconds"]),
        "_tk_slow_compute",
    ),
    "failing_job": (
        "A task that ends with a tool error (isError); only runs as a task (io.modelcontextprotocol/tasks).",
        _NO_ARGS,
        "_tk_failing_job",
    ),
    "protocol_error_job": (
        "A task that fails with a JSON-RPC error; only runs as a task (io.modelcontextprotocol/tasks).",
        _NO_ARGS,
        "_tk_protocol_error_job",
    ),
    "confirm_delete": (
        "Ask the user to confirm deleting a file (nothing is deleted); a task when the request declares "
        "io.modelcontextprotocol/tasks.",
        _schema({"filename": _STRING}, ["filename"]),
        "_tk_confirm_delete",
    ),
    "multi_input": (
        "Ask the user two questions at once; a task when the request declares io.modelcontextprotocol/tasks.",
        _NO_ARGS,
        "_tk_multi_input",
    ),
    "test_tool_with_task": (
        "2026-07-28: ask for a name (input_required), then finish as a task (io.modelcontextprotocol/tasks).",
        _NO_ARGS,
        "_tk_tool_with_task",
    ),
}
_CRASH_ANNOTATIONS: Final[_Obj] = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}

FIXTURE_RESOURCES: Final[tuple[_Obj, ...]] = (
    {"uri": STATIC_TEXT_URI, "name": "static-text", "description": "A fixed text resource.", "mimeType": "text/plain"},
    {"uri": STATIC_BINARY_URI, "name": "static-binary", "description": "A 1x1 PNG image.", "mimeType": "image/png"},
    {
        "uri": WATCHED_URI,
        "name": "watched-resource",
        "description": "A resource to subscribe to.",
        "mimeType": "text/plain",
    },
)
FIXTURE_TEMPLATES: Final[tuple[_Obj, ...]] = (
    {
        "uriTemplate": TEMPLATE_URI,
        "name": "template-data",
        "description": "JSON data for an id.",
        "mimeType": "application/json",
    },
)
FIXTURE_PROMPTS: Final[tuple[_Obj, ...]] = (
    {"name": "test_simple_prompt", "description": "A fixed prompt without arguments."},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with two required arguments.",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt embedding a resource.",
        "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    },
    {"name": "test_prompt_with_image", "description": "A prompt with an image."},
    {"name": "test_input_required_result_prompt", "description": "2026-07-28: a prompt that asks for context."},
)
COMPLETIONS: Final[dict[tuple[str, str, str], tuple[str, ...]]] = {
    ("ref/prompt", "test_prompt_with_arguments", "arg1"): ("paris", "park", "party"),
    ("ref/resource", TEMPLATE_URI, "id"): ("123", "456"),
}

# -- MRTR requests of the 2026-07-28 fixture tools ------------------------------------------


def elicitation_request(message: str, properties: _Obj, required: Sequence[str]) -> _Obj:
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": _schema(properties, required)},
    }


def sampling_request(text: str, max_tokens: int) -> _Obj:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


ASK_NAME: Final = elicitation_request("What is your name?", {"name": _STRING}, ["name"])
ASK_CAPITAL: Final = sampling_request("What is the capital of France?", 100)
ASK_ROOTS: Final[_Obj] = {"method": "roots/list", "params": {}}
ASK_CONFIRM: Final = elicitation_request("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
ASK_GREETING: Final = sampling_request("Generate a greeting", 50)
ASK_STEP1: Final = elicitation_request("Step 1: What is your name?", {"name": _STRING}, ["name"])
ASK_STEP2: Final = elicitation_request("Step 2: What is your favorite color?", {"color": _STRING}, ["color"])
ASK_CONTEXT: Final = elicitation_request("What context should the prompt use?", {"context": _STRING}, ["context"])
#: inputRequests method -> the client capability it needs
NEEDS: Final = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
MODERN_ONLY_TEXT: Final = "this tool uses 2026-07-28 input requests; call it with protocol revision 2026-07-28"
TASKS_ONLY_TEXT: Final = (
    "this tool only runs as a task: call it with protocol revision 2026-07-28 and the "
    f"{TASKS_EXTENSION} extension in the request's client capabilities"
)
#: seconds the short fixture jobs work before they end
JOB_STEP_S: Final = 0.1
#: Page sizes of skills/list and resources/directory/read when --page-size is not given: small,
#: so that a client of the reference server meets their pagination (an entry is never split).
SKILLS_PAGE_SIZE: Final = 1
DIRECTORY_PAGE_SIZE: Final = 2
ASK_PROCEED: Final = elicitation_request("Proceed?", {"confirm": {"type": "boolean"}}, ["confirm"])


def with_fixture_tools(tools: list[_Obj], revision: str) -> list[_Obj]:
    """``tools`` (the demo's) followed by the fixture tools, annotated from 2025-03-26 on."""
    tools = [*tools, *({"name": n, "description": d, "inputSchema": s} for n, (d, s, _) in FIXTURE_TOOLS.items())]
    if since(revision, V2025_03_26):  # tool annotations appeared in 2025-03-26
        for tool in tools:
            tool["annotations"] = dict(_CRASH_ANNOTATIONS if tool["name"] == "crash" else _READ_ONLY)
    return tools


def sign_state(key: bytes, payload: _Obj) -> str:
    """An HMAC-protected ``requestState`` for ``payload``."""
    body = b64_json(payload)
    return f"{body}.{hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}"


def verify_state(key: bytes, state: object, tool: object) -> _Obj | None:
    """The payload of a ``requestState`` signed with ``key`` for ``tool`` (None when absent or forged)."""
    if not isinstance(state, str) or state.count(".") != 1:
        return None
    body, mac = state.split(".")
    if not hmac.compare_digest(mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest()):
        return None
    payload = unb64_json(body)
    if not isinstance(payload, dict) or payload.get("tool") != tool:
        return None
    return payload


def need_tasks() -> _Obj:
    """The data of a -32021 error that names the tasks extension."""
    return {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def fixture_contents(uri: str) -> _Obj | None:
    if uri == STATIC_TEXT_URI:
        return {"uri": uri, "mimeType": "text/plain", "text": STATIC_TEXT}
    if uri == STATIC_BINARY_URI:
        return {"uri": uri, "mimeType": "image/png", "blob": PNG_B64}
    if uri == WATCHED_URI:
        return {"uri": uri, "mimeType": "text/plain", "text": "watched"}
    prefix, suffix = "test://template/", "/data"
    if uri.startswith(prefix) and uri.endswith(suffix):
        ident = uri[len(prefix) : -len(suffix)]
        if ident and "/" not in ident:
            text = json.dumps(
                {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}, separators=(",", ":")
            )
            return {"uri": uri, "mimeType": "application/json", "text": text}
    return None


def answer_fits(method: str, answer: object) -> bool:
    if not isinstance(answer, dict):
        return False
    if method == "elicitation/create":
        return answer.get("action") in ("accept", "decline", "cancel")
    if method == "sampling/createMessage":
        return "content" in answer
    return isinstance(answer.get("roots"), list)


def elicited(answer: object, field: str) -> str:
    value = elicited_any(answer, field)
    return value if isinstance(value, str) else str(value)


def elicited_any(answer: object, field: str) -> object:
    if isinstance(answer, dict) and answer.get("action") == "accept" and isinstance(answer.get("content"), dict):
        return answer["content"].get(field, "")
    return f"({answer.get('action') if isinstance(answer, dict) else 'no answer'})"


def llm_text(result: object) -> str:
    content = result.get("content") if isinstance(result, dict) else None
    blocks = content if isinstance(content, list) else [content]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    if not texts:
        raise ValueError("a CreateMessageResult needs text content")
    return "LLM response: " + "".join(texts)


def action_text(result: object) -> str:
    if not isinstance(result, dict) or result.get("action") not in ("accept", "decline", "cancel"):
        raise ValueError("an ElicitResult needs action accept, decline or cancel")
    return f"action={result['action']}, content={json.dumps(result.get('content', {}), sort_keys=True)}"


def root_uris(result: object) -> list[str]:
    roots = result.get("roots") if isinstance(result, dict) else None
    return [r["uri"] for r in roots or [] if isinstance(r, dict) and isinstance(r.get("uri"), str)]


def parse_listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected [HOST:]PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port {number} is out of range")
    return host or "127.0.0.1", number


class MissingPromptArguments(Exception):
    """A fixture prompt was asked for without an argument it needs (each engine answers -32602)."""


def fixture_prompt(
    name: object,
    arguments: Mapping[str, str],
    *,
    modern: bool,
    ask: Callable[[Mapping[str, _Obj]], Mapping[str, object]],
) -> _Obj | None:
    """The ``GetPromptResult`` of a fixture prompt (None for another name); ``ask`` gets the
    client's answers the engine's way (2026-07-28: an ``input_required`` result first).

    Raises:
        MissingPromptArguments: a required argument is missing.
    """

    def text(value: str) -> _Obj:
        return {"role": "user", "content": {"type": "text", "text": value}}

    if name == "test_simple_prompt":
        return {"messages": [text(SIMPLE_PROMPT)]}
    if name == "test_prompt_with_arguments":
        missing = [a for a in ("arg1", "arg2") if a not in arguments]
        if missing:
            raise MissingPromptArguments(f"Invalid params: missing argument(s) {', '.join(missing)}")
        return {"messages": [text(f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'")]}
    if name == "test_prompt_with_embedded_resource":
        uri = arguments.get("resourceUri")
        if uri is None:
            raise MissingPromptArguments("Invalid params: missing argument resourceUri")
        resource = {"uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}
        embedded = {"role": "user", "content": {"type": "resource", "resource": resource}}
        return {"messages": [embedded, text("Please process the embedded resource above.")]}
    if name == "test_prompt_with_image":
        picture = {"role": "user", "content": {"type": "image", "data": PNG_B64, "mimeType": "image/png"}}
        return {"messages": [picture, text("Please analyze the image above.")]}
    if name == "test_input_required_result_prompt":
        if not modern:
            return {"messages": [text("Use the default context.")]}
        context = elicited(ask({"user_context": ASK_CONTEXT})["user_context"], "context")
        return {"description": "A prompt built from the user's context.", "messages": [text(f"Context: {context}")]}
    return None


class Refused(Exception):
    """A request to answer with a JSON-RPC error (each engine raises it as its own error class)."""

    def __init__(self, code: int, message: str, data: JSONValue = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def sort_answers(
    asks: Mapping[str, _Obj],
    capabilities: Mapping[str, object],
    params: Mapping[str, object],
    *,
    state: _Obj | None,
    verify: Callable[[], _Obj | None],
    responses: Callable[[], Mapping[str, object]],
    check_caps: bool = True,
) -> tuple[dict[str, object], dict[str, _Obj]]:
    """2026-07-28 MRTR: the client's answers to ``asks`` in a request (``params``), and the asks
    still missing; ``verify()`` gives the request's verified ``requestState`` (None when absent or
    forged), ``responses()`` its ``inputResponses``.

    Raises:
        Refused: -32021 for an ask of a capability the client did not declare (``check_caps``);
            -32602 for a ``requestState`` that fails verification against ``state``.
    """
    if check_caps:
        for request in asks.values():
            capability = NEEDS[str(request["method"])]
            if not isinstance(capabilities.get(capability), dict):
                # 2026-07-28 basic/index §_meta: a request needing an undeclared capability
                # gets a MissingRequiredClientCapabilityError.
                raise Refused(
                    MISSING_CLIENT_CAPABILITY,
                    f"Missing required client capability: {capability}",
                    {"requiredCapabilities": {capability: {}}},
                )
    if state is not None and "requestState" in params:
        verified = verify()
        if verified is None or {k: v for k, v in verified.items() if k != "tool"} != state:
            raise Refused(INVALID_PARAMS, "Invalid params: 'requestState' failed verification")
    # a retry that lost the state starts over: the answers cannot be trusted without it
    given = responses() if state is None or "requestState" in params else {}
    answers: dict[str, object] = {}
    missing: dict[str, _Obj] = {}
    for key, request in asks.items():
        answer = given.get(key)
        if answer_fits(str(request["method"]), answer):
            answers[key] = answer
        else:
            missing[key] = request
    return answers, missing
