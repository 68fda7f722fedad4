"""The check catalogue, one module per area; importing this package registers every check.

Import order is catalogue order: framing, lifecycle, features, then the 2026-07-28 rules.
"""

from conformance.checks import framing  # noqa: I001
from conformance.checks import lifecycle
from conformance.checks import features
from conformance.checks import modern

__all__ = ["features", "framing", "lifecycle", "modern"]
