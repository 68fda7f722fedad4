"""The console's message catalogue: every string the console's code and templates (and the
catalogue of well-known servers) mark is in it, translated, with the same placeholders, and the
compiled catalogue that ships is the one its source says; the language is chosen from the
browser, the cookie, or English; the API lists the presets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from mcpwire.catalog import PRESETS
from mcpwire.service.console import i18n
from mcpwire.service.console.i18n import LOCALE_DIR, negotiate, translations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _harness import demo_entry, running_service, write_config

ROOT = Path(__file__).resolve().parents[2]
PO = LOCALE_DIR / "zh_Hans" / "LC_MESSAGES" / "console.po"
MO = PO.with_suffix(".mo")
#: the keywords of babel.cfg's extraction (README: "The console in other languages")
KEYWORDS = {**DEFAULT_KEYWORDS, "Preset": (2,), "Param": (2,)}


def _key(value: str | tuple[str, ...] | list[str]) -> str | tuple[str, ...]:
    return value if isinstance(value, str) else tuple(value)


def extracted() -> set[str | tuple[str, ...]]:
    with (LOCALE_DIR.parent / "babel.cfg").open() as config:
        method_map, options_map = parse_mapping_cfg(config)
    found: set[str | tuple[str, ...]] = set()
    for _, _, message, _, _ in extract_from_dir(
        ROOT, method_map, options_map, keywords=KEYWORDS, directory_filter=lambda d: ".venv" not in d
    ):
        found.add(_key(message))
    return found


def test_every_marked_string_is_in_the_catalogue_and_translated() -> None:
    with PO.open("rb") as f:
        catalog = read_po(f)
    ids = {_key(m.id): m for m in catalog if m.id}
    wanted = extracted()
    assert wanted - ids.keys() == set(), "run the extraction and update the catalogue (README)"
    assert ids.keys() - wanted == set(), "the catalogue has strings the console no longer uses"
    for message in ids.values():
        strings = [message.string] if isinstance(message.string, str) else list(message.string)
        assert all(s.strip() for s in strings), f"untranslated: {message.id!r}"
        assert not message.fuzzy, f"fuzzy: {message.id!r}"
    # babel's own checks: the same python-format placeholders on both sides
    problems = [(m.id, errors) for m, errors in catalog.check()]
    assert problems == []


def test_the_compiled_catalogue_is_the_source_compiled() -> None:
    with PO.open("rb") as f:
        source = read_po(f)
    with MO.open("rb") as f:
        compiled = read_mo(f)
    assert {_key(m.id): _key(m.string) for m in compiled if m.id} == {
        _key(m.id): _key(m.string) for m in source if m.id
    }


def test_every_preset_and_its_values_are_described_in_chinese() -> None:
    zh = translations("zh-Hans")
    for preset in PRESETS.values():
        assert zh.gettext(preset.description) != preset.description, preset.name
        for param in preset.params:
            assert zh.gettext(param.description) != param.description, (preset.name, param.name)


@pytest.mark.parametrize(
    ("header", "cookie", "expected"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", None, "zh-Hans"),
        ("zh-TW", None, "zh-Hans"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", None, "en"),
        ("fr-FR,zh;q=0.5,en;q=0.4", None, "zh-Hans"),
        ("fr-FR, de", None, "en"),
        ("en;q=0.2, zh;q=0.9", None, "zh-Hans"),
        ("zh;q=0", None, "en"),
        ("", None, "en"),
        (None, None, "en"),
        ("zh-CN", "en", "en"),
        ("en", "zh-Hans", "zh-Hans"),
        ("zh-CN", "klingon", "zh-Hans"),
        ("x" * 5000, None, "en"),
    ],
)
def test_the_language_comes_from_the_cookie_then_the_browser(
    header: str | None, cookie: str | None, expected: str
) -> None:
    assert negotiate(header, cookie) == expected


def test_english_is_the_source_text() -> None:
    assert translations("en").gettext("Servers") == "Servers"
    assert translations("zh-Hans").gettext("Servers") == "服务器"
    assert set(i18n.LANGUAGES) == {"en", "zh-Hans"}


async def test_pages_answer_in_the_browsers_language_and_the_api_lists_the_presets(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"demo": demo_entry()})
    async with running_service(f"sqlite:///{tmp_path / 'service.db'}", config) as svc:
        zh = await svc.client.get("/tools", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
        assert zh.status_code == 200
        assert '<html lang="zh-Hans">' in zh.text and "<h1>工具</h1>" in zh.text
        assert zh.headers["content-language"] == "zh-Hans"
        assert "Accept-Language" in zh.headers["vary"]
        en = await svc.client.get("/tools", headers={"Accept-Language": "en-GB"})
        assert '<html lang="en">' in en.text and "<h1>Tools</h1>" in en.text
        # the switch: a cookie, then the page it came from
        switched = await svc.client.post(
            "/console/language", data={"lang": "zh-Hans", "next": "/audit?kind=pin"}, headers={"Origin": svc.url}
        )
        assert switched.status_code == 303 and switched.headers["location"] == "/audit?kind=pin"
        assert "mcpwire_lang=zh-Hans" in switched.headers["set-cookie"]
        assert "<h1>审计日志</h1>" in (await svc.client.get("/audit", headers={"Accept-Language": "en"})).text
        away = await svc.client.post("/console/language", data={"lang": "en", "next": "//evil.example/"})
        assert away.headers["location"] == "/"

        listed = (await svc.client.get("/api/v1/catalog")).json()["items"]
        assert [p["name"] for p in listed] == list(PRESETS)
        sqlite = next(p for p in listed if p["name"] == "sqlite")
        assert sqlite["command"] == ["uvx", "mcp-server-sqlite"] and sqlite["transport"] == "stdio"
        assert sqlite["params"] == [
            {"name": "database", "description": "the database file", "required": True, "repeated": False,
             "path": True, "flag": "--db-path"}
        ]  # fmt: skip
        hefeng = (await svc.client.get("/api/v1/catalog/hefeng")).json()
        assert hefeng["environment"] == ["HEFENG_API_HOST", "HEFENG_API_KEY"]
        assert hefeng["env"] == {"HEFENG_API_HOST": "${env:HEFENG_API_HOST}", "HEFENG_API_KEY": "${env:HEFENG_API_KEY}"}
        missing = await svc.client.get("/api/v1/catalog/nope")
        assert missing.status_code == 404
        assert missing.json()["detail"] == "no preset named 'nope'; GET /api/v1/catalog lists them"
        assert "/api/v1/catalog" in (await svc.client.get("/api/v1/openapi.json")).json()["paths"]
