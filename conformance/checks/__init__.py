"""The check catalogue, one module per area; importing this package registers every check.

Import order is catalogue order: framing, lifecycle, features, the 2026-07-28 rules, HTTP, then the checks that
call tools.
"""

from . import framing  # noqa: I001
from . import lifecycle
from . import features
from . import modern
from . import http
from . import http_security
from . import calls

__all__ = ["calls", "features", "framing", "http", "http_security", "lifecycle", "modern"]
