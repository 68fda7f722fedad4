from __future__ import annotations

import logging
import re

import pytest

from mcpwire.errors import UnknownTool
from mcpwire.host.registry import NAME_RULES, ToolRegistry, legal_name
from mcpwire.host.render import render_result
from mcpwire.host.schema import check_input_schema, strict_schema
from mcpwire.protocol.types import (
    EmbeddedResource,
    ImageContent,
    JSONObject,
    ResourceContents,
    ResourceLink,
    TextContent,
    Tool,
    ToolResult,
    UnknownContent,
)

OBJ: JSONObject = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "What to find."}, "n": {"type": "integer"}},
    "required": ["q"],
}
OPENAI = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tools(*names: str) -> list[Tool]:
    return [Tool(name=n, input_schema=OBJ) for n in names]


def test_namespacing_reverse_map_and_filters(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry()
    listed = [*tools("search", "drop", "read_a", "read_b"), Tool(name="x", input_schema={})]
    warnings = reg.set_tools("db", listed, disabled=["drop"])
    assert [t.name for t in reg.tools()] == ["db__read_a", "db__read_b", "db__search"]
    assert warnings == ["server 'db': skipping tool 'x': inputSchema must have type 'object', got None"]
    assert "skipping tool 'x'" in caplog.text
    assert reg.resolve("db__search").original == ("db", "search")
    assert reg.name_for("db", "search") == "db__search"
    with pytest.raises(
        UnknownTool, match=r"^no tool named 'db__drop'; 3 known tools: db__read_a, db__read_b, db__search$"
    ):
        reg.resolve("db__drop")
    with pytest.raises(UnknownTool, match=r"^server 'db' has no tool 'drop' in the registry$"):
        reg.name_for("db", "drop")
    reg.set_tools("db", listed, allowed=["read_*"], disabled=["read_b"])
    assert [t.name for t in reg.tools()] == ["db__read_a"]
    reg.set_tools("db", listed, prefix="data")
    assert "data__search" in reg and len(reg) == 4
    reg.remove_server("db")
    assert reg.tools() == [] and len(reg) == 0


def test_formats_and_provider_rules() -> None:
    reg = ToolRegistry(name_format="mcp_{server}_{tool}")
    reg.set_tools("gh", tools("create_issue"))
    assert [t.name for t in reg.tools()] == ["mcp_gh_create_issue"]
    colon = ToolRegistry(name_format="{server}:{tool}")
    colon.set_tools("gh", tools("create.issue"))
    (only,) = colon.tools()
    # illegal characters become "_"; a name that needed no truncation or collision keeps no hash
    assert only.name == "gh_create_issue" and only.namespaced == "gh:create.issue"
    assert colon.resolve("gh:create.issue") is only  # the namespaced form resolves too
    mcp = ToolRegistry(name_format="{server}.{tool}", provider="mcp")
    mcp.set_tools("gh", tools("create.issue"))
    assert [t.name for t in mcp.tools()] == ["gh.create.issue"]
    with pytest.raises(ValueError, match="name_format must contain"):
        ToolRegistry(name_format="{server}")
    with pytest.raises(ValueError, match="may use only"):
        ToolRegistry(name_format="{server}_{tool}_{x}")
    with pytest.raises(ValueError, match="provider must be one of"):
        ToolRegistry(provider="gemini")  # type: ignore[arg-type]


def test_long_names_are_truncated_with_a_stable_hash() -> None:
    long = "t" * 100
    name = legal_name("s__" + long)
    assert OPENAI.match(name) and len(name) == 64 and name == legal_name("s__" + long)
    assert name != legal_name("s__" + long + "x")  # a different tool, a different hash
    assert len(legal_name("s__" + "t" * 200, NAME_RULES["mcp"])) == 128
    reg = ToolRegistry()
    reg.set_tools("s", tools(long, long + "x"))
    names = [t.name for t in reg.tools()]
    assert all(OPENAI.match(n) for n in names) and len(set(names)) == 2
    assert {reg.resolve(n).tool.name for n in names} == {long, long + "x"}


def test_collisions(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry()
    # different tools whose legal names collide: the changed one gets the hash, in any order
    for order in (["a.b", "a_b"], ["a_b", "a.b"]):
        reg.set_tools("s", tools(*order))
        assert reg.resolve("s__a_b").tool.name == "a_b"
        hashed = reg.name_for("s", "a.b")
        assert hashed.startswith("s__a_b_") and len(hashed) == len("s__a_b_") + 6
    # identical namespaced names are ambiguous: the later one is skipped with a warning
    reg = ToolRegistry()
    reg.set_tools("a", tools("b__c"))
    with caplog.at_level(logging.WARNING):
        warnings = reg.set_tools("a__b", tools("c"))
    assert warnings == ["server 'a__b': skipping tool 'c': its name 'a__b__c' collides with tool 'b__c' of server 'a'"]
    assert reg.resolve("a__b__c").server == "a"
    assert reg.set_tools("d", [*tools("x"), *tools("x")]) == [
        "server 'd': skipping tool 'x': the server lists the name twice"
    ]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({}, "inputSchema must have type 'object', got None"),
        ({"type": "string"}, "inputSchema must have type 'object', got 'string'"),
        ({"type": "object", "properties": []}, "inputSchema.properties must map names to schemas"),
        ({"type": "object", "required": "q"}, "inputSchema.required must be a list of property names"),
        (
            {"type": "object", "properties": {"q": {"type": "strng"}}},
            "inputSchema is not a valid JSON Schema at properties/q/type: "
            "'strng' is not valid under any of the given schemas",
        ),
        (
            {"type": "object", "properties": {"q": {"minLength": -1}}},
            "inputSchema is not a valid JSON Schema at properties/q/minLength: -1 is less than the minimum of 0",
        ),
        ({"type": "object", "$schema": 5}, "inputSchema.$schema must be a metaschema URI string, got a number"),
        ({"type": "object", "$schema": None}, "inputSchema.$schema must be a metaschema URI string, got null"),
        ({"type": "object", "$schema": ["x"]}, "inputSchema.$schema must be a metaschema URI string, got an array"),
        (
            {"type": "object", "$schema": "https://example.com/dialect"},
            "inputSchema.$schema names an unknown metaschema: 'https://example.com/dialect'",
        ),
        (
            {"type": "object", "$schema": "http://[::1"},
            "inputSchema cannot be checked as a JSON Schema: ValueError: Invalid IPv6 URL",
        ),
        (
            {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#", "properties": {"q": {"type": 1}}},
            "inputSchema is not a valid JSON Schema at properties/q/type: "
            "1 is not valid under any of the given schemas",
        ),
    ],
)
def test_invalid_input_schemas(schema: JSONObject, problem: str) -> None:
    assert check_input_schema(schema) == problem
    reg = ToolRegistry()
    assert reg.set_tools("s", [Tool(name="t", input_schema=schema)]) == [f"server 's': skipping tool 't': {problem}"]


def test_valid_input_schemas() -> None:
    assert check_input_schema(OBJ) is None
    assert check_input_schema({"type": "object"}) is None
    assert check_input_schema({"type": "object", "properties": {"x": True}, "$defs": {"d": {"type": "string"}}}) is None
    for dialect in (
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
    ):
        assert check_input_schema({"type": "object", "$schema": dialect}) is None


def test_openai_export_and_strict_mode() -> None:
    reg = ToolRegistry()
    reg.set_tools("s", [Tool(name="find", input_schema=OBJ, description="Find | things", title="Finder")])
    (openai,) = reg.to_openai()
    assert openai == {
        "type": "function",
        "function": {"name": "s__find", "description": "Finder. Find | things", "parameters": OBJ},
    }
    (strict,) = reg.to_openai(strict=True)
    params = strict["function"]["parameters"]
    assert strict["function"]["strict"] is True
    assert params["additionalProperties"] is False and params["required"] == ["q", "n"]
    assert params["properties"]["n"]["type"] == ["integer", "null"]
    assert params["properties"]["q"]["type"] == "string"
    assert OBJ["required"] == ["q"] and "additionalProperties" not in OBJ  # the tool's schema is untouched
    (flat,) = reg.to_openai(api="responses")
    assert flat["type"] == "function" and flat["name"] == "s__find" and "function" not in flat


def test_strict_schema_recurses() -> None:
    schema = {
        "type": "object",
        "properties": {
            "o": {"type": "object", "properties": {"z": {}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "choice": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"a": {"type": "number"}}}]},
            "ref": {"$ref": "#/$defs/thing"},
            "mode": {"type": "string", "enum": ["a", "b"]},
        },
        "required": ["items"],
        "$defs": {"thing": {"type": "object", "properties": {"p": {"type": "boolean"}}}},
    }
    out = strict_schema(schema)
    inner = out["properties"]["o"]
    assert inner["type"] == ["object", "null"] and inner["additionalProperties"] is False
    assert inner["properties"]["z"] == {"anyOf": [{}, {"type": "null"}]}
    item = out["properties"]["items"]["items"]
    assert item["required"] == ["k"] and item["properties"]["k"]["type"] == ["string", "null"]
    assert out["properties"]["items"]["type"] == "array"  # required: not nullable
    choice = out["properties"]["choice"]
    assert "oneOf" not in choice and choice["anyOf"][1]["additionalProperties"] is False
    assert choice["anyOf"][-1] == {"type": "null"}
    assert out["$defs"]["thing"]["additionalProperties"] is False
    assert out["properties"]["ref"] == {"anyOf": [{"$ref": "#/$defs/thing"}, {"type": "null"}]}
    assert out["properties"]["mode"]["enum"] == ["a", "b", None]


def test_anthropic_and_markdown_exports() -> None:
    reg = ToolRegistry()
    reg.set_tools("s", [Tool(name="find", input_schema=OBJ, description="Find things.")])
    reg.set_tools("t", [Tool(name="ping", input_schema={"type": "object"})])
    assert reg.to_anthropic() == [
        {"name": "s__find", "description": "Find things.", "input_schema": OBJ},
        {"name": "t__ping", "description": "", "input_schema": {"type": "object"}},
    ]
    assert reg.to_markdown() == (
        "## Tools\n\n"
        "### `s__find`\n\nFind things.\n\nServer: `s`, tool `find`.\n\nParameters:\n"
        "- `q` (string, required): What to find.\n"
        "- `n` (integer, optional)\n\n"
        "### `t__ping`\n\nServer: `t`, tool `ping`.\n\nNo parameters.\n"
    )
    assert ToolRegistry().to_markdown() == "## Tools\n\nNo tools are available.\n"


def test_text_rendering_for_models() -> None:
    result = ToolResult(
        content=[
            TextContent(text="hello"),
            ImageContent(data="AAAA", mime_type="image/png"),
            ResourceLink(uri="file:///a.txt", name="a"),
            EmbeddedResource(resource=ResourceContents(uri="file:///b", text="inline")),
            EmbeddedResource(resource=ResourceContents(uri="file:///c", blob="AAAAAA==", mime_type="application/pdf")),
            UnknownContent(type="hologram", raw={}),
        ]
    )
    assert render_result(result).splitlines() == [
        "hello",
        "[image: image/png, 3 bytes]",
        "[resource link: a <file:///a.txt>]",
        "inline",
        "[resource file:///c: application/pdf, 4 bytes]",
        "[hologram content]",
    ]
    assert render_result(ToolResult(structured_content={"sum": 3})) == '{"sum":3}'
    assert render_result(ToolResult(content=[TextContent(text="nope")], is_error=True)) == "Error: nope"
    assert render_result(ToolResult(is_error=True)) == "Error: the tool failed without a message"
