#!/usr/bin/env bash
# Runs every check and test of the project: formatting, lints, unit and
# integration tests (multi-process ones included), doc-tests (README too),
# the loadable extension in Debian's own SQLite, crash and error points
# injected with strace (tests-faults), the examples, and a build of the
# benchmarks. Installs what it needs first (scripts/deps.sh). CI runs
# exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Each step's wall time, and the total, are printed at the end (also when a
# step fails): later changes budget CI time against them (DESIGN §10).
run_start=$SECONDS
step_name=""
step_start=$SECONDS
timings=()
end_step() {
    [ -n "$step_name" ] && timings+=("$(printf '%5ds  %s' $((SECONDS - step_start)) "$step_name")")
    step_name=""
}
step() {
    end_step
    step_name="$*"
    step_start=$SECONDS
    printf '\n==> %s\n' "$*"
}
reported=0
report_timings() {
    [ "$reported" = 1 ] && return 0
    reported=1
    end_step
    echo
    echo "test.sh: step timings"
    printf '  %s\n' "${timings[@]}"
    printf '  %5ds  total\n' $((SECONDS - run_start))
}

# Logs the closing summary reads, and scratch projects: one place, one trap.
work="$(mktemp -d)"
trap 'status=$?; report_timings; rm -rf "$work"; exit $status' EXIT

step "dependencies"
. scripts/deps.sh
honker_tools

step "scripts: a script whose stdout is its result prints nothing else"
bash scripts/check-scripts.sh
bash scripts/check-versions.sh

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path extension/Cargo.toml -- --check

step "loadable extension (its own workspace; core without rusqlite)"
ext_log="$work/extension.log"
cargo build --release --locked --manifest-path extension/Cargo.toml --target-dir target 2>&1 | tee "$ext_log"
# Warnings in core's protocol-only build show here and nowhere else.
if grep -q '^warning' "$ext_log"; then
    echo "test.sh: the extension build has warnings" >&2
    exit 1
fi
export HONKER_EXT="$PWD/target/release/libhonker_ext"

step "SQL extension download: archive + checksum, loaded by Debian's sqlite3 shell and python3"
ext_archive=$(bash scripts/package-extension.sh)
bash scripts/check-extension-archive.sh "$ext_archive"

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --manifest-path extension/Cargo.toml --target-dir target --locked -- -D warnings

step "python lint (ruff)"
ruff check bindings-python extension/tests bench/python demo tests-interop tests-faults
ruff format --check bindings-python extension/tests bench/python demo tests-interop tests-faults

step "cargo doc (broken links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked -q -p honker --no-deps

step "cargo test (unit, integration, multi-process, doc-tests)"
log="$work/cargo-test.log"
cargo test --workspace --locked 2>&1 | tee "$log"

step "python binding: pip install ./bindings-python, then pytest"
honker_python_venv
# The build backend (maturin) comes from the venv, so no isolated build env
# has to be downloaded; build.rs copies the extension built above.
# The wheel is built first (into the work directory, not the source tree) and
# installed from the file, as a release would be; it carries no debug info
# and must stay under 6 MB.
wheelhouse="$work/wheelhouse"
rm -rf "$wheelhouse"
PATH="$HONKER_VENV/bin:$PATH" "$HONKER_VENV/bin/pip" wheel -q --disable-pip-version-check \
    --no-build-isolation --no-deps -w "$wheelhouse" ./bindings-python
wheel=$(ls "$wheelhouse"/honker-*.whl)
wheel_size=$(stat -c %s "$wheel")
if [ "$wheel_size" -gt $((6 * 1024 * 1024)) ]; then
    echo "test.sh: $(basename "$wheel") is $wheel_size bytes, over 6 MB (debug info left in?)" >&2
    exit 1
fi
installed_in=$( { TIMEFORMAT=%R; time "$HONKER_VENV/bin/pip" install -q --disable-pip-version-check \
    --force-reinstall --no-deps "$wheel" >&2; } 2>&1 | tail -1)
echo "wheel: $(basename "$wheel"), $wheel_size bytes, installed in ${installed_in} s"
py_log="$work/pytest.log"
(cd bindings-python && "$HONKER_VENV/bin/python" -m pytest -q -p no:cacheprovider) 2>&1 | tee "$py_log"

step "crash and error points: SIGKILL and ENOSPC/EIO at pwrite64 calls, recovery from the files alone"
# 200 kill points and 100 error points; HONKER_SLOW=1 runs every call both ways.
faults_log="$work/faults.log"
"$HONKER_VENV/bin/python" tests-faults/run.py 2>&1 | tee "$faults_log"

step "node binding: npm install (builds the addon), declarations, tsc, node --test"
(cd bindings-node && npm install --no-audit --no-fund --loglevel=error)
node_size=$(stat -c %s bindings-node/honker.node)
if [ "$node_size" -gt $((8 * 1024 * 1024)) ]; then
    echo "test.sh: honker.node is $node_size bytes, over 8 MB (debug info left in?)" >&2
    exit 1
fi
echo "honker.node: $node_size bytes"
# native.d.ts is generated from the Rust code by napi-rs: regenerate it
# (scripts/types.mjs, on the same target directory as the install) and fail
# if it changed.
cp bindings-node/native.d.ts "$work/native.d.ts"
(cd bindings-node && npm run --silent types)
if ! diff -u "$work/native.d.ts" bindings-node/native.d.ts; then
    echo "test.sh: bindings-node/native.d.ts is stale; the regenerated one is in place: commit it" >&2
    exit 1
fi
(cd bindings-node && npx tsc -p .)
node_log="$work/node-test.log"
(cd bindings-node && node --test test/) 2>&1 | tee "$node_log"
# What a user does: npm install <path> into a project builds and links it.
consumer="$work/consumer"
mkdir -p "$consumer"
(cd "$consumer" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$root/bindings-node" \
    && node -e "require('honker').open('app.db').then((db) => db.close())" \
    && node --input-type=module -e "import { open } from 'honker'; await (await open('app2.db')).close()")

step "swift binding: generated sources current; swift build + swift test in the Debian 13 chroot"
swift_log="$work/swift-test.log"
bash scripts/swift-test.sh 2>&1 | tee "$swift_log"
grep -q "Test Suite 'All tests' passed" "$swift_log"
# The interop runner plays the Swift surface in the same chroot.
HONKER_SWIFT_ROOT="$(bash scripts/swift-chroot.sh)"
export HONKER_SWIFT_ROOT

step "tests-interop: every scenario, roles across surfaces, one file"
cargo build --locked -q -p honker-interop-driver
interop_log="$work/interop.log"
"$HONKER_VENV/bin/python" tests-interop/run.py 2>&1 | tee "$interop_log"

step "examples: the README's demo (Python shop, Node mailer, SQL inspector) and the Rust one"
demo_log="$work/demo.log"
bash scripts/demo.sh 2>&1 | tee "$demo_log"
grep -q "sent order-confirmed to carol@example.com" "$demo_log"
grep -q "orders for mallory (rolled back): 0" "$demo_log"
grep -q "email jobs ever created:          3" "$demo_log"
grep -q '"ready":0,"running":0' "$demo_log"
cargo run --locked -q -p honker --example outbox_demo

step "benchmarks build (and the Python benchmark, at smoke scale: it must keep working)"
cargo build --locked -q --release -p honker-bench
"$HONKER_VENV/bin/python" bench/python/run.py --smoke
"$HONKER_VENV/bin/python" bench/python/w3_schema.py --smoke >/dev/null
(cd bench/node && npm install --no-audit --no-fund --loglevel=error && node run.mjs --smoke)

report_timings
echo
echo "test.sh: all checks passed"
# One closing line for the whole run (cargo prints one per test binary).
# cargo prints "test result: ok. N passed; M failed"; pytest "N passed, M failed in".
{
    grep -h '^test result:' "$log" | awk '{ print $4, $6 }'
    awk '/^# pass / { p = $3 } /^# fail / { f = $3 } END { print p + 0, f + 0 }' "$node_log"
    grep -h '^interop:' "$interop_log" | awk '{ print $2, $4 }'
    grep -h '^faults:' "$faults_log" | awk '{ print $2, $4 }'
    # XCTest: "Executed N tests, with M failures" (the last one is the total).
    grep "Executed .* tests, with" "$swift_log" | tail -n 1 | awk '{ print $2 - $5, $5 }'
    tail -n 1 "$py_log" | awk '{
        p = 0; f = 0
        for (i = 2; i <= NF; i++) {
            if ($i ~ /^passed/) p = $(i - 1)
            if ($i ~ /^failed/) f = $(i - 1)
        }
        print p, f
    }'
} | awk '{ p += $1; f += $2 } END { printf "tests: %d passed, %d failed\n", p, f }'
