#!/usr/bin/env bash
# swift-bindgen.sh [--check]: generates the Swift sources, C header and
# modulemap of bindings-swift from the compiled library with the pinned
# uniffi-bindgen (bindings-swift/uniffi-bindgen). With --check, generates
# into a temporary directory and fails if the committed files differ (the
# test command runs this: generated files never drift from the Rust code).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q -p honker-swift -p uniffi-bindgen
out="bindings-swift/Sources"
gen="$(mktemp -d)"
trap 'rm -rf "$gen"' EXIT
./target/debug/uniffi-bindgen generate --library target/debug/libhonker_swift.so \
    --language swift --no-format --out-dir "$gen" >/dev/null
mkdir -p "$gen/HonkerNative" "$gen/honker_swiftFFI"
mv "$gen/honker_swift.swift" "$gen/HonkerNative/honker_swift.swift"
mv "$gen/honker_swiftFFI.h" "$gen/honker_swiftFFI/honker_swiftFFI.h"
# SwiftPM wants the C module's map named module.modulemap.
mv "$gen/honker_swiftFFI.modulemap" "$gen/honker_swiftFFI/module.modulemap"
if [ "${1:-}" = "--check" ]; then
    for f in HonkerNative/honker_swift.swift honker_swiftFFI/honker_swiftFFI.h honker_swiftFFI/module.modulemap; do
        if ! diff -q "$gen/$f" "$out/$f" >/dev/null 2>&1; then
            echo "swift-bindgen: $out/$f is stale; run scripts/swift-bindgen.sh and commit" >&2
            diff -u "$out/$f" "$gen/$f" | head -40 >&2 || true
            exit 1
        fi
    done
    echo "swift-bindgen: generated Swift sources are up to date"
else
    mkdir -p "$out/HonkerNative" "$out/honker_swiftFFI"
    cp "$gen/HonkerNative/honker_swift.swift" "$out/HonkerNative/"
    cp "$gen/honker_swiftFFI/honker_swiftFFI.h" "$gen/honker_swiftFFI/module.modulemap" "$out/honker_swiftFFI/"
    echo "swift-bindgen: wrote $out/HonkerNative and $out/honker_swiftFFI"
fi
