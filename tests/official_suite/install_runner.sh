#!/usr/bin/env bash
# Installs the official MCP conformance runner (two versions) and a Node >= 22 for it (the
# runner needs fs.globSync) from the npm registry, into $MCPWIRE_CONFORMANCE_DIR
# (default <repo>/.cache/conformance). Idempotent.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${MCPWIRE_CONFORMANCE_DIR:-$repo/.cache/conformance}
mkdir -p "$dir"
# the test workers (pytest -n) each run this at the start: one installs, the others wait for it
exec 9>"$dir/.install.lock"
flock -w 900 9 || { echo "install_runner: another install held $dir/.install.lock for 900s" >&2; exit 1; }
install() {  # install <folder> <package spec> <package name>
  local target="$dir/$1"
  [ -e "$target/node_modules/$3/package.json" ] && return 0
  mkdir -p "$target"
  [ -f "$target/package.json" ] || echo '{"name":"mcpwire-conformance-cache","private":true}' > "$target/package.json"
  npm install --prefix "$target" --no-audit --no-fund --loglevel=error "$2" >&2
}
install node22 "node@22" node
install runner-0.1.16 "@modelcontextprotocol/conformance@0.1.16" "@modelcontextprotocol/conformance"
install runner-0.2.0-alpha.12 "@modelcontextprotocol/conformance@0.2.0-alpha.12" "@modelcontextprotocol/conformance"
"$dir/node22/node_modules/node/bin/node" --version >/dev/null
