#!/usr/bin/env bash
# Installs the third-party MCP servers the integration tests talk to, into one cache folder:
#   $MCPWIRE_SERVERS_DIR (default: <repo>/.cache/servers)
#     npm/node_modules/.bin/mcp-server-{everything,filesystem,memory}
#     npm/node_modules/mcp-cron-linux-amd64/bin/mcp-cron (a Go server, on the official Go SDK)
#     npm/node_modules/mcp-time-linux-x64/bin/mcp-time (a Go server on mcp-go, whose tool descriptions
#       list a Go map in map order: different on each start)
#     py/bin/mcp-server-{time,git,sqlite} (and the official Python SDK, `mcp`, as a client for tests)
#     proxy/bin/mcp-proxy (mcp-proxy, on the Python SDK 1.x streamable HTTP transport)
#     fastmcp/bin/fastmcp (FastMCP's proxy)
#     clients/node_modules/@modelcontextprotocol/sdk (the official TypeScript SDK, as a client) and
#       clients/node_modules/.bin/mcp-inspector (the MCP Inspector, whose --cli mode is a client)
# Versions are pinned so a test run is reproducible; a stamp file skips work already done (the
# clients have their own, so adding them does not install the servers again).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${MCPWIRE_SERVERS_DIR:-$repo/.cache/servers}
python=${PYTHON:-python3}

NPM_PACKAGES=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "mcp-cron-linux-amd64@0.9.1"
  "mcp-time-linux-x64@0.4.0"
)
PY_PACKAGES=(
  "mcp-server-time==2026.10.19"
  "mcp-server-git==2026.10.19"
)
# mcp-server-sqlite's last release is written for the Python SDK 1.x (it crashes on start with 2.x):
# its own venv, its command linked into py/bin beside the others.
SQLITE_PACKAGES=("mcp-server-sqlite==2025.4.25" "mcp<2")
# Proxies in front of other servers, each in its own venv (their SDK pins differ).
PROXY_PACKAGES=("mcp-proxy==0.13.0")
FASTMCP_PACKAGES=("fastmcp==4.1.2")
# MCP clients nobody here wrote, run against the gateway by the tests.
CLIENT_PACKAGES=("@modelcontextprotocol/sdk@1.32.2" "@modelcontextprotocol/inspector@2.12.0")
stamp_text="${NPM_PACKAGES[*]} ${PY_PACKAGES[*]} ${SQLITE_PACKAGES[*]} ${PROXY_PACKAGES[*]} ${FASTMCP_PACKAGES[*]}"
clients_text="${CLIENT_PACKAGES[*]}"
mkdir -p "$dir"
if [ -f "$dir/clients/stamp" ] && [ "$(cat "$dir/clients/stamp")" = "$clients_text" ]; then
  echo "clients already installed in $dir/clients"
else
  echo "installing MCP clients into $dir/clients"
  npm install --silent --no-audit --no-fund --prefix "$dir/clients" "${CLIENT_PACKAGES[@]}"
  for item in node_modules/@modelcontextprotocol/sdk/package.json node_modules/.bin/mcp-inspector; do
    [ -e "$dir/clients/$item" ] || { echo "missing after install: $dir/clients/$item" >&2; exit 1; }
  done
  echo "$clients_text" > "$dir/clients/stamp"
fi
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp_text" ]; then
  echo "servers already installed in $dir"
  exit 0
fi
echo "installing MCP servers into $dir"
npm install --silent --no-audit --no-fund --prefix "$dir/npm" "${NPM_PACKAGES[@]}"
"$python" -m venv "$dir/py"
"$dir/py/bin/python" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
"$python" -m venv "$dir/sqlite"
"$dir/sqlite/bin/python" -m pip install -q --disable-pip-version-check "${SQLITE_PACKAGES[@]}"
ln -sfn ../../sqlite/bin/mcp-server-sqlite "$dir/py/bin/mcp-server-sqlite"
"$python" -m venv "$dir/proxy"
"$dir/proxy/bin/python" -m pip install -q --disable-pip-version-check "${PROXY_PACKAGES[@]}"
"$python" -m venv "$dir/fastmcp"
"$dir/fastmcp/bin/python" -m pip install -q --disable-pip-version-check "${FASTMCP_PACKAGES[@]}"
for bin in npm/node_modules/.bin/mcp-server-everything npm/node_modules/.bin/mcp-server-filesystem \
           npm/node_modules/.bin/mcp-server-memory npm/node_modules/mcp-cron-linux-amd64/bin/mcp-cron \
           npm/node_modules/mcp-time-linux-x64/bin/mcp-time \
           py/bin/mcp-server-time py/bin/mcp-server-git py/bin/mcp-server-sqlite \
           proxy/bin/mcp-proxy fastmcp/bin/fastmcp; do
  [ -x "$dir/$bin" ] || { echo "missing after install: $dir/$bin" >&2; exit 1; }
done
echo "$stamp_text" > "$dir/stamp"
