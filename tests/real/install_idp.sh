#!/usr/bin/env bash
# Installs the identity provider the OAuth and OpenID Connect tests sign in with: panva's
# oidc-provider (a certified OpenID Provider) and a Node 22 to run it (it supports only current
# LTS releases), from the npm registry, into $MCPWIRE_IDP_DIR (default <repo>/.cache/idp):
#   node_modules/oidc-provider, node_modules/node/bin/node
# tests/oauth/fixtures/idp.mjs configures and starts it. Idempotent: a stamp file skips work done.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${MCPWIRE_IDP_DIR:-$repo/.cache/idp}
PACKAGES=("oidc-provider@9.13.3" "node@22")
stamp_text="${PACKAGES[*]}"
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp_text" ]; then
  echo "identity provider already installed in $dir"
  exit 0
fi
echo "installing the identity provider into $dir"
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"mcpwire-idp-cache","private":true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2
for file in node_modules/oidc-provider/lib/index.js node_modules/node/bin/node; do
  [ -e "$dir/$file" ] || { echo "missing after install: $dir/$file" >&2; exit 1; }
done
"$dir/node_modules/node/bin/node" --version >/dev/null
echo "$stamp_text" > "$dir/stamp"
