"""The error the OAuth client raises (defined with the rest of the tree in :mod:`mcpwire.errors`)."""

from __future__ import annotations

from mcpwire.errors import OAuthError

__all__ = ["OAuthError"]
