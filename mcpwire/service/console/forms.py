"""The try-it form of a tool: fields generated from its ``inputSchema``, and the form's values
turned back into arguments.

Theory of operation: :func:`fields_of` walks the schema once and describes one :class:`Field` per
property (strings, numbers, integers, booleans, enums as selects, arrays of scalars one item a
line, nested objects as groups of fields; anything else, such as ``anyOf`` or arrays of objects,
is a JSON field). Each field's form name is ``arg`` followed by its JSON Pointer (``arg/target/host``)
so any property name survives the round trip. :func:`arguments_from` reads the posted form by the
same fields, converting each value to its type, and every problem is reported at its JSON path
(``$.target.port``). The result is then validated against the whole schema (when ``jsonschema`` is
installed), so the call is not sent with arguments the tool would refuse. The schema is the
server's, hence hostile: it only ever becomes escaped text and attribute values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ...redaction import shorten
from .i18n import N_, english
from .web import Form

__all__ = ["Field", "arguments_from", "fields_of", "json_path", "validate_arguments"]

#: nesting shown as fields; deeper objects are JSON fields
MAX_DEPTH: Final = 4
#: properties shown as fields per object; a larger object is a JSON field
MAX_PROPERTIES: Final = 100
PREFIX: Final = "arg"
Kind = Literal["string", "number", "integer", "boolean", "enum", "object", "lines", "json"]
_SCALARS: Final = ("string", "number", "integer")


Gettext = Callable[[str], str]
_same = english
#: how each kind of field is named beside its label
_KINDS: Final = {
    "string": N_("string"),
    "number": N_("number"),
    "integer": N_("integer"),
    "boolean": N_("boolean"),
    "enum": N_("enum"),
    "object": N_("object"),
}
_LINES: Final = {
    "string": N_("strings, one per line"),
    "number": N_("numbers, one per line"),
    "integer": N_("integers, one per line"),
}
_JSON: Final = {"any": N_("JSON"), "object": N_("JSON object"), "array": N_("JSON array")}


def _pointer(path: Sequence[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def json_path(path: Sequence[str | int]) -> str:
    """``$.target.port``, ``$["odd key"]``, ``$.tags[2]``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += "." + part
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return out


@dataclass(slots=True)
class Field:
    path: tuple[str, ...]
    kind: Kind
    label: str
    required: bool = False
    description: str | None = None
    #: the value shown when the form opens (text; JSON for JSON fields)
    value: str = ""
    #: (value as JSON, label) for enums
    options: list[tuple[str, str]] = field(default_factory=list)
    #: the item type of a ``lines`` field
    item: str = "string"
    #: the JSON type of a ``json`` field (``object``, ``array`` or ``any``)
    json_type: str = "any"
    minimum: float | None = None
    maximum: float | None = None
    children: list[Field] = field(default_factory=list)
    index: int = 0

    @property
    def name(self) -> str:
        return PREFIX + _pointer(self.path)

    @property
    def id(self) -> str:
        return f"field-{self.index}"

    @property
    def json_path(self) -> str:
        return json_path(self.path)

    @property
    def type_label(self) -> str:
        return self.label_in(_same)

    def label_in(self, gettext: Gettext) -> str:
        """What the field takes (``integer, 1..5``, ``strings, one per line``), in the language
        of ``gettext``."""
        if self.kind == "lines":
            return gettext(_LINES[self.item]) if self.item in _LINES else f"{self.item}, one per line"
        if self.kind == "json":
            return gettext(_JSON.get(self.json_type, "JSON"))
        kind = gettext(_KINDS[self.kind]) if self.kind in _KINDS else self.kind
        if self.minimum is not None or self.maximum is not None:
            low = "" if self.minimum is None else f"{self.minimum:g}"
            high = "" if self.maximum is None else f"{self.maximum:g}"
            return f"{kind}, {low}..{high}"
        return kind


def _type_of(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind if isinstance(kind, str) else None


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


class _Walker:
    def __init__(self) -> None:
        self.count = 0

    def field(self, key: str, schema: object, path: tuple[str, ...], required: bool, depth: int) -> Field:
        self.count += 1
        spec: Mapping[str, Any] = schema if isinstance(schema, Mapping) else {}
        title = spec.get("title")
        label = shorten(title if isinstance(title, str) and title.strip() else key, 200)
        description = spec.get("description") if isinstance(spec.get("description"), str) else None
        made = Field(path=path, kind="json", label=label, required=required, description=description, index=self.count)
        default = spec.get("default")
        kind = _type_of(spec)
        enum = spec.get("enum")
        if isinstance(enum, list) and enum and all(not isinstance(v, dict | list) for v in enum):
            made.kind = "enum"
            made.options = [(json.dumps(v), v if isinstance(v, str) else json.dumps(v)) for v in enum[:500]]
            made.value = json.dumps(default) if "default" in spec else ""
        elif kind in _SCALARS:
            made.kind = kind  # type: ignore[assignment]
            made.minimum = _number(spec.get("minimum"))
            made.maximum = _number(spec.get("maximum"))
            if isinstance(default, str | int | float) and not isinstance(default, bool):
                made.value = str(default)
        elif kind == "boolean":
            made.kind = "boolean"
            made.value = "" if not isinstance(default, bool) else ("true" if default else "false")
        elif kind == "object" and depth < MAX_DEPTH and isinstance(spec.get("properties"), Mapping):
            properties = spec["properties"]
            if len(properties) <= MAX_PROPERTIES and not spec.get("anyOf") and not spec.get("oneOf"):
                made.kind = "object"
                needed: list[Any] = spec["required"] if isinstance(spec.get("required"), list) else []
                made.children = [
                    self.field(str(k), v, (*path, str(k)), k in needed, depth + 1) for k, v in properties.items()
                ]
            else:
                made.json_type = "object"
        elif kind == "array":
            items = spec.get("items")
            item_kind = _type_of(items) if isinstance(items, Mapping) else None
            if item_kind in _SCALARS and not (isinstance(items, Mapping) and "enum" in items):
                made.kind = "lines"
                made.item = item_kind or "string"
                if isinstance(default, list):
                    made.value = "\n".join(str(v) for v in default)
            else:
                made.json_type = "array"
        elif kind == "object":
            made.json_type = "object"
        if made.kind == "json" and "default" in spec:
            made.value = json.dumps(default, indent=2)
        return made


def fields_of(schema: Mapping[str, Any]) -> list[Field]:
    """The form's fields for an ``inputSchema`` (its top-level properties, in order)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    needed: list[Any] = schema["required"] if isinstance(schema.get("required"), list) else []
    walker = _Walker()
    return [walker.field(str(k), v, (str(k),), k in needed, 1) for k, v in list(properties.items())[:MAX_PROPERTIES]]


class _Reader:
    def __init__(self, form: Form, gettext: Gettext) -> None:
        self.form = form
        self.gettext = gettext
        self.errors: dict[str, str] = {}

    def value(self, f: Field) -> tuple[bool, object]:
        """(present, value) of one field."""
        if f.kind == "object":
            out: dict[str, object] = {}
            for child in f.children:
                present, value = self.value(child)
                if present:
                    out[child.path[-1]] = value
            return (bool(out) or f.required), out
        raw = self.form.get(f.name)
        if f.kind == "boolean":
            if raw in ("true", "on"):
                return True, True
            if raw == "false" or f.required:  # an unchecked box sends nothing
                return True, False
            return False, None
        if raw.strip() == "":
            if f.required and f.kind not in ("lines",):
                self.errors[f.json_path] = self.gettext("required")
            return False, None
        return self._convert(f, raw)

    def _convert(self, f: Field, raw: str) -> tuple[bool, object]:
        try:
            if f.kind == "enum":
                return True, json.loads(raw)
            if f.kind == "lines":
                items = [line.strip() for line in raw.splitlines() if line.strip()]
                return True, [_scalar(f.item, item, self.gettext) for item in items]
            if f.kind == "json":
                try:
                    return True, json.loads(raw)
                except ValueError as exc:
                    raise ValueError(self.gettext("not valid JSON: %(error)s") % {"error": exc}) from None
            return True, _scalar(f.kind, raw.strip(), self.gettext)
        except ValueError as exc:
            self.errors[f.json_path] = str(exc)
            return False, None


def _scalar(kind: str, text: str, gettext: Gettext = english) -> object:
    if kind == "string":
        return text
    try:
        number = float(text)
    except ValueError:
        raise ValueError(gettext("expected a number, got %(value)r") % {"value": shorten(text, 40)}) from None
    if not math.isfinite(number):
        raise ValueError(gettext("expected a finite number"))
    if kind == "integer":
        if not number.is_integer():
            raise ValueError(gettext("expected an integer, got %(value)r") % {"value": shorten(text, 40)})
        return int(number)
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def arguments_from(
    fields: list[Field], form: Form, gettext: Gettext = _same
) -> tuple[dict[str, object], dict[str, str]]:
    """The arguments the form holds, and the problems by JSON path (``$.target.port``), said in
    the language of ``gettext``."""
    if form.get("mode") == "json":
        raw = form.get("raw").strip() or "{}"
        try:
            value = json.loads(raw)
        except ValueError as exc:
            return {}, {"$": gettext("not valid JSON: %(error)s") % {"error": exc}}
        if not isinstance(value, dict):
            return {}, {"$": gettext("the arguments must be a JSON object")}
        return value, {}
    reader = _Reader(form, gettext)
    arguments: dict[str, object] = {}
    for f in fields:
        present, value = reader.value(f)
        if present:
            arguments[f.path[-1]] = value
    return arguments, reader.errors


def validate_arguments(schema: Mapping[str, Any], arguments: Mapping[str, object]) -> dict[str, str]:
    """Problems of ``arguments`` against the tool's ``inputSchema``, by JSON path (none when
    ``jsonschema`` is not installed, or the schema itself is not valid: the server then judges)."""
    try:
        import jsonschema
        from jsonschema.validators import validator_for
    except ImportError:  # pragma: no cover - jsonschema comes with the serve extra's http stack
        return {}
    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        validator = cls(schema)
        problems: dict[str, str] = {}
        for error in validator.iter_errors(dict(arguments)):
            path = json_path([p for p in error.absolute_path])
            problems.setdefault(path, shorten(error.message, 300))
        return problems
    except (jsonschema.SchemaError, RecursionError, TypeError, ValueError):
        return {}
