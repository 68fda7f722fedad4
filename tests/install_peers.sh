#!/usr/bin/env bash
# Installs everything the test suite talks to, each step idempotent:
#   - the third-party MCP servers (npm and PyPI), into .cache/servers (tests/real/install_servers.sh);
#   - the identity provider of the OAuth tests (panva's oidc-provider and a Node 22 to run it),
#     into .cache/idp (tests/real/install_idp.sh);
#   - the official conformance runner and a Node >= 22 for it, into .cache/conformance
#     (tests/official_suite/install_runner.sh);
#   - Debian's Chromium (the HTML report of `mcpwire check` and the console of `mcpwire serve` are
#     rendered and driven in it) and PostgreSQL (the service's store runs its suite on a real
#     server): apt-get, as root or through sudo; never a browser downloaded by a test tool.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3} bash "$here/real/install_servers.sh"
bash "$here/real/install_idp.sh"
bash "$here/official_suite/install_runner.sh"
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
