#!/usr/bin/env bash
# bench/watcher/run.sh [N]: wake latency of Honker's watcher C ABI as its
# non-Rust clients use it (extension/tests/watcher_client.c, built with the
# system's libsqlite3.so.0): N commits by another process, each timed from
# the start of its commit to the return of honker_watcher_wait in the waiting
# process; against, in the same run, a reader spinning on PRAGMA data_version
# (the floor: no sleeping waiter can be faster). Goal: p50 <= 1 ms. Prints
# the figures and the ratio; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-500}
ext=${HONKER_EXT:-target/release/libhonker_ext}
[ -f "$ext.so" ] || cargo build --release --locked --manifest-path extension/Cargo.toml --target-dir target -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -Werror -o "$work/watcher_client" -I extension/sqlite3 extension/tests/watcher_client.c \
    /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 -ldl
out=$("$work/watcher_client" "$ext" "$work/bench.db" bench "$n")
echo "$out" | grep -E '^(watcher|spin_floor) '
echo "$out" | awk '/^watcher / { w = $3 } /^spin_floor / { f = $3 }
    END { printf "watcher C ABI wake p50 %.3f ms = %.2fx the spinning floor (goal: p50 <= 1 ms)\n", w, w / f }'
