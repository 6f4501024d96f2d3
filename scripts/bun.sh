#!/usr/bin/env bash
# bun.sh — installs (once, cached outside the repository) the Bun runtime
# from npm, pinned, and prints the path of its executable. The Honker-client
# tests run a Bun client (extension/tests/bun_client.ts) against the
# extension: a non-Python host waiting through the watcher C ABI.
#
# stdout: the result. Everything else goes to stderr; fd 3 keeps the real
# stdout for the one line of result (scripts/check-scripts.sh enforces it).
set -euo pipefail
exec 3>&1 1>&2
version=1.4.5
cache="${HONKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/honker}"
dir="$cache/bun-$version"
bun="$dir/node_modules/@oven/bun-linux-x64/bin/bun"
if [ ! -x "$bun" ]; then
    mkdir -p "$dir"
    npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "@oven/bun-linux-x64@$version"
fi
"$bun" --version >/dev/null
echo "$bun" >&3
