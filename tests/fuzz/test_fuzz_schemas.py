"""The argument strategies and the oracles' pure parts, without a server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, seed, settings
from hypothesis import strategies as st
from mcpwire.fuzz.exchange import Deep, dumps
from mcpwire.fuzz.oracles import legal_error_code
from mcpwire.fuzz.schemas import SchemaError, arguments, invalid_arguments, valid_arguments, validator_for

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


def test_lone_surrogates_are_written_as_escapes_in_utf8_lines() -> None:
    """A lone surrogate has no UTF-8 form; JSON writes it as an escape, which a server then decodes."""
    line = dumps({"k": "a\ud800b\udfff", "\ud83d": "\u00e9\U0001f600\u2028\x00"})
    assert line == '{"k":"a\\ud800b\\udfff","\\ud83d":"\u00e9\U0001f600\u2028\\u0000"}'.encode()
    assert json.loads(line.decode("utf-8")) == {"k": "a\ud800b\udfff", "\ud83d": "\u00e9\U0001f600\u2028\x00"}


AWKWARD: dict[str, Any] = {
    "empty": lambda s: s == "",
    "NUL": lambda s: "\x00" in s,
    "U+2028": lambda s: "\u2028" in s,
    "a lone surrogate": lambda s: any("\ud800" <= c <= "\udfff" for c in s),
    "over 300 characters": lambda s: len(s) > 300,
}


@pytest.mark.parametrize("seed_value", [3, 19, 123])
def test_awkward_strings_come_within_a_tools_budget_whatever_the_seed(seed_value: int) -> None:
    """The fuzzer's 100 examples of a tool with one string argument (valid and invalid arguments
    mixed as in a run) include the empty string, NUL, U+2028, a lone surrogate and a long string,
    for seeds that once drew no NUL at all."""
    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    seen: set[str] = set()

    @seed(seed_value)
    @settings(SETTINGS, max_examples=100, derandomize=False, phases=[Phase.generate])
    @given(arguments(schema))
    def run(case: tuple[bool, Any]) -> None:
        valid, args = case
        if valid:
            seen.update(name for name, wanted in AWKWARD.items() if wanted(args["key"]))

    run()
    assert sorted(seen) == sorted(AWKWARD)


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
        (-32021, "2025-11-25", True),  # JSON-RPC's implementation-defined server errors before 2026-07-28
        (-32100, "2025-11-25", False),
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


KEYWORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "contains": {"const": "x"}, "minContains": 2},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}], "items": False},
        "code": {"type": "string", "examples": ["ABC-1"], "maxLength": 5},
        "kind": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
        "odd": {"type": "integer", "not": {"multipleOf": 2}},
        "card": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "minProperties": 2},
        "labels": {"type": "object", "patternProperties": {"^l_[0-9]$": {"type": "boolean"}},
                   "additionalProperties": False},
        "when": {"type": "string", "format": "uri-template"},
        "b64": {"type": "string", "format": "byte"},
    },
    "dependentRequired": {"kind": ["odd"]},
    "required": ["tags", "card"],
    "additionalProperties": False,
}  # fmt: skip
KEYWORDS = validator_for(KEYWORD_SCHEMA)


@SETTINGS
@given(valid_arguments(KEYWORD_SCHEMA))
def test_every_keyword_a_tool_may_use_is_honoured(value: Any) -> None:
    """contains/minContains, tuple items, examples, if/then/else, not, propertyNames, minProperties,
    patternProperties, dependentRequired, formats: all generated valid, without filtering everything away."""
    assert KEYWORDS.is_valid(value)
    assert value["tags"].count("x") >= 2 and len(value["card"]) >= 2
    if "kind" in value:
        assert "odd" in value


@pytest.mark.parametrize(
    ("schema", "wanted"),
    [
        ({"type": "object", "patternProperties": {"^l_[0-9]$": {"type": "boolean"}}, "additionalProperties": False},
         lambda v: any(k.startswith("l_") for k in v)),
        ({"type": "string", "examples": ["ABC-1"], "maxLength": 5}, lambda v: v == "ABC-1"),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
          "dependentRequired": {"a": ["b"]}}, lambda v: "a" in v),
        ({"type": "array", "contains": {"const": 7}, "minContains": 2}, lambda v: v.count(7) >= 2),
        ({"type": "string", "maxLength": 400}, lambda v: len(v) > 300),
        ({"type": "string"}, lambda v: "\x00" in v),
        ({"type": "integer"}, lambda v: v >= 2**53),
    ],
)  # fmt: skip
def test_generation_reaches_the_interesting_values(schema: dict[str, Any], wanted: Any) -> None:
    """Pattern-named properties, examples, dependent properties, contains, long strings, NUL, huge ints."""
    quick = settings(SETTINGS, max_examples=500, phases=[Phase.generate])  # found is enough: no shrinking
    value = find(valid_arguments(schema), wanted, settings=quick)
    assert validator_for(schema).is_valid(value) and wanted(value)


DRAFT7_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "definitions": {"flag": {"type": "boolean"}},
    "properties": {
        "pair": {"type": "array", "items": [{"type": "integer"}, {"$ref": "#/definitions/flag"}],
                 "additionalItems": False},
        "low": {"type": "number", "minimum": 0, "exclusiveMinimum": 0},
        "a": {"type": "string"},
        "b": {"type": "integer"},
    },
    "dependencies": {"a": ["b"]},
}  # fmt: skip


@SETTINGS
@given(valid_arguments(DRAFT7_SCHEMA))
def test_draft_07_spellings_are_honoured(value: Any) -> None:
    """Tuple-form items, additionalItems, exclusiveMinimum as a number, dependencies, definitions."""
    assert validator_for(DRAFT7_SCHEMA).is_valid(value)
    if "a" in value:
        assert "b" in value


def test_recursive_refs_stop_at_a_depth() -> None:
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
    schema = {"type": "object", "$defs": {"node": node}, "properties": {"root": {"$ref": "#/$defs/node"}}}

    @SETTINGS
    @given(valid_arguments(schema))
    def check(value: Any) -> None:
        assert validator_for(schema).is_valid(value)

    check()
