"""Stray answers are logged as well as counted; an outputSchema the client cannot use, or a
missing jsonschema, never breaks a call."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import trio
from _faulty import open_faulty

import mcpwire
import mcpwire.client.validation
from mcpwire import OutputSchemaError, RequestTimeout

SCHEMA_SERVER = Path(__file__).resolve().parent / "fixtures" / "output_schema_server.py"


def schema_server(schema: object, structured: object) -> list[str]:
    return [sys.executable, "-u", str(SCHEMA_SERVER), json.dumps(schema), json.dumps(structured)]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name.startswith("mcpwire.client") and r.levelno == logging.WARNING
    ]


async def test_unknown_ids_are_logged_up_to_a_bound(caplog: pytest.LogCaptureFixture) -> None:
    """JR-06: "counted and logged": each of the first five answers with an unknown id is a warning
    naming the id; the rest are only counted."""
    stray = [f'{{"jsonrpc":"2.0","id":{900 + n},"result":{{}}}}' for n in range(7)]
    with trio.fail_after(10):
        async with open_faulty() as client:
            assert (await client.call_tool("raw", {"lines": stray})).text() == "done"
            stats = client.statistics()
    assert stats.unknown_responses == 7
    logged = [m for m in warnings_of(caplog) if "which no request of this client has" in m]
    expected = [f"faulty: dropped an answer to id {900 + n}, which no request of this client has" for n in range(4)]
    assert logged[:4] == expected
    assert logged[4] == (
        "faulty: dropped an answer to id 904, which no request of this client has; "
        "further ones are counted in statistics(), not logged"
    )
    assert len(logged) == 5


async def test_an_unknown_error_answer_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    stray = ['{"jsonrpc":"2.0","id":"abc","error":{"code":-32603,"message":"who?"}}']
    with trio.fail_after(10):
        async with open_faulty() as client:
            await client.call_tool("raw", {"lines": stray})
    assert "faulty: dropped an answer to id 'abc', which no request of this client has" in warnings_of(caplog)


async def test_a_late_answer_is_logged_at_debug_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpwire.client")
    with trio.fail_after(10):
        async with open_faulty() as client:
            with pytest.raises(RequestTimeout):
                await client.call_tool("slow", {"late": True}, timeout=0.3)
            await client.ping()  # answered after the late answer: the server handles one message at a time
            assert client.statistics().late_responses == 1
    late = [r for r in caplog.records if "dropped a late answer" in r.getMessage()]
    assert [r.levelno for r in late] == [logging.DEBUG]
    assert not [m for m in warnings_of(caplog) if "dropped an answer" in m]


SCHEMAS_THAT_CANNOT_BE_USED = {
    "$schema-not-a-string": {"type": "object", "$schema": 5},
    "not-a-schema": {"type": "object", "properties": 3},
    "pattern-not-a-regex": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}},
}


@pytest.mark.parametrize("schema", SCHEMAS_THAT_CANNOT_BE_USED.values(), ids=SCHEMAS_THAT_CANNOT_BE_USED)
async def test_an_output_schema_that_cannot_be_used_is_logged_not_raised(
    schema: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    """A server's broken outputSchema is the server's fault: the call returns its result, with a
    warning naming server and tool; the structural checks still apply."""
    with trio.fail_after(10):
        async with mcpwire.open_client(schema_server(schema, {"a": "x"}), name="odd", era_cache=False) as client:
            await client.list_tools()  # the outputSchema is known from the list (TL-11)
            result = await client.call_tool("t", {})
            again = await client.call_tool("t", {})
    assert result.structured_content == {"a": "x"} and again.structured_content == {"a": "x"}
    assert [m for m in warnings_of(caplog) if m.startswith("odd: ") and "'t'" in m and "outputSchema" in m]


async def test_structured_content_must_still_be_an_object() -> None:
    """The shape check does not depend on the schema being usable (2025-11-25: an object)."""
    with trio.fail_after(10):
        async with mcpwire.open_client(schema_server({"$schema": 5}, [1, 2]), name="odd", era_cache=False) as client:
            await client.list_tools()
            with pytest.raises(OutputSchemaError, match="not an object"):
                await client.call_tool("t", {})


async def test_without_jsonschema_calls_work_and_say_once_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """jsonschema is an extra (``schema``): without it a tool with an outputSchema is
    still callable; one warning names the extra."""
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # makes ``import jsonschema`` fail
    monkeypatch.setattr(mcpwire.client.validation, "_jsonschema_missing_logged", False)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with trio.fail_after(10):
        async with mcpwire.open_client(schema_server(schema, {"a": "x"}), name="odd", era_cache=False) as client:
            await client.list_tools()
            first = await client.call_tool("t", {})
            second = await client.call_tool("t", {})
    assert first.structured_content == second.structured_content == {"a": "x"}
    missing = [m for m in warnings_of(caplog) if "jsonschema is not installed" in m]
    assert len(missing) == 1 and "pip install 'handwired-mcp[schema]'" in missing[0]


async def test_with_jsonschema_the_same_answer_is_refused() -> None:
    """The counterpart of the test above: the schema is applied when jsonschema is there."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with trio.fail_after(10):
        async with mcpwire.open_client(schema_server(schema, {"a": "x"}), name="odd", era_cache=False) as client:
            await client.list_tools()
            with pytest.raises(OutputSchemaError, match=r"outputSchema at a: 'x' is not of type 'integer'"):
                await client.call_tool("t", {})


async def test_progress_reaches_the_notification_iterator_too() -> None:
    """Progress goes to the call's ``on_progress`` and, like every notification, to
    ``notifications()``, in order."""
    seen: list[float] = []
    with trio.fail_after(10):
        async with open_faulty() as client:
            notes = client.notifications()
            result = await client.call_tool("burst", {"count": 3}, on_progress=lambda p: seen.append(p.progress))
            received = [await anext(notes) for _ in range(3)]
            await notes.aclose()
            stats = client.statistics()
    assert result.text() == "burst of 3"
    assert [n.method for n in received] == ["notifications/progress"] * 3
    assert [n.params["progress"] for n in received] == seen == [1, 2, 3]
    assert stats.notifications_dropped == 0
