#!/usr/bin/env bash
# check-versions.sh: one version number for every package (issue 17 §3):
# the Cargo workspace (core, the bindings' crates, the wheel, which maturin
# reads from it, and Swift, whose `honkerVersion` comes from the same crate
# version), the extension's own workspace, the npm package and its lock files,
# and a CHANGELOG.md section for it. The run-time values are checked by each
# surface's tests (honker.__version__, require('honker').version,
# SELECT honker_version()).
set -euo pipefail
cd "$(dirname "$0")/.."

workspace=$(bash scripts/version.sh)
extension=$(bash scripts/version.sh extension/Cargo.toml)
npm=$(node -p 'require("./bindings-node/package.json").version')
npm_lock=$(node -p 'const l = require("./bindings-node/package-lock.json"); l.version + " " + l.packages[""].version')
npm_platforms=$(node -p 'const fs = require("fs"); const deps = require("./bindings-node/package.json").optionalDependencies;
fs.readdirSync("bindings-node/npm").flatMap((d) => { const p = require(`./bindings-node/npm/${d}/package.json`);
return [`bindings-node/npm/${d}/package.json:${p.version}`, `bindings-node/package.json (optionalDependencies ${p.name}):${deps[p.name]}`]; }).join("\n")')
bench_lock=$(node -p 'require("./bench/node/package-lock.json").packages["../../bindings-node"].version')

fail=0
while IFS= read -r pair; do
    if [ "${pair##*:}" != "$workspace" ]; then
        echo "check-versions: ${pair%:*} says ${pair##*:}, the Cargo workspace says $workspace" >&2
        fail=1
    fi
done < <(printf '%s\n' "extension/Cargo.toml:$extension" "bindings-node/package.json:$npm" \
    "bindings-node/package-lock.json:${npm_lock% *}" "bindings-node/package-lock.json (root package):${npm_lock#* }" \
    "bench/node/package-lock.json:$bench_lock" "$npm_platforms")
if ! grep -q "^## $workspace\b" CHANGELOG.md; then
    echo "check-versions: CHANGELOG.md has no '## $workspace' section" >&2
    fail=1
fi
[ "$fail" = 0 ] && echo "versions: $workspace everywhere"
exit "$fail"
