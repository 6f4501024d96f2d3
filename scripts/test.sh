#!/usr/bin/env bash
# Runs every check and test of the project: formatting, lints, unit and
# integration tests (multi-process ones included), doc-tests (README too),
# the loadable extension in Debian's own SQLite, crash and error points
# injected with strace (tests-faults), the examples, and a build of the
# benchmarks. Installs what it needs first (scripts/deps.sh). CI runs
# exactly this.
#
# Two tiers (DESIGN §15; README, "Working on honker"):
#   bash scripts/test.sh            the submission tier: what .ci/run runs on
#                                   every submission, everything that catches
#                                   a broken change
#   bash scripts/test.sh --release  the release tier (scripts/release.sh, and
#                                   scripts/cold-check.sh): the same, plus what
#                                   a release needs and a change rarely
#                                   breaks: the sdist built from source, the
#                                   full crash/error-point sweep
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
tier=submission
case "${1:-}" in
    "") ;;
    --release) tier=release ;;
    *)
        echo "usage: bash scripts/test.sh [--release]" >&2
        exit 2
        ;;
esac

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
# Every tool and test of the run makes its temporary files in a temp dir of
# the run's own, removed with $work (the last step checks that the tests
# removed their own). Mode 1777 like /tmp: a test drops to nobody.
run_tmp="$(mktemp -d)"
chmod 1777 "$run_tmp"
# Mounts under the run's temp dir, deepest first. One a test left is
# detached (lazily) so that the directory can go; the last step fails on one.
leftover_mounts() {
    awk -v d="$run_tmp" 'index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
unmount_leftovers() {
    local m
    for m in $(leftover_mounts); do
        umount -l "$m" 2>/dev/null || true
    done
}
trap 'status=$?; report_timings; unmount_leftovers; rm -rf "$work" "$run_tmp"; exit $status' EXIT
export TMPDIR="$run_tmp"

step "dependencies"
. scripts/deps.sh
honker_target
honker_tools

step "scripts: a script whose stdout is its result prints nothing else"
bash scripts/check-scripts.sh
bash scripts/check-versions.sh
python3 scripts/check-links.py --self-test

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path extension/Cargo.toml -- --check

step "generated facts: error codes, job states and the interop op table in every surface match their source"
python3 scripts/facts.py --check --self-test

step "loadable extension (its own workspace; core without rusqlite)"
# The release build, linked against glibc 2.17 with zig: the one the
# manylinux wheel, the npm package and the download carry, and the one every
# test here loads (HONKER_EXT), the README's demo included. Its own directory
# under target/: its flags differ from the wheel's zig build, and sharing one
# directory made each rebuild the other every run.
ext_log="$work/extension.log"
cargo zigbuild --release --locked \
    --manifest-path extension/Cargo.toml --target x86_64-unknown-linux-gnu.2.17 --target-dir target/zig-ext 2>&1 |
    tee "$ext_log"
# Warnings in core's protocol-only build show here and nowhere else.
if grep -q '^warning' "$ext_log"; then
    echo "test.sh: the extension build has warnings" >&2
    exit 1
fi
release_ext="$PWD/target/zig-ext/x86_64-unknown-linux-gnu/release/libhonker_ext"
export HONKER_EXT="$release_ext"

step "SQL extension download: archive + checksum, loaded by Debian's sqlite3 shell and python3"
ext_archive=$(HONKER_EXT_SO="$release_ext.so" bash scripts/package-extension.sh)
bash scripts/check-extension-archive.sh "$ext_archive"

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --manifest-path extension/Cargo.toml --target-dir target --locked -- -D warnings
# core's layers (core/README.md's table): no import up a layer, no cycle.
python3 scripts/layers.py
python3 scripts/layers.py --self-test

step "python lint (ruff)"
ruff check bindings-python extension/tests bench/python bench/instr bench/swift demo tests-interop tests-faults scripts
ruff format --check bindings-python extension/tests bench/python bench/instr bench/swift demo tests-interop tests-faults scripts

step "cargo doc (broken links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked -q -p honker -p honker-engine --no-deps

step "cargo test (unit, integration, multi-process, doc-tests)"
log="$work/cargo-test.log"
cargo test --workspace --locked 2>&1 | tee "$log"
# The operator's command as README installs it alone (the debug build above
# is reused, so this only links and copies).
cargo install --locked --debug --path cli --root "$work/cli-root" --target-dir target -q
[ "$("$work/cli-root/bin/honker" --version)" = "honker $(bash scripts/version.sh)" ]

step "core on the system SQLite (Debian 12's libsqlite3, 3.40.1: the Swift package's mode, ADR 18)"
# The same tests without the `bundled` feature, linked to the system's
# shared library (the extension's test builds its own workspace: skipped).
system_tests=()
for t in core/tests/*.rs; do
    name=$(basename "$t" .rs)
    [ "$name" = extension ] || system_tests+=(--test "$name")
done
cargo test -p honker --no-default-features --features rusqlite --locked --lib "${system_tests[@]}" 2>&1 | tee -a "$log"
cargo test -p honker-engine --no-default-features --features rusqlite --locked --lib 2>&1 | tee -a "$log"

step "Apple: core and the Swift library for iOS (clippy; the release static library checked; nothing linked or run here)"
# Every cfg(target_vendor = "apple") path (the kqueue watcher) compiles
# without warnings; the iOS static library as scripts/apple-xcframework.sh
# builds it defines no sqlite3_* symbol (it runs on the system SQLite, ADR
# 18) and calls them; its size once stripped is printed. Linking and running
# need Apple's SDK (docs/swift.md); llvm-nm/llvm-strip come from rustup.
rustup target add aarch64-apple-ios >/dev/null 2>&1 || rustup target add aarch64-apple-ios
rustup component add llvm-tools >/dev/null 2>&1 || rustup component add llvm-tools
cargo clippy --locked -q -p honker-swift --target aarch64-apple-ios -- -D warnings
CARGO_PROFILE_RELEASE_DEBUG=0 cargo rustc --locked -q --release -p honker-swift \
    --target aarch64-apple-ios --crate-type staticlib
llvm_bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
ios_lib=target/aarch64-apple-ios/release/libhonker_swift.a
ios_defined=$("$llvm_bin/llvm-nm" -g "$ios_lib" 2>/dev/null | grep -cE ' [TDRBSC] _sqlite3_' || true)
ios_used=$("$llvm_bin/llvm-nm" -g "$ios_lib" 2>/dev/null | grep -cE ' U _sqlite3_' || true)
if [ "$ios_defined" -ne 0 ] || [ "$ios_used" -eq 0 ]; then
    echo "test.sh: the iOS library defines $ios_defined sqlite3_* symbols (want 0), uses $ios_used (want > 0)" >&2
    exit 1
fi
cp "$ios_lib" "$work/ios.a"
"$llvm_bin/llvm-strip" -S -x "$work/ios.a"
echo "iOS libhonker_swift.a: no sqlite3_* defined, $ios_used references to the system's; $(stat -c %s "$ios_lib") bytes, $(stat -c %s "$work/ios.a") stripped"
bash scripts/apple-xcframework.sh --dry-run >/dev/null
shellcheck scripts/apple-xcframework.sh

step "other platforms: clippy for Linux arm64, musl, macOS and Windows; core's tests built for Windows, run under Wine"
# The submission tier's share of issue 54 (README, "Platforms"): every
# cfg(not(linux)) and cfg(windows) path compiles without warnings, and core
# works on Windows (file locking, the timed watcher, multi-process claims
# with two Wine processes on one file, paths). scripts/release.sh builds and
# checks every package and runs what can run here (qemu, Wine).
# (musl is Linux's code on another C library, checked by clippy for the
# libc crate's musl-only items; release.sh runs core's tests built for it.)
for t in aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-apple-darwin x86_64-pc-windows-gnu; do
    rustup target list --installed | grep -qx "$t" || rustup target add "$t"
done
# From the run's scratch directory: zig leaves an empty object file where it
# runs for Apple targets.
for t in aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-apple-darwin; do
    (cd "$work" && cargo-zigbuild clippy --locked -q --manifest-path "$root/Cargo.toml" -p honker -p honker-engine \
        --target "$t" -- -D warnings)
done
# napi's build script wants a libnode.dll to link against even though the
# Windows addon looks Node-API up at load (bindings-node/scripts/build.js).
libnode="$work/libnode"
mkdir -p "$libnode"
: > "$libnode/empty.c"
x86_64-w64-mingw32-gcc -shared -o "$libnode/libnode.dll" "$libnode/empty.c"
# The Python module's build script copies an extension into the wheel: any
# file does for clippy.
: > "$libnode/libhonker_ext.dll"
HONKER_EXT="$libnode/libhonker_ext" LIBNODE_PATH="$libnode" cargo clippy --locked -q --target x86_64-pc-windows-gnu \
    -p honker -p honker-engine -p honker-cli -p honker-node -p honker-python --all-targets -- -D warnings
win_log="$work/windows-tests.log"
CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="bash $root/scripts/wine.sh" \
    cargo test --locked -p honker -p honker-engine --target x86_64-pc-windows-gnu --no-fail-fast 2>&1 | tee "$win_log" |
    grep -E '^(test result|warning|error)|FAILED|panicked' || true
if grep -qE '^test result: FAILED|^error' "$win_log" || ! grep -q '^test result: ok' "$win_log"; then
    # Each failed target's whole output (a binary that died prints no
    # result line), then the end of the log.
    for failed in $(sed -nE 's/.*`-p [a-z-]+ --(test|lib)( ([a-z_]+))?`.*/\3/p' "$win_log" | sort -u); do
        awk -v t="tests/$failed.rs" '/^ +Running /{on = index($0, t) > 0} on' "$win_log" >&2
    done
    tail -n 60 "$win_log" >&2
    echo "test.sh: core's tests failed under Wine" >&2
    exit 1
fi
shellcheck -x scripts/release.sh scripts/platform-runs.sh scripts/arm64-root.sh scripts/wine.sh scripts/xcframework-cross.sh
echo "core under Wine: $(awk '/^test result: ok\./ { s += $4 } END { print s }' "$win_log") tests passed"

step "python: the release wheel (manylinux_2_17 via zig), installed from its file; pytest and mypy without Rust on PATH; every CPython"
honker_python_venv
# The build backend (maturin) comes from the venv, so no isolated build env
# has to be downloaded; build.rs takes the extension built above.
# The wheel a release would publish: abi3 for CPython >= 3.9, built with zig
# against glibc 2.17 (the extension inside it too), into the work directory,
# without debug info; auditwheel must find it manylinux_2_17, and it must
# stay under 6 MB. It is installed from the file into a fresh venv, and the
# suite runs there with no cargo or rustc on PATH.
wheelhouse="$work/wheelhouse"
rm -rf "$wheelhouse"
HONKER_EXT="$release_ext" "$HONKER_VENV/bin/maturin" build --release --zig --compatibility manylinux_2_17 \
    --target x86_64-unknown-linux-gnu -m bindings-python/Cargo.toml -o "$wheelhouse"
wheel=$(ls "$wheelhouse"/honker-*.whl)
auditwheel show "$wheel" | tee "$work/auditwheel.txt"
grep -q 'consistent with the following platform tag:' "$work/auditwheel.txt"
grep -q '"manylinux_2_17_x86_64"' "$work/auditwheel.txt"
wheel_size=$(stat -c %s "$wheel")
if [ "$wheel_size" -gt $((6 * 1024 * 1024)) ]; then
    echo "test.sh: $(basename "$wheel") is $wheel_size bytes, over 6 MB (debug info left in?)" >&2
    exit 1
fi
# The extension is in the wheel, next to the package, and nowhere in the
# source tree (build.rs writes it to its OUT_DIR).
# (The listing is read whole first: `grep -q` on a pipe exits at its first
# match, and under pipefail the writer's broken pipe failed the step.)
wheel_listing=$("$HONKER_VENV/bin/python" -m zipfile -l "$wheel")
grep -q 'honker/libhonker_ext.so' <<<"$wheel_listing"
if ls bindings-python/python/honker/*.so 2>/dev/null | grep -q .; then
    echo "test.sh: a build wrote a library into bindings-python/python/honker/" >&2
    exit 1
fi
# A fresh venv of Debian's Python (its sqlite3 loads extensions): the test
# dependencies, then the wheel from its file, timed.
wheel_venv="$work/venv-wheel"
/usr/bin/python3 -m venv "$wheel_venv"
# shellcheck disable=SC2086
"$wheel_venv/bin/pip" install -q --disable-pip-version-check $HONKER_PY_TEST_DEPS
installed_in=$( { TIMEFORMAT=%R; time "$wheel_venv/bin/pip" install -q --disable-pip-version-check \
    --no-deps "$wheel" >&2; } 2>&1 | tail -1)
echo "wheel: $(basename "$wheel"), $wheel_size bytes, installed in ${installed_in} s"
# The later steps' venv (interop, crash points, benchmarks) runs the same wheel.
"$HONKER_VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
no_rust_path=$(bash scripts/no-rust-path.sh "$wheel_venv/bin")
py_log="$work/pytest.log"
# Honker 0.2.4 itself writes the files test_import_honker.py imports.
honker024_venv
# A non-Python Honker client for test_honker_clients.py (Bun, from npm).
HONKER_BUN=$(bash scripts/bun.sh)
export HONKER_BUN
(cd bindings-python && PATH="$no_rust_path" "$wheel_venv/bin/python" -m pytest -q -p no:cacheprovider) 2>&1 | tee "$py_log"
# Type checkers see honker's types (py.typed and the stubs are in the wheel):
# a user's script over the whole API passes mypy --strict, and runs; typed
# payloads refuse what they must (each expected error is a `type: ignore`
# that --warn-unused-ignores fails on when the error goes away).
(cd bindings-python/tests/typing && PATH="$no_rust_path" "$wheel_venv/bin/python" -m mypy --strict \
    --warn-unused-ignores --cache-dir "$work/mypy-cache" user_script.py typed_payloads.py)
PATH="$no_rust_path" "$wheel_venv/bin/python" bindings-python/tests/typing/user_script.py
PATH="$no_rust_path" "$wheel_venv/bin/python" bindings-python/tests/typing/typed_payloads.py
# The same file on every other CPython >= 3.9 on the machine (pyenv's here):
# a fresh venv each, the wheel installed from its file, the README's example.
for py in /usr/bin/python3 "$HOME"/.pyenv/versions/3.*/bin/python3; do
    [ -x "$py" ] || continue
    "$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || continue
    venv="$work/venv-$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel"
    PATH="$venv/bin:/usr/bin:/bin" "$venv/bin/python" scripts/readme-python.py
done

if [ "$tier" = release ]; then
    step "python: the sdist, complete, built from source in a clean venv; its errors name what is missing (release tier)"
    bash scripts/check-sdist.sh
fi

# 200 kill points and 100 error points; the release tier (HONKER_SLOW=1)
# runs every call both ways.
faults_slow=0 faults_at="pwrite64 calls"
[ "$tier" = release ] && faults_slow=1 faults_at="every pwrite64 call (release tier)"
step "crash and error points: SIGKILL and ENOSPC/EIO at $faults_at, recovery from the files alone"
faults_log="$work/faults.log"
HONKER_SLOW=$faults_slow "$HONKER_VENV/bin/python" tests-faults/run.py 2>&1 | tee "$faults_log"

step "node binding: release build (glibc 2.17 via zig), declarations, tsc, node --test; the npm tarballs installed without Rust"
# The addon a release publishes in honker-linux-x64-gnu, built once with
# cargo-zigbuild against glibc 2.17 and used by every Node test here. It
# lands in the build directory (target/node/linux-x64-gnu/, with the
# extension), where the checkout's loader finds it; napi-derive writes the
# type definitions on the way.
typedefs="$work/typedefs"
mkdir -p "$typedefs"
node bindings-node/scripts/build.js --zig --typedefs "$typedefs"
node_size=$(stat -c %s target/node/linux-x64-gnu/honker.node)
# (Stripped it is about 8.5 MB: the IANA time-zone database since ADR 24,
# the operator's command since cli.js, its own crate built for size since
# the package outgrew 12 MiB (Cargo.toml); with debug info it is over 80 MB.
# scripts/package-node.sh checks the package below.)
if [ "$node_size" -gt $((12 * 1024 * 1024)) ]; then
    echo "test.sh: honker.node is $node_size bytes, over 12 MB (debug info left in?)" >&2
    exit 1
fi
echo "honker.node: $node_size bytes"
# Dev dependencies (the install script finds the addon built above).
(cd bindings-node && npm install --no-audit --no-fund --loglevel=error)
# native.d.ts is generated from the Rust code by napi-rs: regenerate it from
# the build above and fail if it changed.
cp bindings-node/native.d.ts "$work/native.d.ts"
(cd bindings-node && node scripts/types.mjs --from "$typedefs")
if ! diff -u "$work/native.d.ts" bindings-node/native.d.ts; then
    echo "test.sh: bindings-node/native.d.ts is stale; the regenerated one is in place: commit it" >&2
    exit 1
fi
(cd bindings-node && npx tsc -p .)
node_log="$work/node-test.log"
(cd bindings-node && node --test test/) 2>&1 | tee "$node_log"
# What a release publishes: `npm pack` of bindings-node and of
# npm/linux-x64-gnu with the binaries; installed into fresh projects with no
# Rust on PATH (README example from ESM and CJS, strict TypeScript, the
# extension in better-sqlite3, the error without the platform package).
mapfile -t tarballs < <(bash scripts/package-node.sh)
bash scripts/check-npm-packages.sh "${tarballs[@]}"

step "swift binding: generated sources current; swift build + swift test in the Debian 13 chroot"
swift_log="$work/swift-test.log"
bash scripts/swift-test.sh 2>&1 | tee "$swift_log"
grep -q "Test Suite 'All tests' passed" "$swift_log"
# The interop runner plays the Swift surface in the same chroot.
HONKER_SWIFT_ROOT="$(bash scripts/swift-chroot.sh)"
export HONKER_SWIFT_ROOT

step "tests-interop: every scenario, roles across surfaces, one file; the honker command on each play's file"
cargo build --locked -q -p honker-interop-driver
interop_log="$work/interop.log"
interop_files="$work/interop-files"
rm -rf "$interop_files"
mkdir -p "$interop_files"
"$HONKER_VENV/bin/python" tests-interop/run.py --keep "$interop_files" 2>&1 | tee "$interop_log"
# Every read command on every kept file (Swift's included): the human
# output is the scenario's snapshot whoever played it, the JSON matches its
# schema, the file is unchanged (cli/tests/interop_files.rs).
HONKER_INTEROP_FILES="$interop_files" cargo test --locked -q -p honker-cli --test interop_files -- --ignored 2>&1 | tee -a "$log"

step "examples: the README's demo (Python shop, Node mailer, SQL inspector, the drill) and the Rust one"
demo_log="$work/demo.log"
bash scripts/demo.sh 2>&1 | tee "$demo_log"
grep -q "sent order-confirmed to carol@example.com" "$demo_log"
grep -q "orders for mallory (rolled back): 0" "$demo_log"
grep -q "email jobs ever created:          3" "$demo_log"
# (Each key on its own: the stats JSON's keys are sorted, and new fields
# land between them.)
grep -q '"ready":0,' "$demo_log"
grep -q '"running":0,' "$demo_log"
# The drill: the killed mailer's email came back after its lease, was counted
# as reclaimed, and the idempotency key kept it to one delivery.
grep -q "already sent under this key: not sent again" "$demo_log"
grep -q 'honker_jobs_total{queue="emails",event="reclaimed"} 1' "$demo_log"
grep -q "emails the mail service delivered to dave: 1" "$demo_log"
# A newcomer reads a cargo warning or bash's notice of the drill's SIGKILL
# ("Killed") as an error: the demo prints neither.
if grep -nE '^warning|Killed' "$demo_log"; then
    echo "test.sh: the demo printed a warning or a job's kill notice (above)" >&2
    exit 1
fi
cargo run --locked -q -p honker --example outbox_demo "$work/outbox-demo.db"

step "benchmarks build (and the Python benchmark, at smoke scale: it must keep working)"
cargo build --locked -q --release -p honker-bench
"$HONKER_VENV/bin/python" bench/python/run.py --smoke
"$HONKER_VENV/bin/python" bench/python/w3_schema.py --smoke >/dev/null
"$HONKER_VENV/bin/python" bench/python/streams.py --smoke >/dev/null
"$HONKER_VENV/bin/python" bench/python/locks.py --smoke >/dev/null
"$HONKER_VENV/bin/python" bench/python/scheduler.py --smoke >/dev/null
"$HONKER_VENV/bin/python" bench/python/idle_waits.py --smoke >/dev/null
(cd bench/node && npm install --no-audit --no-fund --loglevel=error && node run.mjs --smoke)
"$HONKER_VENV/bin/python" bench/swift/run.py --smoke
bash bench/watcher/run.sh 50

step "instruction counts per job (callgrind): core and Python W1-W4 against bench/instr/baseline.json; its self-test"
"$HONKER_VENV/bin/python" bench/instr/check.py --bench target/release/honker-bench
"$HONKER_VENV/bin/python" bench/instr/check.py --bench target/release/honker-bench \
    --self-test --only core/W3,python/W3

step "the tests removed their temporary files and unmounted what they mounted"
mounts=$(leftover_mounts)
if [ -n "$mounts" ]; then
    echo "test.sh: tests left these mounted in the temp dir:" >&2
    printf '  %s\n' "$mounts" >&2
    exit 1
fi
# A test's leftovers: anything named honker-*, or holding a database. Other
# tools' files are named, not failed on (CPython 3.9's ensurepip leaves the
# CA bundle its pip extracted; an installer on a fresh machine may leave
# more); pytest keeps its numbered base dirs by design.
leaks=()
for p in "$TMPDIR"/* "$TMPDIR"/.[!.]*; do
    [ -e "$p" ] || continue
    name=$(basename "$p")
    case "$name" in pytest-of-*) continue ;; esac
    if [[ "$name" == honker-* ]] || [ -n "$(find "$p" -name '*.db' -print -quit)" ]; then
        leaks+=("$p")
    else
        echo "test.sh: not a test's, left in the temp dir: $p"
    fi
done
if [ "${#leaks[@]}" -gt 0 ]; then
    echo "test.sh: tests left these in the temp dir:" >&2
    printf '  %s\n' "${leaks[@]}" >&2
    exit 1
fi

report_timings
echo
echo "test.sh: all checks passed ($tier tier)"
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
