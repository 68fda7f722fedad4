"""The reference site: the mcp.json page names every key the parser knows, and the whole site
builds with ``mkdocs build --strict`` (a broken link or an unrenderable docstring fails it)."""

from __future__ import annotations

import importlib.util
import re
import runpy
from pathlib import Path
from typing import Any

import pytest

from mcpwire.host.entries import KNOWN_KEYS
from mcpwire.host.settings import PolicyConfig, ToolPolicy

ROOT = Path(__file__).resolve().parents[2]
CONFIG_PAGE = ROOT / "docs" / "config.md"


def _table_keys(section: str) -> set[str]:
    """The backticked keys of the first column of the table under ``section``."""
    text = CONFIG_PAGE.read_text(encoding="utf-8")
    start = text.index(section)
    body = text[start + len(section) :]
    stop = re.search(r"^#{2,3} ", body, flags=re.M)
    rows = body[: stop.start() if stop else None]
    return set(re.findall(r"^\| `([^`]+)` \|", rows, flags=re.M))


def test_every_entry_key_is_documented() -> None:
    assert _table_keys("## A server entry") == set(KNOWN_KEYS)


def test_every_policy_key_is_documented() -> None:
    assert _table_keys("## `policy`") == set(PolicyConfig.__struct_fields__)
    assert _table_keys("### `policy.tools.<glob>`") == set(ToolPolicy.__struct_fields__)


def _builder() -> dict[str, Any]:
    return runpy.run_path(str(ROOT / "docs" / "build.py"))


def test_rst_roles_are_dropped_by_the_hook() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(_builder()["HOOK"], "roles_hook.py", "exec"), namespace)
    html = "see :class:<code>~mcpwire.transports.StdioServer</code> and :func:<code>open_client</code>"
    assert (
        namespace["on_page_content"](html)
        == "see <code>mcpwire.transports.StdioServer</code> and <code>open_client</code>"
    )


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra is not installed")
def test_site_builds_strictly(tmp_path: Path) -> None:
    builder = _builder()
    site = builder["build"](tmp_path / "out")
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "mcpwire check" in home
    for name in builder["commands"]():
        page = (site / "cli" / name / "index.html").read_text(encoding="utf-8")
        assert f"mcpwire {name}" in page and "usage:" in page
    from mcpwire.conformance.registry import CATALOGUE

    checks = (site / "checks" / "index.html").read_text(encoding="utf-8")
    assert len(CATALOGUE) > 50
    missing = [cid for cid in CATALOGUE if f"<td>{cid}</td>" not in checks]
    assert missing == []
    api = (site / "service-api" / "index.html").read_text(encoding="utf-8")
    assert "/api/v1/servers" in api and (site / "openapi.json").is_file()
    client = (site / "reference" / "client" / "index.html").read_text(encoding="utf-8")
    assert "open_client" in client and ":class:" not in client
    config = (site / "config" / "index.html").read_text(encoding="utf-8")
    assert "connect_timeout_seconds" in config


def test_builder_refuses_a_failing_help() -> None:
    builder = _builder()
    with pytest.raises(SystemExit, match=r"^docs: `mcpwire no-such-command --help` exited 2"):
        builder["command_help"]("no-such-command")
