"""The official JSON Schemas of every released MCP revision, shipped with mcpwire.

``schema_dir()`` is the folder holding ``<revision>/schema.json`` (``$MCPWIRE_SCHEMA_DIR`` when
set, else the copy shipped in this package; see ``PROVENANCE.md`` beside this file);
``schema_path(revision)`` one file of it. Nothing here parses or validates: the checker, the
fuzzer and the tests load the files with the JSON Schema library they use.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SCHEMA_DIR_ENV", "schema_dir", "schema_path"]

#: environment variable naming another folder of ``<revision>/schema.json`` files
SCHEMA_DIR_ENV = "MCPWIRE_SCHEMA_DIR"

_BUNDLED = Path(__file__).resolve().parent


def schema_dir() -> Path:
    """The folder of ``<revision>/schema.json`` files in use."""
    override = os.environ.get(SCHEMA_DIR_ENV)
    return Path(override) if override else _BUNDLED


def schema_path(revision: str) -> Path:
    """The ``schema.json`` of ``revision`` (e.g. ``"2025-11-25"``).

    Raises:
        FileNotFoundError: no schema for that revision in :func:`schema_dir`.
    """
    path = schema_dir() / revision / "schema.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no MCP schema for revision {revision!r} at {path}"
            + (f" (${SCHEMA_DIR_ENV} is set)" if os.environ.get(SCHEMA_DIR_ENV) else "")
        )
    return path
