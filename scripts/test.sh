#!/usr/bin/env bash
# Runs every check and test of the project: formatting, lints, unit and
# integration tests (multi-process ones included), doc-tests (README too),
# the loadable extension in Debian's own SQLite, the examples, and a build of
# the benchmarks. Installs what it needs first (scripts/deps.sh). CI runs
# exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n==> %s\n' "$*"; }

step "dependencies"
. scripts/deps.sh
honker_tools

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path extension/Cargo.toml -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --manifest-path extension/Cargo.toml --target-dir target --locked -- -D warnings

step "python lint (ruff)"
ruff check extension/tests
ruff format --check extension/tests

step "loadable extension (its own workspace; core without rusqlite)"
ext_log="$(mktemp)"
cargo build --release --locked --manifest-path extension/Cargo.toml --target-dir target 2>&1 | tee "$ext_log"
# Warnings in core's protocol-only build show here and nowhere else.
if grep -q '^warning' "$ext_log"; then
    echo "test.sh: the extension build has warnings" >&2
    exit 1
fi
rm -f "$ext_log"
export HONKER_EXT="$PWD/target/release/libhonker_ext"

step "cargo doc (broken links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked -q -p honker --no-deps

step "cargo test (unit, integration, multi-process, doc-tests)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked 2>&1 | tee "$log"

step "example: the outbox demo"
cargo run --locked -q -p honker --example outbox_demo

step "benchmarks build"
cargo build --locked -q --release -p honker-bench

echo
echo "test.sh: all checks passed"
# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
