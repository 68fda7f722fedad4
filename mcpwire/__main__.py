"""``python -m mcpwire``: the same as the ``mcpwire`` command."""

import sys

from .cli import main

sys.exit(main())
