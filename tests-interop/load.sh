#!/usr/bin/env bash
# load.sh: the worker plays (worker_sigstop, worker_sigterm, workers: every
# language's Worker signalled, stopped and killed) N times (30 unless given)
# while BUSY busy loops (2 unless given: one per core here, as `stress
# --cpu 2` would) keep the machine loaded. The plays wait for mechanisms
# (a handler started, a lease lapsed and rescued), not for times; this is
# how that is shown to hold on a loaded machine. Not part of .ci/run (30
# rounds, 270 plays, took 355 s here at load average 2.5-3; 10 rounds with 6
# busy loops passed too): run it after changing a worker, a play or the
# harness.
#
#   bash tests-interop/load.sh [N] [BUSY]
#
# Needs what scripts/test.sh built: the extension (target/zig-ext), the Node
# addon (target/node), the Rust driver, and the Swift package built in its
# chroot (scripts/swift-test.sh). Exits non-zero if any play failed.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-30}"
busy="${2:-2}"
. scripts/deps.sh
honker_target
honker_python_venv
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export HONKER_EXT="${HONKER_EXT:-$PWD/target/zig-ext/x86_64-unknown-linux-gnu/release/libhonker_ext}"
[ -f "$HONKER_EXT.so" ] || { echo "load.sh: no $HONKER_EXT.so: run scripts/test.sh first" >&2; exit 1; }
[ -f target/node/linux-x64-gnu/honker.node ] || { echo "load.sh: no Node addon: run scripts/test.sh first" >&2; exit 1; }
HONKER_SWIFT_ROOT="$(bash scripts/swift-chroot.sh)"
export HONKER_SWIFT_ROOT
cargo build --locked -q -p honker-interop-driver

loops=()
stop_loops() { [ "${#loops[@]}" -eq 0 ] || kill "${loops[@]}" 2>/dev/null || true; }
trap stop_loops EXIT
for _ in $(seq 1 "$busy"); do
    (while :; do :; done) &
    loops+=($!)
done
echo "load.sh: $busy busy loops; load average $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS
status=0
"$HONKER_VENV/bin/python" tests-interop/run.py --only worker_sigstop,worker_sigterm,workers --repeat "$n" || status=$?
echo "load.sh: $n rounds in $((SECONDS - start)) s; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
