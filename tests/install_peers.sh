#!/usr/bin/env bash
# Installs what the test suite talks to, and says what and where before it does:
#   - the third-party MCP servers (npm and PyPI, pinned), into $MCPWIRE_SERVERS_DIR
#     (default .cache/servers; tests/real/install_servers.sh);
#   - the official conformance runner and a Node >= 22 for it (npm), into $MCPWIRE_CONFORMANCE_DIR
#     (default .cache/conformance; tests/official_suite/install_runner.sh);
#   - Debian's Chromium (the HTML report of `mcpwire check` and the console of `mcpwire serve` are
#     rendered and driven in it), PostgreSQL (the service's store runs its suite on a real server)
#     and HAProxy (replicas behind a load balancer, as docs/deploy.md configures it): apt-get, as
#     root, or through sudo when not root (it says so first); never a browser downloaded by a test
#     tool.
# What is already there is skipped. `--plan` prints the plan and installs nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
servers=${MCPWIRE_SERVERS_DIR:-$repo/.cache/servers}
conformance=${MCPWIRE_CONFORMANCE_DIR:-$repo/.cache/conformance}
idp=${MCPWIRE_IDP_DIR:-$repo/.cache/idp}
plan_only=false
case "${1:-}" in
  --plan) plan_only=true ;;
  "") ;;
  *) echo "usage: bash tests/install_peers.sh [--plan]" >&2; exit 2 ;;
esac

say() { echo "install_peers: $*"; }

if [ -f "$servers/stamp" ]; then
  servers_state="present (its pinned versions are compared with the stamp; a mismatch reinstalls)"
else
  servers_state="to install: npm and PyPI packages, about 450 MB"
fi
if [ -f "$idp/stamp" ]; then
  idp_state="present (its pinned versions are compared with the stamp; a mismatch reinstalls)"
else
  idp_state="to install from npm (about 100 MB): oidc-provider, node@22"
fi
runner_missing=()
for item in node22/node_modules/node runner-0.1.16/node_modules/@modelcontextprotocol/conformance \
            runner-0.2.0-alpha.12/node_modules/@modelcontextprotocol/conformance; do
  [ -e "$conformance/$item/package.json" ] || runner_missing+=("${item%%/*}")
done
if [ ${#runner_missing[@]} -eq 0 ]; then
  runner_state="present"
else
  runner_state="to install from npm (about 300 MB in all): ${runner_missing[*]}"
fi
apt_missing=()
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_missing+=(postgresql)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || apt_missing+=(haproxy)
sudo=""
if [ ${#apt_missing[@]} -eq 0 ]; then
  apt_state="present (chromium, postgresql, haproxy)"
elif [ "$(id -u)" = 0 ]; then
  apt_state="to install with apt-get, as root: ${apt_missing[*]}"
else
  sudo="sudo"
  apt_state="to install with apt-get through sudo (you are not root): ${apt_missing[*]}"
fi

say "the third-party MCP servers, in $servers: $servers_state"
say "the identity provider (oidc-provider) and Node 22, in $idp: $idp_state"
say "the official conformance runner and Node 22, in $conformance: $runner_state"
say "Debian packages, system-wide: $apt_state"
$plan_only && exit 0

for tool in npm "${PYTHON:-python3}"; do
  command -v "$tool" >/dev/null 2>&1 || { say "$tool is needed to install the servers and the runner" >&2; exit 1; }
done
PYTHON=${PYTHON:-python3} MCPWIRE_SERVERS_DIR=$servers bash "$here/real/install_servers.sh"
MCPWIRE_IDP_DIR=$idp bash "$here/real/install_idp.sh"
MCPWIRE_CONFORMANCE_DIR=$conformance bash "$here/official_suite/install_runner.sh"
if [ ${#apt_missing[@]} -gt 0 ]; then
  if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
    say "not root and no sudo: install ${apt_missing[*]} as root (apt-get install ${apt_missing[*]}), then run this again" >&2
    exit 1
  fi
  say "running: ${sudo:+sudo }apt-get update, then ${sudo:+sudo }apt-get install ${apt_missing[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >/dev/null
fi
say "done"
