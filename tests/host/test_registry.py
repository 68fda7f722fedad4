from __future__ import annotations

import re

import pytest

from mcpwire.errors import UnknownTool
from mcpwire.host.registry import ToolRegistry, legal_name, strict_schema
from mcpwire.protocol.types import JSONObject, Tool

OBJ: JSONObject = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["q"],
}
LEGAL = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_namespacing_reverse_map_and_filters() -> None:
    reg = ToolRegistry()
    tools = [
        Tool(name="search", input_schema=OBJ),
        Tool(name="drop", input_schema=OBJ),
        Tool(name="x", input_schema={}),
    ]
    warnings = reg.set_tools("db", tools, disabled=["drop"])
    assert [t.name for t in reg.tools()] == ["db__search"]
    assert warnings == ["server 'db': skipping tool 'x': inputSchema is not an object schema"]
    assert reg.resolve("db__search").tool.name == "search"
    assert reg.name_for("db", "search") == "db__search"
    with pytest.raises(UnknownTool, match=r"^no tool named 'db__drop'; known tools: db__search$"):
        reg.resolve("db__drop")
    reg.set_tools("db", tools, allowed=["dr*"])
    assert [t.name for t in reg.tools()] == ["db__drop"]
    reg.remove_server("db")
    assert reg.tools() == []


def test_formats_legal_names_and_collisions() -> None:
    assert ToolRegistry(name_format="mcp_{server}_{tool}").set_tools("s", [Tool(name="t", input_schema=OBJ)]) == []
    reg = ToolRegistry(name_format="{server}:{tool}")
    reg.set_tools("s", [Tool(name="t", input_schema=OBJ)])
    (only,) = reg.tools()
    assert LEGAL.match(only.name) and only.name.startswith("s_t_")
    long = "a" * 100
    assert legal_name(long) == legal_name(long) and len(legal_name(long)) == 64
    reg = ToolRegistry()
    reg.set_tools("a", [Tool(name="b__c", input_schema=OBJ)])
    reg.set_tools("a__b", [Tool(name="c", input_schema=OBJ)])
    names = sorted(t.name for t in reg.tools())
    assert names[0] == "a__b__c" and names[1].startswith("a__b__c_") and len(set(names)) == 2
    assert reg.resolve(reg.name_for("a__b", "c")).server == "a__b"


def test_exports() -> None:
    reg = ToolRegistry()
    reg.set_tools("s", [Tool(name="find", input_schema=OBJ, description="Find | things")])
    (openai,) = reg.to_openai()
    assert openai["function"]["name"] == "s__find" and openai["function"]["parameters"] == OBJ
    (strict,) = reg.to_openai(strict=True)
    params = strict["function"]["parameters"]
    assert strict["function"]["strict"] is True
    assert params["additionalProperties"] is False
    assert params["required"] == ["q", "n"]
    assert params["properties"]["n"]["type"] == ["integer", "null"]
    assert params["properties"]["q"]["type"] == "string"
    assert reg.to_anthropic() == [{"name": "s__find", "description": "Find | things", "input_schema": OBJ}]
    assert "| `s__find` | s | Find \\| things |" in reg.to_markdown()
    nested = strict_schema({"type": "object", "properties": {"o": {"type": "object", "properties": {"z": {}}}}})
    inner = nested["properties"]["o"]
    assert inner["type"] == ["object", "null"] and inner["additionalProperties"] is False
    assert inner["properties"]["z"] == {"anyOf": [{}, {"type": "null"}]}
