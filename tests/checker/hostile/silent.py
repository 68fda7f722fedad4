"""A server that writes its pid to a file and then never answers (a check waits on it), and that
would outlive a client that forgets to stop it.

    python silent.py PIDFILE
"""

import os
import signal
import sys
import time
from pathlib import Path

Path(sys.argv[1]).write_text(str(os.getpid()))
signal.signal(signal.SIGTERM, signal.SIG_DFL)
for _ in sys.stdin:
    pass
time.sleep(3600)  # stdin closed: still running until a signal comes
