"""``python -m fuzz [options] [-- CMD ARGS...]``: the same as ``mcpwire fuzz``."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
