"""The tools a connection knows, and their output schemas: ``structuredContent`` is checked
against the ``outputSchema`` of a tool known from ``tools/list`` (TL-11).

Theory of operation: :class:`ToolCatalog` keeps the last listing: each tool, and a compiled
validator per tool with an output schema, built on first use. ``notifications/tools/list_changed`` empties it. A schema
jsonschema cannot use, or a missing jsonschema, is logged and never breaks a call: the structural
checks (present, an object where the revision requires one) still apply.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from msgspec import UnsetType

from .._version import install_hint
from ..errors import OutputSchemaError
from ..protocol.types import JSONObject, Tool, ToolResult
from ..protocol.versions import Revision
from .values import printable

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["ToolCatalog", "compile_schema"]

log = logging.getLogger(__name__)

_jsonschema_missing_logged = False


class ToolCatalog:
    """The tools of the last listing and their output validators."""

    __slots__ = ("output_schemas", "tools", "validators")

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        #: names of the tools that declare an outputSchema (checked on every call: kept small)
        self.output_schemas: frozenset[str] = frozenset()
        self.validators: dict[str, Validator | None] = {}

    def update(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}
        self.output_schemas = frozenset(t.name for t in tools if t.output_schema is not None)
        self.validators.clear()

    def clear(self) -> None:
        """The server said its tools changed: forget them until the next listing."""
        self.tools.clear()
        self.output_schemas = frozenset()
        self.validators.clear()

    def check(self, name: str, result: ToolResult, revision: Revision | None, server: str) -> None:
        """Raises :class:`OutputSchemaError` when ``result`` breaks tool ``name``'s outputSchema."""
        tool = self.tools.get(name)
        if tool is None or tool.output_schema is None:
            return
        structured = result.structured_content
        if isinstance(structured, UnsetType):
            raise OutputSchemaError(
                f"tool '{name}' of server '{server}' declares an outputSchema but returned no structuredContent"
            )
        if revision is not None and revision.structured_content_is_object and not isinstance(structured, dict):
            raise OutputSchemaError(
                f"tool '{name}' of server '{server}' returned structuredContent that is not an object "
                f"(revision {revision.version} requires one)"
            )
        if name not in self.validators:
            self.validators[name] = compile_schema(tool.output_schema, name, server)
        validator = self.validators[name]
        if validator is None:
            return
        try:
            error = next(iter(validator.iter_errors(structured)), None)
        except Exception as exc:  # e.g. a "pattern" that is no regular expression: the schema's fault
            log.warning(
                "%s: the outputSchema of tool %r cannot be applied (%s); not validated",
                server,
                name,
                printable(str(exc)),
            )
            self.validators[name] = None
            return
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise OutputSchemaError(
                f"tool '{name}' of server '{server}' returned structuredContent that breaks its "
                f"outputSchema at {where}: {error.message}"
            )


def compile_schema(schema: JSONObject, tool: str, server: str) -> Validator | None:
    """A jsonschema validator for an outputSchema; never fetches a network ``$ref`` (JR-44).

    ``None`` when the schema cannot be used (logged; the structural checks of the caller still
    apply) or when jsonschema is not installed (logged once: it is the ``schema`` extra).
    """
    global _jsonschema_missing_logged
    try:
        import jsonschema
        from jsonschema import validators
        from referencing import Registry
    except ImportError:
        if not _jsonschema_missing_logged:
            _jsonschema_missing_logged = True
            log.warning(
                "%s: tool %r declares an outputSchema, but jsonschema is not installed: structuredContent is "
                "checked for presence and shape only (%s to validate it)",
                server,
                tool,
                install_hint("schema"),
            )
        return None

    def no_retrieve(uri: str) -> Any:
        raise LookupError(f"refusing to fetch external $ref {uri!r} (JR-44)")

    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        log.warning("%s: tool %r has an outputSchema whose $schema is not a string; not validated", server, tool)
        return None
    try:
        cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema, registry=Registry(retrieve=no_retrieve))  # type: ignore[call-arg]
    except jsonschema.SchemaError as exc:
        log.warning("%s: tool %r has an outputSchema that is not a valid JSON Schema: %s", server, tool, exc.message)
    except Exception as exc:  # a schema jsonschema cannot even inspect: the server's fault, not a crash
        log.warning("%s: tool %r has an outputSchema that cannot be used: %s", server, tool, printable(str(exc)))
    return None
