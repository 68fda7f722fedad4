"""A server that answers each ping only after sending COUNT log notifications first.

python flood.py COUNT
"""

import json
import sys

COUNT = int(sys.argv[1])
NOTE = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x" * 64}})
out = sys.stdout
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "ping":
        out.write((NOTE + "\n") * COUNT)
        out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}) + "\n")
        out.flush()
