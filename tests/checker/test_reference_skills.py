"""The reference server's Skills extension (SEP-2640) beyond what the official runner samples.

The runner's three skills scenarios (test_official_server.py) look at one skill and one
directory; these tests walk all of them: every manifest matches the bytes ``resources/read``
serves, every skill's directory tree holds exactly its manifest's files, cursors belong to the
list that issued them, and the legacy era sees skill files as ordinary resources but no skill
methods. The engine runs in-process: these methods are answered synchronously on the caller's
thread, so each request's answer is in the collected output when ``handle_message`` returns.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from mcpwire.testing.everything import EverythingServer
from mcpwire.testing.skills import DIRECTORY_MIME, META_PREFIX, SKILLS_EXTENSION, SkillCatalogue

MODERN = "2026-07-28"


class Engine:
    """An in-process reference server and everything it wrote."""

    def __init__(self, *, page_size: int = 0) -> None:
        self.out: list[Any] = []
        self.server = EverythingServer(self.out.append, page_size=page_size, name="mcpwire-everything")
        self._next = 0

    def call(self, method: str, params: dict[str, Any] | None = None, *, legacy: bool = False) -> dict[str, Any]:
        self._next += 1
        full = dict(params or {})
        if not legacy:
            full["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        self.server.handle_message({"jsonrpc": "2.0", "id": self._next, "method": method, "params": full})
        [answer] = [m for m in self.out if isinstance(m, dict) and m.get("id") == self._next]
        return answer

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        answer = self.call(method, params, **kw)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def all_pages(self, method: str, key: str, params: dict[str, Any] | None = None) -> tuple[list[Any], int]:
        """Every item of a paginated list, and the number of pages."""
        items: list[Any] = []
        cursor = None
        for pages in range(1, 100):
            result = self.result(method, {**(params or {}), **({"cursor": cursor} if cursor else {})})
            items += result[key]
            cursor = result.get("nextCursor")
            if cursor is None:
                return items, pages
        raise AssertionError(f"{method} never ends")

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def engine() -> Any:
    e = Engine()
    yield e
    e.close()


def _frontmatter(text: str) -> dict[str, Any]:
    # the server writes one "key: <JSON value>" line per field (a YAML subset)
    head, sep, _ = text.removeprefix("---\n").partition("\n---\n")
    assert text.startswith("---\n") and sep, text[:200]
    return {key: json.loads(value) for key, _, value in (line.partition(": ") for line in head.splitlines())}


def _text(engine: Engine, uri: str) -> tuple[str, dict[str, Any]]:
    [item] = engine.result("resources/read", {"uri": uri})["contents"]
    assert item["uri"] == uri
    return item["text"], item


def test_the_extension_is_declared_in_discover_only(engine: Engine) -> None:
    extensions = engine.result("server/discover")["capabilities"]["extensions"]
    assert extensions[SKILLS_EXTENSION] == {"directoryRead": True}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    assert "extensions" not in engine.result("initialize", init, legacy=True)["capabilities"]
    for method in ("skills/list", "skills/get", "resources/directory/read"):
        assert engine.call(method, {"uri": "skill://reference-tour"}, legacy=True)["error"]["code"] == -32601


def test_every_manifest_matches_the_bytes_served_and_the_frontmatter_reads_back(engine: Engine) -> None:
    entries, pages = engine.all_pages("skills/list", "skills")
    assert pages == len(entries) == 2  # one skill per page: an entry is never split
    for entry in entries:
        text, item = _text(engine, entry["uri"])
        assert _frontmatter(text) == entry["frontmatter"]
        assert item["mimeType"] == "text/markdown"
        extra = {k: v for k, v in entry["frontmatter"].items() if k not in ("name", "description")}
        assert item.get("_meta", {}) == {META_PREFIX + k: v for k, v in extra.items()}
        assert entry["uri"].removeprefix("skill://").rsplit("/", 2)[-2] == entry["frontmatter"]["name"]
        assert entry["resources"][0]["uri"] == entry["uri"]
        for file in entry["resources"]:
            data = _text(engine, file["uri"])[0].encode()
            assert file["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
            assert file["size"] == len(data)
        assert engine.result("skills/get", {"uri": entry["uri"]})["skill"] == entry


def _walk(engine: Engine, directory: str) -> set[str]:
    """Every file under ``directory``, through resources/directory/read (all pages, recursively)."""
    files: set[str] = set()
    children, _ = engine.all_pages("resources/directory/read", "resources", {"uri": directory})
    for child in children:
        assert child["uri"].startswith(directory + "/")
        assert "/" not in child["uri"].removeprefix(directory + "/")  # direct children only
        if child["mimeType"] == DIRECTORY_MIME:
            files |= _walk(engine, child["uri"])
        else:
            files.add(child["uri"])
    return files


def test_each_skill_directory_holds_exactly_its_manifest(engine: Engine) -> None:
    for entry in engine.all_pages("skills/list", "skills")[0]:
        root = entry["uri"].removesuffix("/SKILL.md")
        assert _walk(engine, root) == {f["uri"] for f in entry["resources"]}
    # the organizational prefix of skill://mcpwire/testing/task-polling is a directory too
    assert _walk(engine, "skill://mcpwire") == {
        "skill://mcpwire/testing/task-polling/SKILL.md",
        "skill://mcpwire/testing/task-polling/checklist.md",
    }


def test_directory_cursors_belong_to_their_directory(engine: Engine) -> None:
    first = engine.result("resources/directory/read", {"uri": "skill://reference-tour"})
    assert [c["uri"].rsplit("/", 1)[-1] for c in first["resources"]] == ["SKILL.md", "examples"]
    cursor = first["nextCursor"]
    rest = engine.result("resources/directory/read", {"uri": "skill://reference-tour", "cursor": cursor})
    assert [c["name"] for c in rest["resources"]] == ["references"]
    assert "nextCursor" not in rest
    for params in (
        {"uri": "skill://reference-tour/examples", "cursor": cursor},  # another directory's cursor
        {"uri": "skill://reference-tour", "cursor": "not-a-cursor"},
        {"uri": "skill://reference-tour/SKILL.md"},  # a file
        {"uri": "skill://no-such-skill"},
        {"uri": 42},
    ):
        error = engine.call("resources/directory/read", params)["error"]
        assert error["code"] == -32602, params
    assert (
        engine.result("resources/directory/read", {"uri": "skill://reference-tour/"})["resources"]
        == (first["resources"])
    )


def test_skills_get_answers_for_served_skills_only(engine: Engine) -> None:
    for uri in ("skill://reference-tour/references/TOOLS.md", "skill://reference-tour", "test://static-text"):
        error = engine.call("skills/get", {"uri": uri})["error"]
        assert (error["code"], error["message"]) == (
            -32602,
            f"Invalid params: {uri!r} is not the SKILL.md of a skill served here",
        )
    assert engine.call("skills/get", {})["error"]["message"] == "Invalid params: skills/get needs 'uri', a string"


def test_the_legacy_era_lists_and_reads_skill_files_as_resources(engine: Engine) -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    engine.result("initialize", init, legacy=True)
    listed = {r["uri"]: r for r in engine.result("resources/list", legacy=True)["resources"]}
    tour = listed["skill://reference-tour/SKILL.md"]
    assert (tour["name"], tour["mimeType"]) == ("reference-tour", "text/markdown")
    assert tour["_meta"] == {META_PREFIX + "license": "MIT", META_PREFIX + "metadata": {"version": "1.0"}}
    read = engine.result("resources/read", {"uri": "skill://reference-tour/examples/echo.md"}, legacy=True)
    assert read["contents"][0]["text"].startswith("# Example: echo")


def test_page_size_applies_to_the_extension_lists() -> None:
    engine = Engine(page_size=3)
    try:
        assert engine.all_pages("skills/list", "skills")[1] == 1
        children, pages = engine.all_pages("resources/directory/read", "resources", {"uri": "skill://reference-tour"})
        assert (len(children), pages) == (3, 1)
    finally:
        engine.close()


def test_a_catalogue_refuses_a_path_that_does_not_end_in_the_name() -> None:
    with pytest.raises(ValueError, match=r"^skill path 'a/b' does not end in its name 'c'$"):
        SkillCatalogue([("a/b", {"name": "c", "description": "d"}, "body", [])])
    with pytest.raises(ValueError, match=r"^duplicate skill file skill://a/x.md$"):
        SkillCatalogue([("a", {"name": "a", "description": "d"}, "", [("x.md", "1"), ("/x.md", "2")])])
