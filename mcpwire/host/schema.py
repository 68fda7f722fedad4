"""JSON Schema helpers for the tool registry: validity of ``inputSchema``, OpenAI strict mode,
and parameter summaries for Markdown.

Theory of operation: a tool is exposed to a model only when its ``inputSchema`` is an object
schema (2025-11-25 server/tools: "inputSchema: JSON Schema object defining the expected
parameters for the tool" whose ``type`` is ``"object"``) that is itself a valid JSON Schema.
With ``jsonschema`` installed the schema is checked against its metaschema (2020-12 unless it
names another ``$schema``); a ``$schema`` that is not a string or names no known metaschema, or a
schema the checker cannot even process, makes the schema invalid rather than raising. Without
``jsonschema``, the structural keywords are checked by hand.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["check_input_schema", "describe_parameters", "strict_schema"]

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("$defs", "definitions")


def check_input_schema(schema: object) -> str | None:
    """``None`` when ``schema`` is a usable ``inputSchema``; else what is wrong with it."""
    if not isinstance(schema, dict):
        return f"inputSchema is not an object (got {type(schema).__name__})"
    if schema.get("type") != "object":
        return f"inputSchema must have type 'object', got {schema.get('type')!r}"
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, dict | bool) for v in props.values()):
        return "inputSchema.properties must map names to schemas"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "inputSchema.required must be a list of property names"
    dialect = schema.get("$schema")
    if "$schema" in schema and not isinstance(dialect, str):
        return f"inputSchema.$schema must be a metaschema URI string, got {_json_kind(dialect)}"
    try:
        import jsonschema
        from jsonschema import validators
    except ImportError:  # pragma: no cover - the structural checks above stand alone
        return None
    try:
        if dialect is None:
            cls = jsonschema.Draft202012Validator
        else:
            cls = validators.validator_for(schema, default=None)
            if cls is None:
                return f"inputSchema.$schema names an unknown metaschema: {dialect!r}"
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"inputSchema is not a valid JSON Schema at {where}: {exc.message}"
    except Exception as exc:
        # a schema malformed beyond what the metaschema describes (an unparsable $schema URI,
        # a pattern that breaks the regex engine, nesting too deep) is a bad tool, not a host bug
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return f"inputSchema cannot be checked as a JSON Schema: {detail}"
    return None


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy for OpenAI strict mode: every object gets ``additionalProperties: false`` and
    lists all its properties as required, optional ones becoming nullable (a union with
    ``null``); ``oneOf`` becomes ``anyOf``. Recurses into properties, items, unions and
    definitions. (A map-like object, ``additionalProperties: {schema}``, cannot be expressed
    in strict mode and becomes a closed object.)"""
    return _strict(copy.deepcopy(schema))


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    out = schema
    if "oneOf" in out and "anyOf" not in out:
        out["anyOf"] = out.pop("oneOf")
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_strict(s) if isinstance(s, dict) else s for s in out[key]]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _strict(s) if isinstance(s, dict) else s for k, s in out[key].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    kind = out.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in out:
        props: dict[str, Any] = out.get("properties") if isinstance(out.get("properties"), dict) else {}  # type: ignore[assignment]
        required = set(out.get("required") or [])
        new_props: dict[str, Any] = {}
        for key, sub in props.items():
            sub = _strict(sub) if isinstance(sub, dict) else {}
            if key not in required:
                sub = _nullable(sub)
            new_props[key] = sub
        out["properties"] = new_props
        out["required"] = list(new_props)
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        if kind == "null":
            return schema
        out = {**schema, "type": [kind, "null"]}
        if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
            out["enum"] = [*schema["enum"], None]
        return out
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if isinstance(schema.get("anyOf"), list):
        if any(isinstance(s, dict) and s.get("type") == "null" for s in schema["anyOf"]):
            return schema
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def describe_parameters(schema: dict[str, Any]) -> list[str]:
    """One Markdown bullet per top-level property: name, type, required, description."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    required = set(schema.get("required") or [])
    lines: list[str] = []
    for name, sub in props.items():
        sub = sub if isinstance(sub, dict) else {}
        kind = sub.get("type")
        if isinstance(kind, list):
            kind = " | ".join(str(k) for k in kind)
        elif kind is None and isinstance(sub.get("enum"), list):
            kind = "enum"
        detail = ", ".join(x for x in (str(kind) if kind else "", "required" if name in required else "optional") if x)
        if isinstance(sub.get("enum"), list):
            detail += ", one of " + ", ".join(f"`{v}`" for v in sub["enum"])
        text = " ".join(str(sub.get("description") or "").split())
        lines.append(f"- `{name}` ({detail})" + (f": {text}" if text else ""))
    return lines
