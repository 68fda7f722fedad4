#!/usr/bin/env bash
# Installs everything the test suite talks to, each step idempotent:
#   - the third-party MCP servers (npm and PyPI), into .cache/servers (tests/real/install_servers.sh);
#   - the official conformance runner and a Node >= 22 for it, into .cache/conformance
#     (tests/conformance/install_runner.sh);
#   - Debian's Chromium, which renders the HTML report of `mcpwire check` in its tests
#     (apt-get, as root or through sudo; never a browser downloaded by a test tool).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3} bash "$here/real/install_servers.sh"
bash "$here/conformance/install_runner.sh"
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
