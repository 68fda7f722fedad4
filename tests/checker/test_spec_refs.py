"""Every check cites, for every revision, a page that exists in that revision's specification (and a
section heading of that page), checked against ``spec_pages.json``: the pages and headings of
``docs/specification/<revision>/`` in the specification repository, at the commit it names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcpwire.conformance.registry import CATALOGUE
from mcpwire.conformance.runner import ALL_REVISIONS, spec_url

SITE = "https://modelcontextprotocol.io/specification/"
DATA: dict[str, Any] = json.loads((Path(__file__).parent / "spec_pages.json").read_text(encoding="utf-8"))
PAGES: dict[str, dict[str, list[str]]] = DATA["revisions"]
#: references that name no page of the specification site
OTHER_SOURCES = ("schema.ts ", "JSON-RPC 2.0 ")


def _anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def test_the_page_list_covers_every_revision() -> None:
    assert set(PAGES) == set(ALL_REVISIONS)
    assert "basic/transports/stdio" in PAGES["2026-07-28"]
    assert all("basic/transports/stdio" not in PAGES[r] for r in ALL_REVISIONS if r < "2026-07-28")


@pytest.mark.parametrize("check_id", list(CATALOGUE))
def test_every_reference_is_a_page_and_section_of_its_revision(check_id: str) -> None:
    check = CATALOGUE[check_id]
    for revision in ALL_REVISIONS:
        spec, quote = check.reference(revision)
        assert quote.strip(), f"{check_id} has no quote for {revision}"
        url = spec_url(spec, revision)
        if url is None:
            assert spec.startswith(OTHER_SOURCES), f"{check_id} in {revision}: {spec!r} names no page"
            continue
        assert url.startswith(SITE), url
        page_revision, _, rest = url.removeprefix(SITE).partition("/")
        path, _, anchor = rest.partition("#")
        assert path in PAGES[page_revision], f"{check_id} in {revision}: {url} is not a page of {page_revision}"
        if anchor:
            headings = {_anchor(h) for h in PAGES[page_revision][path]}
            assert anchor in headings, f"{check_id} in {revision}: {url} names no section of the page"


def test_stdio_rules_cite_the_transports_page_before_2026() -> None:
    sv01, sv08 = CATALOGUE["SV-01"], CATALOGUE["SV-08"]
    assert spec_url(sv01.reference("2025-11-25")[0], "2025-11-25") == SITE + "2025-11-25/basic/transports#stdio"
    assert spec_url(sv01.reference("2026-07-28")[0], "2026-07-28") == SITE + "2026-07-28/basic/transports/stdio"
    # the server-side "exit promptly" sentence is 2026-07-28 text; before, the rule is the
    # client's shutdown sequence on the lifecycle page
    assert spec_url(sv08.reference("2024-11-05")[0], "2024-11-05") == SITE + "2024-11-05/basic/lifecycle#shutdown"
    assert "exit promptly" not in sv08.reference("2025-11-25")[1]
    assert "exit promptly" in sv08.reference("2026-07-28")[1]


def test_levels_per_revision() -> None:
    assert CATALOGUE["SV-32"].level_at("2025-11-25").value == "SHOULD"
    assert CATALOGUE["SV-32"].level_at("2026-07-28").value == "MUST"
    assert CATALOGUE["SV-11"].level_at("2025-03-26").value == "SHOULD"
    assert CATALOGUE["SV-11"].level_at("2025-06-18").value == "MUST"
    assert CATALOGUE["SV-12"].level_at("2024-11-05").value == "MUST"
