#!/usr/bin/env bash
# Sets up what the demo needs (builds the Rust workspace) and runs it: a shop
# process writes orders and their confirmation emails in one transaction each,
# a worker process claims and "sends" the emails from the same SQLite file.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
    echo "demo.sh: cargo not found; install Rust 1.89+ with rustup (https://rustup.rs)" >&2
    exit 1
fi
if ! command -v cc >/dev/null; then
    echo "demo.sh: a C compiler is needed to build SQLite: apt-get install -y build-essential" >&2
    exit 1
fi

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo build --locked -q -p honker --example outbox_demo
exec cargo run --locked -q -p honker --example outbox_demo "$@"
