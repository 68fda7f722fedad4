"""The check catalogue, one module per area; importing this package registers every check.

Import order is catalogue order: framing, lifecycle, features, the 2026-07-28 rules, HTTP, then the checks that
call tools.
"""

from conformance.checks import framing  # noqa: I001
from conformance.checks import lifecycle
from conformance.checks import features
from conformance.checks import modern
from conformance.checks import http
from conformance.checks import calls

__all__ = ["calls", "features", "framing", "http", "lifecycle", "modern"]
