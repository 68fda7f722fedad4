"""The console's pure parts: sessions, pasted entries, the form generated from a schema and read
back, result blocks, and the charts' figures."""

from __future__ import annotations

import base64

import pytest

from mcpwire.service.console.charts import BUCKET_SECONDS, BUCKETS, server_charts
from mcpwire.service.console.forms import arguments_from, fields_of, json_path, validate_arguments
from mcpwire.service.console.i18n import translations
from mcpwire.service.console.results import blocks_of, table_of
from mcpwire.service.console.servers import parse_entry
from mcpwire.service.console.web import Form
from mcpwire.service.problems import ProblemError
from mcpwire.service.store import AuditPage, AuditRow

SCHEMA = {
    "type": "object",
    "required": ["target", "level"],
    "properties": {
        "level": {"type": "integer", "minimum": 1, "maximum": 5},
        "ratio": {"type": "number"},
        "target": {
            "type": "object",
            "required": ["host"],
            "properties": {
                "host": {"type": "string"},
                "a/b": {"type": "object", "properties": {"deep": {"type": ["boolean", "null"]}}},
            },
        },
        "size": {"enum": [1, 2, "big"]},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "extra": {"anyOf": [{"type": "string"}, {"type": "object"}]},
        "flag": {"type": "boolean"},
    },
}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("t", '{"command": "x"}', ("t", {"command": "x"})),
        ("", '{"mcpServers": {"clock": {"url": "http://h/mcp"}}}', ("clock", {"url": "http://h/mcp"})),
        ("", '{"clock": {"command": "x"}}', ("clock", {"command": "x"})),
        ("clock", '{"clock": {"command": "x"}}', ("clock", {"command": "x"})),
    ],
)
def test_pasted_entries(name: str, text: str, expected: tuple[str, dict[str, str]]) -> None:
    assert parse_entry(name, text) == expected


@pytest.mark.parametrize(
    ("name", "text", "path", "detail"),
    [
        (
            "t",
            "{nope",
            "$",
            r"^the entry is invalid: not valid JSON at line 1, column 2 "
            r"\(Expecting property name enclosed in double quotes\)$",
        ),
        ("t", "[1]", "$", r"^the entry is invalid: expected a JSON object: one mcp.json server entry$"),
        ("", '{"command": "x"}', None, r"^give the server a name$"),
        ("a", '{"b": {"command": "x"}}', None, r"^the name field says 'a' but the pasted entry is named 'b'$"),
    ],
)
def test_pasted_entries_refused(name: str, text: str, path: str | None, detail: str) -> None:
    with pytest.raises(ProblemError, match=detail) as caught:
        parse_entry(name, text)
    assert caught.value.status == 422
    assert [e.path for e in caught.value.errors] == ([path] if path else [])


def test_fields_follow_the_schema() -> None:
    fields = {f.path[-1]: f for f in fields_of(SCHEMA)}
    assert [(f.kind, f.required) for f in fields.values()] == [
        ("integer", True), ("number", False), ("object", True), ("enum", False), ("lines", False),
        ("json", False), ("boolean", False),
    ]  # fmt: skip
    assert fields["level"].type_label == "integer, 1..5"
    target = fields["target"]
    assert [c.name for c in target.children] == ["arg/target/host", "arg/target/a~1b"]
    assert target.children[1].children[0].json_path == '$.target["a/b"].deep'
    assert fields["size"].options == [("1", "1"), ("2", "2"), ('"big"', "big")]
    assert len({f.id for f in fields.values()}) == len(fields)


def test_the_form_reads_back_as_typed_arguments() -> None:
    fields = fields_of(SCHEMA)
    form = Form(
        [
            ("arg/level", "3"), ("arg/ratio", "0.5"), ("arg/target/host", "h"), ("arg/target/a~1b/deep", "false"),
            ("arg/size", "2"), ("arg/tags", "1\n 2 \n\n"), ("arg/extra", '{"k": [1]}'), ("arg/flag", ""),
        ]
    )  # fmt: skip
    arguments, problems = arguments_from(fields, form)
    assert problems == {}
    assert arguments == {
        "level": 3, "ratio": 0.5, "target": {"host": "h", "a/b": {"deep": False}}, "size": 2, "tags": [1, 2],
        "extra": {"k": [1]},
    }  # fmt: skip
    assert validate_arguments(SCHEMA, arguments) == {}


def test_the_form_names_each_bad_value_at_its_path() -> None:
    fields = fields_of(SCHEMA)
    form = Form([("arg/level", "2.5"), ("arg/tags", "1\nx"), ("arg/extra", "{bad")])
    _, problems = arguments_from(fields, form)
    assert problems["$.level"] == "expected an integer, got '2.5'"
    assert problems["$.tags"] == "expected a number, got 'x'"
    assert problems["$.extra"].startswith("not valid JSON: Expecting property name")
    assert problems["$.target.host"] == "required"
    # the same problems in the page's language
    _, said = arguments_from(fields, form, translations("zh-Hans").gettext)
    assert said["$.level"] == "应为整数，实际为 '2.5'"  # noqa: RUF001 - Chinese punctuation
    assert said["$.target.host"] == "必填"
    assert validate_arguments(SCHEMA, {"level": 9, "target": {}}) == {
        "$.level": "9 is greater than the maximum of 5",
        "$.target": "'host' is a required property",
    }


def test_raw_json_mode() -> None:
    fields = fields_of(SCHEMA)
    assert arguments_from(fields, Form([("mode", "json"), ("raw", '{"a": 1}'), ("arg/level", "x")])) == ({"a": 1}, {})
    assert arguments_from(fields, Form([("mode", "json"), ("raw", "[1]")])) == (
        {},
        {"$": "the arguments must be a JSON object"},
    )
    assert json_path(["a", 0, "b c"]) == '$.a[0]["b c"]'


def test_result_blocks_show_only_raster_images_and_never_links() -> None:
    png = base64.b64encode(b"\x89PNG....").decode()
    blocks = blocks_of(
        [
            {"type": "text", "text": "<b>"},
            {"type": "image", "mimeType": "image/svg+xml", "data": base64.b64encode(b"<svg/>").decode()},
            {"type": "image", "mimeType": "image/png", "data": png},
            {"type": "image", "mimeType": "image/png", "data": "not base64!"},
            {"type": "resource_link", "uri": "javascript:alert(1)", "name": "x"},
            {"type": "mystery", "x": 1},
        ]
    )
    assert [b.kind for b in blocks] == ["text", "other", "image", "other", "link", "other"]
    assert blocks[1].note == "image of type image/svg+xml (6 bytes); not shown"
    assert blocks[2].src == f"data:image/png;base64,{png}"
    assert blocks[3].note == "image whose data is not base64; not shown"
    assert blocks[4].uri == "javascript:alert(1)" and not blocks[4].src


def test_structured_content_as_a_table_or_a_tree() -> None:
    assert table_of({"rows": [{"a": 1, "b": "x"}, {"a": 2, "c": None}]}) == (
        ["a", "b", "c"],
        [[1, "x", None], [2, None, None]],
    )
    assert table_of({"a": 1}) is None
    assert table_of([{"a": {"nested": 1}}]) is None


class _Audit:
    def __init__(self, rows: list[AuditRow]) -> None:
        self.rows = rows

    async def audit(self, *, server: str, limit: int) -> AuditPage:
        return AuditPage(items=[r for r in self.rows if r.server == server][:limit])


def _row(i: int, at: float, outcome: str = "ok", latency: float = 10.0, kind: str = "tool") -> AuditRow:
    return AuditRow(
        id=i, time=at, server="s", kind=kind, tool="t", name="s__t", outcome=outcome, trace_id=None, run_id=None,
        caller=None, record={"latency_ms": latency},
    )  # fmt: skip


async def test_charts_count_calls_and_latency_per_bucket() -> None:
    now = 10_000.0
    start = now - BUCKETS * BUCKET_SECONDS
    rows = [
        _row(5, now - 1, latency=30.0),
        _row(4, now - 2, outcome="error", latency=10.0),
        _row(3, now - 3, kind="approval"),
        _row(2, start + 1, latency=5.0),
        _row(1, start - 1),  # outside the window
    ]
    (chart,) = await server_charts(_Audit(rows), ["s"], now=now)  # type: ignore[arg-type]
    assert (chart.calls, chart.errors, chart.peak) == (3, 1, 2)
    assert [b.calls for b in chart.bars if b.calls] == [1, 2]
    last = chart.bars[-1]
    assert last.ok_height + last.error_height == 40 and last.error_height == 20
    assert chart.latency_peak_ms == 10.0 and chart.p50_ms == 10.0
    assert chart.latency_points.count(",") == 2
