#!/usr/bin/env bash
# Runs every check and test of the project: formatting, lints, unit and
# integration tests (multi-process ones included), doc-tests (README too),
# the examples, and a build of the benchmarks. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

if ! command -v cargo >/dev/null; then
    echo "test.sh: cargo not found; install Rust 1.89+ with rustup (https://rustup.rs)" >&2
    exit 1
fi

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

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
