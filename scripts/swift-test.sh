#!/usr/bin/env bash
# swift-test.sh: builds libhonker_swift, checks the generated Swift sources
# are current, and runs `swift build` and `swift test` for the Swift package
# (bindings-swift) inside the cached Debian 13 chroot (scripts/swift-chroot.sh;
# Debian 12 has no Swift). Prints the XCTest summary.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

bash scripts/swift-bindgen.sh --check
cargo build --release --locked -q -p honker-swift
root="$(bash scripts/swift-chroot.sh)"
work="$root/work/honker-swift"

# The package, fresh sources each time; .build (Swift's cache) is kept.
"${sudo[@]}" mkdir -p "$work/lib"
"${sudo[@]}" rm -rf "$work/Sources" "$work/Tests"
"${sudo[@]}" cp -r bindings-swift/Package.swift bindings-swift/Sources bindings-swift/Tests "$work/"
"${sudo[@]}" cp target/release/libhonker_swift.a "$work/lib/"

# Swift's tools find their libraries through /proc/self/exe.
mounted=0
if ! mountpoint -q "$root/proc"; then
    "${sudo[@]}" mount -t proc proc "$root/proc"
    mounted=1
fi
cleanup() {
    if [ "$mounted" = 1 ]; then "${sudo[@]}" umount "$root/proc" || true; fi
}
trap cleanup EXIT

# HONKER_VERSION: the Cargo workspace's, which the version test compares with.
"${sudo[@]}" chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin TMPDIR=/tmp \
    HONKER_VERSION="$(bash scripts/version.sh)" \
    /bin/sh -c 'cd /work/honker-swift && swift build --build-tests 2>&1 | tail -n 20 && swift test 2>&1'
