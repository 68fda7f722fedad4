"""``mcpwire serve``: the host as a long-lived service.

A management API under ``/api/v1``, the MCP gateway at ``/mcp``, server-sent events, Prometheus
metrics and health probes, with registered servers, approvals, tool pins and the audit log kept in
a store (SQLite by default, PostgreSQL for several replicas). Importing this package is cheap; the
web stack (starlette, and the built-in server or hypercorn) is imported by :mod:`mcpwire.service.app` and
:mod:`mcpwire.service.runner` only, and comes with the ``serve`` extra.
"""

from __future__ import annotations

__all__: list[str] = []
