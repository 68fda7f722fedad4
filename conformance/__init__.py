"""``mcpwire check``: a conformance checker for MCP servers (catalogue, raw-wire harness, reports)."""
