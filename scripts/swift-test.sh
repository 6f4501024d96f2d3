#!/usr/bin/env bash
# swift-test.sh: builds libhonker_swift, checks the generated Swift sources
# are current, and runs `swift build` and `swift test` for the Swift package
# (bindings-swift; Swift 6 language mode, warnings are errors) inside the
# cached Debian 13 chroot (scripts/swift-chroot.sh;
# Debian 12 has no Swift). Prints the XCTest summary.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

bash scripts/swift-bindgen.sh --check
# docs/swift.md's examples, compiled below as part of the tests.
python3 scripts/swift-docs-examples.py --check
# The repository root's manifest (apps add the package by Git URL) takes
# the same release XCFramework as bindings-swift's.
if [ "$(grep '^let release' Package.swift)" != "$(grep '^let release' bindings-swift/Package.swift)" ]; then
    echo "swift-test: Package.swift and bindings-swift/Package.swift differ in their release constant" >&2
    exit 1
fi
cargo build --release --locked -q -p honker-swift
# One SQLite library in an app's process (ADR 18): the library is built on
# the system SQLite and must define none of SQLite's symbols itself (a
# bundled copy exported 284, which an app's GRDB or Core Data calls could
# bind to), while it does call them.
defined=$(nm -g --defined-only target/release/libhonker_swift.a 2>/dev/null | grep -c ' [TDRB] sqlite3_' || true)
used=$(nm -g --undefined-only target/release/libhonker_swift.a 2>/dev/null | grep -c ' U sqlite3_' || true)
if [ "$defined" -ne 0 ] || [ "$used" -eq 0 ]; then
    echo "swift-test: libhonker_swift.a defines $defined sqlite3_* symbols (want 0) and uses $used (want > 0)" >&2
    exit 1
fi
echo "swift-test: libhonker_swift.a defines no sqlite3_* symbol and calls the system SQLite's"
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
# The tests' files (a directory per test database) go to a temp dir of this
# run's own, removed afterwards: the chroot is a cache that outlives the run.
scratch=/tmp/honker-swift-test
"${sudo[@]}" rm -rf "$root$scratch"
"${sudo[@]}" mkdir -p "$root$scratch"
cleanup() {
    "${sudo[@]}" rm -rf "$root$scratch"
    if [ "$mounted" = 1 ]; then "${sudo[@]}" umount "$root/proc" || true; fi
}
trap cleanup EXIT

# HONKER_VERSION: the Cargo workspace's, which the version test compares with.
"${sudo[@]}" chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin TMPDIR="$scratch" \
    HONKER_VERSION="$(bash scripts/version.sh)" \
    /bin/sh -c 'cd /work/honker-swift &&
        if ! swift build --build-tests -Xswiftc -warnings-as-errors >/tmp/swift-build.log 2>&1; then
            tail -n 60 /tmp/swift-build.log; echo "swift-test: swift build failed"; exit 1
        fi &&
        tail -n 3 /tmp/swift-build.log && swift test 2>&1'

# An app that depends on the repository root (as "add the package by Git
# URL" resolves it): SwiftPM loads both manifests and the package graph,
# which fails on a target path that does not exist (a check of the paths,
# without compiling the package a second time).
app="$root/work/honker-app"
repo="$root/work/honker-repo"
"${sudo[@]}" rm -rf "$app" "$repo"
"${sudo[@]}" mkdir -p "$repo/bindings-swift/lib" "$app/Sources/App"
"${sudo[@]}" cp Package.swift "$repo/"
"${sudo[@]}" cp -r bindings-swift/Sources "$repo/bindings-swift/"
"${sudo[@]}" tee "$app/Package.swift" >/dev/null <<'MANIFEST'
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "App",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [.package(name: "Honker", path: "../honker-repo")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "Honker", package: "Honker")])]
)
MANIFEST
"${sudo[@]}" tee "$app/Sources/App/main.swift" >/dev/null <<'APP'
import Honker
print(Honker.honkerVersion)
APP
# shellcheck disable=SC2016
described=$("${sudo[@]}" chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin TMPDIR="$scratch" \
    /bin/sh -c 'cd /work/honker-repo && swift package describe --type json >/tmp/root.json &&
        cd /work/honker-app && swift package show-dependencies --format json' 2>&1) || {
    printf '%s\n' "$described" >&2
    echo "swift-test: the repository root's Package.swift does not resolve" >&2
    exit 1
}
"${sudo[@]}" rm -rf "$app" "$repo"
echo "swift-test: an app depending on the repository root resolves its Package.swift (Honker product, bindings-swift/ paths)"
