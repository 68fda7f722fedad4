"""Import hygiene: the sans-I/O core pulls in no I/O library, and ``import mcpwire`` stays cheap.

Each check runs in a fresh interpreter (``-I``: no user site, no PYTHONPATH, no cwd on the path),
so modules this test process already imported cannot hide a regression.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import mcpwire.protocol

PROTOCOL_DIR = Path(mcpwire.protocol.__file__).resolve().parent
PROTOCOL_MODULES = sorted(p.stem for p in PROTOCOL_DIR.glob("*.py") if p.stem != "__init__")

IO_LIBRARIES = ("trio", "httpx", "httpx_sse", "anyio", "asyncio")
HEAVY_OPTIONAL = ("httpx", "httpx_sse", "jsonschema", "referencing", "hypothesis")


def loaded_after(code: str) -> set[str]:
    """Top-level names of every module loaded after running ``code`` in a fresh interpreter."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_protocol_imports_no_io_library() -> None:
    """STYLE: "protocol/ is sans-I/O ... never imports trio/httpx"."""
    loaded = loaded_after("import mcpwire.protocol")
    assert loaded.isdisjoint(IO_LIBRARIES), loaded & set(IO_LIBRARIES)
    assert loaded.isdisjoint(HEAVY_OPTIONAL), loaded & set(HEAVY_OPTIONAL)


def test_every_protocol_module_imports_no_io_library() -> None:
    imports = "\n".join(f"import mcpwire.protocol.{name}" for name in PROTOCOL_MODULES)
    loaded = loaded_after(imports)
    assert loaded.isdisjoint(IO_LIBRARIES), loaded & set(IO_LIBRARIES)


def test_import_mcpwire_is_cheap() -> None:
    """``import mcpwire`` imports neither httpx, jsonschema nor hypothesis (names are lazy)."""
    loaded = loaded_after("import mcpwire")
    assert loaded.isdisjoint(HEAVY_OPTIONAL), loaded & set(HEAVY_OPTIONAL)


def test_open_client_needs_no_optional_dependency() -> None:
    """The stdio client works without the ``http`` and ``schema`` extras installed."""
    loaded = loaded_after("import mcpwire\nfrom mcpwire import open_client\nassert callable(open_client)")
    assert "trio" in loaded
    assert loaded.isdisjoint(HEAVY_OPTIONAL), loaded & set(HEAVY_OPTIONAL)


@pytest.mark.parametrize("name", PROTOCOL_MODULES)
def test_protocol_sources_import_only_downwards(name: str) -> None:
    """Layers: ``errors <- protocol (msgspec only)``; the core never logs or reaches up."""
    tree = ast.parse((PROTOCOL_DIR / f"{name}.py").read_text(encoding="utf-8"))
    absolute: set[str] = set()
    relative: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            absolute.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                absolute.add((node.module or "").split(".")[0])
            elif node.level >= 2:
                relative.add((node.module or "").split(".")[0])
    forbidden = {*IO_LIBRARIES, "logging", "socket", "subprocess", "threading", "select", "jsonschema"}
    assert absolute.isdisjoint(forbidden), absolute & forbidden
    assert relative <= {"errors"}, f"protocol/{name}.py imports {relative - {'errors'}} from above the core"


def test_every_public_name_resolves_and_is_listed() -> None:
    """``__all__`` holds exactly every error class (through ``errors.__all__``, which lists each
    one), ``__version__`` and the lazily imported names, each once, and each resolves."""
    import mcpwire
    import mcpwire.errors

    errors = {n for n in vars(mcpwire.errors) if isinstance(getattr(mcpwire.errors, n), type)}
    errors = {n for n in errors if issubclass(getattr(mcpwire.errors, n), mcpwire.errors.MCPWireError)}
    assert sorted(mcpwire.errors.__all__) == sorted(errors)
    assert len(mcpwire.__all__) == len(set(mcpwire.__all__))
    assert errors | {"__version__"} <= set(mcpwire.__all__)
    for name in mcpwire.__all__:
        assert getattr(mcpwire, name) is not None, name
    assert sorted(dir(mcpwire)) == sorted(mcpwire.__all__)


def test_all_takes_only_forms_type_checkers_read() -> None:
    """mypy --strict and pyright treat as re-exported only what a literal ``__all__`` list names,
    or a later ``__all__ += module.__all__`` of a module imported as a name: nothing starred or
    computed, so ``from mcpwire import open_client`` type-checks in users' code."""
    tree = ast.parse((PROTOCOL_DIR.parent / "__init__.py").read_text(encoding="utf-8"))
    named = [
        node
        for node in tree.body
        if (isinstance(node, ast.Assign) and any(ast.unparse(t) == "__all__" for t in node.targets))
        or (isinstance(node, ast.AugAssign) and ast.unparse(node.target) == "__all__")
    ]
    assign, *added = named
    assert isinstance(assign, ast.Assign) and isinstance(assign.value, ast.List)
    assert all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in assign.value.elts)
    assert [ast.unparse(node) for node in added] == ["__all__ += errors.__all__"]
