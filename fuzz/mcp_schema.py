"""The official MCP schema of each revision, as the fuzzer uses it: validators and the client's messages.

Theory of operation: ``schema.json`` of a revision is the copy shipped in :mod:`mcpwire.schemas` (or
the one in ``$MCPWIRE_SCHEMA_DIR``); when a revision has none there, everything here answers
``None`` or empty, and the fuzzer falls back to its built-in method list and shape checks. The
document is loaded once per revision. :func:`validator` builds a validator for one definition
(``#/$defs/X`` or ``#/definitions/X`` resolved inside the document, never over the network).
:func:`client_requests` and :func:`client_notifications` read the revision's ``ClientRequest`` /
``ClientNotification`` unions: each method's name (its ``const``), the schema of its ``params`` and
whether ``params`` is required; :func:`result_definition` names the result type a method's answer
must validate against (SV-06).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mcpwire import schemas

from .schemas import validator_for

__all__ = [
    "MessageType",
    "client_notifications",
    "client_requests",
    "definitions_key",
    "document",
    "result_definition",
    "schema_dir",
    "validator",
]


def schema_dir() -> Path | None:
    """The folder of ``<revision>/schema.json`` files (shipped with mcpwire, or
    ``$MCPWIRE_SCHEMA_DIR``), if it exists."""
    path = schemas.schema_dir()
    return path if path.is_dir() else None


@cache
def document(revision: str) -> dict[str, Any] | None:
    base = schema_dir()
    if base is None or not (base / revision / "schema.json").is_file():
        return None
    loaded = json.loads((base / revision / "schema.json").read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


def definitions_key(doc: dict[str, Any]) -> str:
    return "$defs" if "$defs" in doc else "definitions"


def _defs(revision: str) -> dict[str, Any]:
    doc = document(revision)
    if doc is None:
        return {}
    defs = doc.get(definitions_key(doc))
    return defs if isinstance(defs, dict) else {}


@cache
def validator(revision: str, definition: str) -> Any:
    """A validator for ``definition`` of the revision's schema, or ``None`` without the schema."""
    doc = document(revision)
    if doc is None or definition not in _defs(revision):
        return None
    key = definitions_key(doc)
    schema: dict[str, Any] = {key: doc[key], "$ref": f"#/{key}/{definition}"}
    if doc.get("$schema"):
        schema["$schema"] = doc["$schema"]
    return validator_for(schema)


@dataclass(frozen=True, slots=True)
class MessageType:
    """One client message of a revision: its method, its definition, and its params' schema."""

    method: str
    definition: str
    params: Any
    params_required: bool


def _members(revision: str, union: str) -> list[MessageType]:
    defs = _defs(revision)
    node = defs.get(union)
    if not isinstance(node, dict):
        return []
    names = [r["$ref"].rsplit("/", 1)[-1] for r in node.get("anyOf", []) if isinstance(r, dict) and "$ref" in r]
    if not names and "properties" in node:  # 2026-07-28: a union of one is the definition itself
        names = [union]
    out = []
    for name in names:
        definition = defs.get(name)
        if not isinstance(definition, dict):
            continue
        props = definition.get("properties") or {}
        method = (props.get("method") or {}).get("const")
        if not isinstance(method, str):
            continue
        required = "params" in (definition.get("required") or [])
        out.append(MessageType(method, name, props.get("params", {"type": "object"}), required))
    return out


@cache
def client_requests(revision: str) -> tuple[MessageType, ...]:
    return tuple(_members(revision, "ClientRequest"))


@cache
def client_notifications(revision: str) -> tuple[MessageType, ...]:
    return tuple(_members(revision, "ClientNotification"))


@cache
def result_definition(revision: str, method: str) -> str | None:
    """The result type of ``method`` (``CallToolRequest`` -> ``CallToolResult``; ``EmptyResult`` or
    ``Result`` when the revision names none), or ``None`` for a method the revision does not have."""
    defs = _defs(revision)
    for message in client_requests(revision):
        if message.method == method:
            name = message.definition.removesuffix("Request") + "Result"
            if name in defs:
                return name
            return "EmptyResult" if "EmptyResult" in defs else "Result"
    return None
