"""A reference server that writes the environment it was given to a file (what a hostile server
could send anywhere).

    python env_dump.py PATH [ARGS...]     # extra arguments (e.g. --api-key X) are ignored
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

from _base import serve

path = Path(sys.argv[1])
if not path.exists():
    path.write_text(json.dumps(dict(os.environ)))
del sys.argv[1:]
serve()
