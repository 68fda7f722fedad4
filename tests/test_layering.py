"""The layering of ``docs/architecture.md``, checked on the source: imports point down only.

``errors <- protocol <- actors, server <- client <- host <- agent <- service``, with the
foundations (errors, redaction, the version) at the bottom, the specs (``transports``) beside the
sans-I/O core, and the applications (the command line, the asyncio face, the checker and the
fuzzer) on top, free to use anything. Areas of one layer do not import each other (the client's
actors, the server side and OAuth are independent; so are the client and the test servers). The
sans-I/O core imports no I/O library, and no private name is imported from another area.

Every import statement of every module is read with ``ast`` (also those inside functions and
``TYPE_CHECKING`` blocks: a type-only import is a dependency of the design too).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layers, bottom first: a module may import its own area and the areas of lower layers.
LAYERS: list[set[str]] = [
    {"mcpwire._version", "mcpwire.errors", "mcpwire.redaction"},
    {"mcpwire.protocol", "mcpwire.transports", "mcpwire.schemas"},
    {"mcpwire.actors", "mcpwire.server", "mcpwire.auth"},
    {"mcpwire.client", "mcpwire.testing"},
    # the catalogue of well-known servers builds mcp.json entries (for `mcpwire add`, the API's
    # /catalog and the console's catalogue page); it imports no other area
    {"mcpwire.host", "mcpwire.catalog"},
    {"mcpwire.agent"},
    {"mcpwire.service"},
]
#: Applications: they may import anything, and nothing below may import them.
APPS = {
    "mcpwire",
    "mcpwire.__main__",
    "mcpwire.aio",
    "mcpwire.cli",
    "mcpwire.cliargs",
    "mcpwire.cliserver",
    "mcpwire.cliadd",
    "mcpwire.clitrust",
    # what only the command line uses: the mcp.json editor
    "mcpwire.jsonedit",
    "mcpwire.conformance",
    "mcpwire.fuzz",
    # the command-line entry points inside library packages
    "mcpwire.auth.cli",
    "mcpwire.host.cli",
    "mcpwire.service.cli",
    "mcpwire.agent.cli",
    "mcpwire.agent.terminal",
}
IO_LIBRARIES = ("trio", "httpx", "httpx_sse", "anyio", "asyncio", "socket", "subprocess", "threading")
LEVEL = {area: index for index, areas in enumerate(LAYERS) for area in areas}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    names: tuple[str, ...]
    line: int

    def __str__(self) -> str:
        names = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.importer}:{self.line} imports {self.target}{names}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in ("conformance", "fuzz"):  # installed as mcpwire.conformance and mcpwire.fuzz
        parts = ["mcpwire", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def source_files() -> list[Path]:
    return sorted(p for folder in ("mcpwire", "conformance", "fuzz") for p in (ROOT / folder).rglob("*.py"))


def imports_of(path: Path) -> Iterator[Import]:
    importer = module_name(path)
    package = importer.split(".") if path.name == "__init__.py" else importer.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield Import(importer, target, tuple(a.name for a in node.names), node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(importer, alias.name, (), node.lineno)


def area(module: str) -> str:
    """The area a module belongs to: an application, or the package (or top module) it is in."""
    for app in sorted(APPS, key=len, reverse=True):
        if module == app or (app != "mcpwire" and module.startswith(app + ".")):
            return app
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


ALL_IMPORTS = [imp for path in source_files() for imp in imports_of(path)]
OURS = [imp for imp in ALL_IMPORTS if imp.target == "mcpwire" or imp.target.startswith("mcpwire.")]


def test_every_area_has_a_layer() -> None:
    """A new package must be placed in the layering (here and in docs/architecture.md)."""
    unplaced = sorted({area(module_name(p)) for p in source_files()} - set(LEVEL) - APPS)
    assert unplaced == []


def test_imports_point_down_only() -> None:
    upward = []
    for imp in OURS:
        source, target = area(imp.importer), area(imp.target)
        if source in APPS or source == target:
            continue
        if target in APPS or LEVEL[target] >= LEVEL[source]:
            upward.append(str(imp))
    assert upward == []


def test_the_sans_io_core_imports_no_io_library() -> None:
    """``protocol/`` is fed bytes and answers with events and bytes: no I/O library, no logging."""
    found = [
        str(imp)
        for imp in ALL_IMPORTS
        if area(imp.importer) == "mcpwire.protocol" and imp.target.split(".")[0] in (*IO_LIBRARIES, "logging")
    ]
    assert found == []


def test_no_private_name_is_imported_from_another_area() -> None:
    private = [
        str(imp)
        for imp in OURS
        if area(imp.importer) != area(imp.target)
        and any(name.startswith("_") and not name.startswith("__") for name in imp.names)
    ]
    assert private == []


@pytest.mark.parametrize(
    ("importer", "target", "allowed"),
    [
        ("mcpwire.client.core", "mcpwire.protocol.session", True),
        ("mcpwire.host.supervisor", "mcpwire.client", True),
        ("mcpwire.protocol.session", "mcpwire.client.core", False),
        ("mcpwire.client.core", "mcpwire.host", False),
        ("mcpwire.actors.stdio", "mcpwire.server.http", False),
        ("mcpwire.client.opening", "mcpwire.testing", False),
        ("mcpwire.service.app", "mcpwire.cli", False),
        ("mcpwire.cli", "mcpwire.service.app", True),
    ],
)
def test_the_rule_itself(importer: str, target: str, allowed: bool) -> None:
    """The checks above can fail: the rule they apply, on sample edges."""
    source, dest = area(importer), area(target)
    ok = source in APPS or source == dest or (dest not in APPS and LEVEL[dest] < LEVEL[source])
    assert ok is allowed
