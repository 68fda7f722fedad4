"""The argument strategies and the oracles' pure parts, without a server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.exchange import Deep, dumps
from fuzz.oracles import legal_error_code
from fuzz.schemas import SchemaError, invalid_arguments, valid_arguments, validator_for

SETTINGS = settings(
    max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)

RICH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"level": {"enum": ["low", "high"]}, "point": {"type": "array", "prefixItems": [{"type": "number"}] * 2}},
    "properties": {
        "count": {"type": "integer", "minimum": -3, "exclusiveMaximum": 10, "multipleOf": 1},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "mail": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date-time"},
        "level": {"$ref": "#/$defs/level"},
        "where": {"$ref": "#/$defs/point"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
        "either": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        "nested": {
            "type": "object",
            "properties": {"x": {"const": 1}},
            "required": ["x"],
            "additionalProperties": False,
        },
    },
    "required": ["count", "level", "name"],
    "additionalProperties": False,
}
RICH = validator_for(RICH_SCHEMA)


@SETTINGS
@given(valid_arguments(RICH_SCHEMA))
def test_valid_arguments_validate(value: Any) -> None:
    assert RICH.is_valid(value)
    assert {"count", "level", "name"} <= value.keys()


@SETTINGS
@given(invalid_arguments(RICH_SCHEMA))
def test_invalid_arguments_do_not_validate(value: Any) -> None:
    if isinstance(value, dict) and any(isinstance(v, Deep) for v in value.values()):
        assert b"[[[[" in dumps(value)  # deep nesting, written without recursion
        return
    assert not RICH.is_valid(value)


@SETTINGS
@given(st.data())
def test_tool_schemas_of_every_shape_are_usable(data: st.DataObject) -> None:
    schema = data.draw(
        st.sampled_from(
            [
                {"type": "object"},
                {"type": "object", "properties": {}},
                {"type": "object", "properties": {"a": {"type": ["string", "null"]}}, "required": ["a"]},
                {"type": "object", "properties": {"a": {"allOf": [{"type": "integer"}, {"minimum": 5}]}}},
                {"type": "object", "properties": {"a": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}},
                {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
                {
                    "type": "object",
                    "definitions": {"d": {"type": "boolean"}},
                    "properties": {"a": {"$ref": "#/definitions/d"}},
                },
            ]
        )
    )
    value = data.draw(valid_arguments(schema))
    assert validator_for(schema).is_valid(value)


def test_remote_refs_are_never_fetched() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/schema.json"}}, "required": ["a"]}
    with pytest.raises(SchemaError, match=r"remote \$ref"):
        valid_arguments(schema).example()


def test_deep_values_are_encoded_without_recursion() -> None:
    line = dumps({"a": Deep(5000)})
    assert line.startswith(b'{"a":' + b"[" * 5000 + b"0") and line.endswith(b"]" * 5000 + b"}")


@pytest.mark.parametrize(
    ("code", "revision", "legal"),
    [
        (-32700, "2025-11-25", True),
        (-32601, "2026-07-28", True),
        (-32002, "2025-06-18", True),
        (-32010, "2026-07-28", True),
        (-32042, "2025-11-25", True),
        (-32042, "2026-07-28", False),
        (-32021, "2026-07-28", True),
        (-32021, "2025-11-25", False),
        (-32050, "2026-07-28", False),
        (-32604, "2024-11-05", False),
        (-1, "2025-11-25", True),
        (404, "2026-07-28", True),
        ("1", "2026-07-28", False),
        (True, "2026-07-28", False),
    ],
)
def test_legal_error_codes(code: object, revision: str, legal: bool) -> None:
    assert legal_error_code(code, revision) is legal
