"""JSON Schema for the checks: tool schemas (SV-29c, SV-30) and, when present, the official schemas.

Theory of operation: :func:`compile_schema` checks a schema a server published against its
dialect (``$schema``, else 2020-12: 2025-11-25 basic/index §JSON Schema Usage) and returns a
validator that never fetches a remote ``$ref`` (2026-07-28 basic/index: "Implementations MUST NOT
automatically dereference $ref values that resolve to a network URI"). :func:`message_validator`
validates whole messages against a revision's official ``schema.json`` (SV-06): the copy shipped
with mcpwire (:mod:`mcpwire.schemas`), or the folder ``$MCPWIRE_SCHEMA_DIR`` names; SV-06 is
skipped when that folder holds none. ``jsonschema`` is imported lazily.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from mcpwire import schemas

__all__ = ["SchemaProblem", "compile_schema", "message_validator", "schema_dir"]


class SchemaProblem(Exception):
    """A published schema is not a valid JSON Schema (or uses an unknown dialect)."""


def _no_retrieve(uri: str) -> Any:
    raise SchemaProblem(f"the schema refers to {uri!r}; remote $ref values are never fetched")


def compile_schema(schema: Any, *, check: bool = True) -> Any:
    """A validator for ``schema`` (``check=False`` trusts it: no meta-validation).

    Raises:
        SchemaProblem: not an object, an unknown ``$schema`` dialect, or invalid for its dialect.
    """
    import jsonschema
    import referencing

    if not isinstance(schema, dict):
        raise SchemaProblem(f"a schema must be a JSON object, not {type(schema).__name__}")
    dialect = schema.get("$schema")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if dialect is not None and cls is jsonschema.Draft202012Validator and "2020-12" not in str(dialect):
        drafts = (
            jsonschema.Draft4Validator,
            jsonschema.Draft6Validator,
            jsonschema.Draft7Validator,
            jsonschema.Draft201909Validator,
            jsonschema.Draft202012Validator,
        )
        known = {str(v.META_SCHEMA.get("$id") or v.META_SCHEMA.get("id") or "").rstrip("#") for v in drafts}
        if str(dialect).rstrip("#") not in known:
            raise SchemaProblem(f"unknown JSON Schema dialect {dialect!r}")
    try:
        if check:
            cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaProblem(f"{exc.message} (at {'/'.join(map(str, exc.absolute_path)) or 'the root'})") from None
    registry: Any = referencing.Registry(retrieve=_no_retrieve)  # type: ignore[call-arg]
    return cls(schema, registry=registry)


def schema_dir() -> Path | None:
    """Where the official ``<revision>/schema.json`` files are: the copy shipped with mcpwire,
    or ``$MCPWIRE_SCHEMA_DIR``; ``None`` if that folder holds none."""
    path = schemas.schema_dir()
    return path if any(path.glob("*/schema.json")) else None


@cache
def _document(revision: str) -> dict[str, Any] | None:
    base = schema_dir()
    if base is None or not (base / revision / "schema.json").is_file():
        return None
    loaded = json.loads((base / revision / "schema.json").read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


@cache
def message_validator(revision: str, definition: str) -> Any:
    """A validator for one definition of ``revision``'s official schema, or None without it."""
    doc = _document(revision)
    if doc is None:
        return None
    key = "$defs" if "$defs" in doc else "definitions"
    if definition not in doc.get(key, {}):
        return None
    schema: dict[str, Any] = {key: doc[key], "$ref": f"#/{key}/{definition}"}
    if doc.get("$schema"):
        schema["$schema"] = doc["$schema"]
    return compile_schema(schema, check=False)


def result_definition(revision: str, method: str) -> str | None:
    """The result type of ``method`` in ``revision`` (``tools/list`` -> ``ListToolsResult``)."""
    doc = _document(revision)
    if doc is None:
        return None
    key = "$defs" if "$defs" in doc else "definitions"
    defs = doc.get(key, {})
    for name, definition in defs.items():
        if not name.endswith("Request") or not isinstance(definition, dict):
            continue
        method_schema = (definition.get("properties") or {}).get("method") or {}
        if method_schema.get("const") == method:
            result = str(name).removesuffix("Request") + "Result"
            if result in defs:
                return result
            return "EmptyResult" if "EmptyResult" in defs else "Result"
    return None
