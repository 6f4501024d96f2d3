#!/usr/bin/env bash
# check-npm-packages.sh HONKER_TGZ PLATFORM_TGZ: installs the tarballs
# scripts/package-node.sh packed into fresh projects, as users would, on a
# PATH without cargo or rustc (issue 17 §2):
#   - both tarballs: nothing is built; the README's Node example runs from
#     ESM and from CommonJS; a strict TypeScript file over the whole API
#     compiles against the package's own declarations; `extensionPath` loads
#     into better-sqlite3 and reports the package's version;
#   - the `honker` command is installed (node_modules/.bin/honker) and reads a
#     file the package wrote;
#   - both with --ignore-scripts: the same addon loads (no install step needed);
#   - a source install (`npm install` of the checkout's bindings-node) gives
#     the `honker` command too;
#   - `honker` alone (no package for the platform): the install script says
#     what is missing (npm shows it with --foreground-scripts), and
#     require('honker') fails with that explanation, not with "Cannot find
#     module".
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
honker_tgz=$(realpath "$1")
platform_tgz=$(realpath "$2")
node_bin=$(dirname "$(command -v node)")
no_rust_path=$(bash scripts/no-rust-path.sh "$node_bin")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
version=$(node -p 'require("./bindings-node/package.json").version')

project() {
    mkdir -p "$scratch/$1"
    (cd "$scratch/$1" && PATH="$no_rust_path" npm init -y >/dev/null)
}
install() {
    local dir=$1
    shift
    (cd "$scratch/$dir" && PATH="$no_rust_path" npm install --no-audit --no-fund --loglevel=error "$@")
}

echo "== both tarballs, no Rust on PATH"
project app
install app "$honker_tgz" "$platform_tgz"
app="$scratch/app"
[ -f "$app/node_modules/honker-linux-x64-gnu/honker.node" ]
[ -f "$app/node_modules/honker-linux-x64-gnu/libhonker_ext.so" ]
# Nothing was built or copied into the main package.
binaries=$(find "$app/node_modules/honker" -name '*.node' -o -name '*.so')
if [ -n "$binaries" ]; then
    echo "check-npm-packages: the honker package holds a binary" >&2
    exit 1
fi
PATH="$no_rust_path" node scripts/readme-node.mjs "$app"
# The extension that ships with the addon, loaded as a better-sqlite3 user
# would (better-sqlite3 from bindings-node's dev dependencies).
(cd "$app" && PATH="$no_rust_path" node -e "
  const honker = require('honker');
  const Database = require('$root/bindings-node/node_modules/better-sqlite3');
  const db = new Database(':memory:');
  db.loadExtension(honker.extensionPath);
  const v = db.prepare('SELECT honker_version() AS v').get().v;
  if (v !== '$version' || honker.version !== '$version') throw new Error('versions: ' + v + ' ' + honker.version);
  if (!honker.extensionPath.includes('node_modules/honker-linux-x64-gnu/')) throw new Error(honker.extensionPath);
  console.log('extensionPath:', honker.extensionPath, 'honker_version():', v);
")
# Strict TypeScript against the package's declarations (the API-wide file
# the repository type-checks, compiled in the user's project).
cp bindings-node/examples/typed.ts "$app/typed.ts"
cat > "$app/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "strict": true,
    "noEmit": true,
    "target": "ES2022",
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "types": ["node"],
    "typeRoots": ["TYPEROOTS"],
    "skipLibCheck": false
  },
  "files": ["typed.ts"]
}
JSON
sed -i "s|TYPEROOTS|$root/bindings-node/node_modules/@types|" "$app/tsconfig.json"
(cd "$app" && PATH="$no_rust_path" "$root/bindings-node/node_modules/.bin/tsc" -p .)
echo "typed.ts: compiles (strict) against node_modules/honker/index.d.ts"
# The operator's command, run inside the addon (cli.js).
(cd "$app" && PATH="$no_rust_path" node -e "
  require('honker').open('cli.db').then(async (db) => { await db.queue('emails').enqueue({ to: 'a' }); await db.close(); });
")
[ "$(cd "$app" && PATH="$no_rust_path" npx --no-install honker --version)" = "honker $version" ]
(cd "$app" && PATH="$no_rust_path" npx --no-install honker status cli.db --json) |
    node -e "const s = JSON.parse(require('fs').readFileSync(0, 'utf8')); if (s.queues[0].ready !== 1) throw new Error(JSON.stringify(s));"
echo "honker command: node_modules/.bin/honker -> $(readlink "$app/node_modules/.bin/honker")"

echo "== both tarballs with --ignore-scripts"
project quiet
install quiet --ignore-scripts "$honker_tgz" "$platform_tgz"
(cd "$scratch/quiet" && PATH="$no_rust_path" node -e "require('honker').open('a.db').then((db) => db.close())")

echo "== a source install: the checkout's bindings-node (its addon from the build directory)"
project source
install source "$root/bindings-node"
[ "$(cd "$scratch/source" && PATH="$no_rust_path" npx --no-install honker --version)" = "honker $version" ]

echo "== honker alone: no addon for the platform"
project bare
log="$scratch/bare.log"
# npm shows an install script's output only with --foreground-scripts.
install bare --foreground-scripts "$honker_tgz" 2>&1 | tee "$log"
grep -q "honker-linux-x64-gnu: not installed" "$log"
if (cd "$scratch/bare" && PATH="$no_rust_path" node -e "require('honker')") 2>"$scratch/bare.err"; then
    echo "check-npm-packages: require('honker') worked without the platform package" >&2
    exit 1
fi
cat "$scratch/bare.err" >&2
grep -q "NativeBindingError" "$scratch/bare.err"
grep -q "npm install honker-linux-x64-gnu@$version" "$scratch/bare.err"
if grep -q "Cannot find module" "$scratch/bare.err"; then
    echo "check-npm-packages: the error is a bare 'Cannot find module'" >&2
    exit 1
fi
echo "npm packages: installed and ran without Rust"
