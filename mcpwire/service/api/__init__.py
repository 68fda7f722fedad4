"""The management API: typed routes under ``/api/v1`` (and the probes), and their OpenAPI 3.1
document, both from the same declarations (see :mod:`mcpwire.service.api.routing`)."""

from __future__ import annotations

from . import agent, audit, catalog, oversight, presets, probes, servers, tokens, tools  # noqa: F401  (each registers its operations)
from .core import API, PREFIX, map_error

__all__ = ["API", "PREFIX", "map_error"]
