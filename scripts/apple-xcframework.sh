#!/usr/bin/env bash
# apple-xcframework.sh [--dry-run] [--out DIR] [--url URL]
#
# Builds libhonker_swift for iOS, the iOS simulator and macOS and bundles it
# as bindings-swift/build/HonkerFFI.xcframework (and a .zip with its SwiftPM
# checksum), the binary target that Package.swift (the repository root's, for
# apps that add the package by Git URL) and bindings-swift/Package.swift use
# on Apple platforms.
# Follows Apple's "Creating a multiplatform binary framework bundle":
#
# - one static library per platform variant: device arm64; simulator arm64 +
#   x86_64 and macOS arm64 + x86_64, each pair merged with lipo;
# - stripped: built without debug info (the workspace's release profile keeps
#   it) and with local symbols stripped (strip -S -x), where an unstripped
#   library was 71 MB;
# - on the system SQLite: the library defines no sqlite3_* symbol (checked
#   with nm on each slice) and the app links /usr/lib/libsqlite3 (ADR 18);
# - headers namespaced: each slice's Headers/honker_swiftFFI/ holds the
#   UniFFI header and its module map, so that another XCFramework's
#   module.modulemap in the same app never collides with it;
# - the privacy manifest (PrivacyInfo.xcprivacy) ships in the Honker target's
#   resource bundle, which is how Apple asks static libraries to carry one.
#
# Needs macOS with Xcode (xcodebuild, lipo, strip, swift) and rustup. On any
# other machine, or with --dry-run, it prints the commands it would run and
# checks what it can (the inputs exist, the targets are known to rustup).
# This repository's CI runs it only that way (shellcheck and a dry run):
# Apple builds are not run here.
#
# With --url, it also prints the binaryTarget line for Package.swift's
# `release` constant: the zip's URL and checksum (docs/swift.md, "Shipping").
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0
out="bindings-swift/build"
url=""
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=1 ;;
        --out) out="$2"; shift ;;
        --url) url="$2"; shift ;;
        *) echo "apple-xcframework: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$(uname -s)" != Darwin ] || ! command -v xcodebuild >/dev/null 2>&1; then
    [ "$dry" = 1 ] || echo "apple-xcframework: not on macOS with Xcode: a dry run (commands printed, not run)" >&2
    dry=1
fi

run() {
    if [ "$dry" = 1 ]; then
        printf '+'
        printf ' %q' "$@"
        printf '\n'
    else
        "$@"
    fi
}

device=aarch64-apple-ios
simulator=(aarch64-apple-ios-sim x86_64-apple-ios)
macos=(aarch64-apple-darwin x86_64-apple-darwin)
targets=("$device" "${simulator[@]}" "${macos[@]}")
header=bindings-swift/Sources/honker_swiftFFI/honker_swiftFFI.h
modulemap=bindings-swift/Sources/honker_swiftFFI/module.modulemap
manifest=bindings-swift/Sources/Honker/PrivacyInfo.xcprivacy
for f in "$header" "$modulemap" "$manifest"; do
    [ -f "$f" ] || { echo "apple-xcframework: $f is missing" >&2; exit 1; }
done
known=$(rustup target list 2>/dev/null || true)
for t in "${targets[@]}"; do
    if [ -n "$known" ] && ! grep -q "^$t" <<<"$known"; then
        echo "apple-xcframework: rustup does not know the target $t" >&2
        exit 1
    fi
done

lib=libhonker_swift.a
work="$out/xcframework-work"
run rm -rf "$work" "$out/HonkerFFI.xcframework" "$out/HonkerFFI.xcframework.zip"
run rustup target add "${targets[@]}"
# The system SQLite (no `bundled`: honker-swift's own dependency says so),
# no debug info, one codegen unit for a smaller library. iOS 16 and macOS 13
# are Package.swift's minimums.
for t in "${targets[@]}"; do
    run env CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
        IPHONEOS_DEPLOYMENT_TARGET=16.0 MACOSX_DEPLOYMENT_TARGET=13.0 \
        cargo build --locked --release -p honker-swift --target "$t"
done

# One library per platform variant; local symbols stripped.
slices=(ios ios-simulator macos)
run mkdir -p "$work/ios" "$work/ios-simulator" "$work/macos"
run cp "target/$device/release/$lib" "$work/ios/$lib"
run lipo -create "target/${simulator[0]}/release/$lib" "target/${simulator[1]}/release/$lib" \
    -output "$work/ios-simulator/$lib"
run lipo -create "target/${macos[0]}/release/$lib" "target/${macos[1]}/release/$lib" \
    -output "$work/macos/$lib"
for s in "${slices[@]}"; do
    run strip -S -x "$work/$s/$lib"
    if [ "$dry" = 0 ]; then
        defined=$(nm -g --defined-only "$work/$s/$lib" 2>/dev/null | grep -c ' [TDRB] _sqlite3_' || true)
        if [ "$defined" -ne 0 ]; then
            echo "apple-xcframework: $s defines $defined sqlite3_* symbols; honker must use the system SQLite" >&2
            exit 1
        fi
    fi
done

# Headers namespaced under the module's own directory.
run mkdir -p "$work/headers/honker_swiftFFI"
run cp "$header" "$work/headers/honker_swiftFFI/"
run cp "$modulemap" "$work/headers/honker_swiftFFI/module.modulemap"
run xcodebuild -create-xcframework \
    -library "$work/ios/$lib" -headers "$work/headers" \
    -library "$work/ios-simulator/$lib" -headers "$work/headers" \
    -library "$work/macos/$lib" -headers "$work/headers" \
    -output "$out/HonkerFFI.xcframework"
run ditto -c -k --sequesterRsrc --keepParent "$out/HonkerFFI.xcframework" "$out/HonkerFFI.xcframework.zip"
if [ "$dry" = 0 ]; then
    checksum=$(swift package compute-checksum "$out/HonkerFFI.xcframework.zip")
    echo "apple-xcframework: $out/HonkerFFI.xcframework.zip, checksum $checksum"
    if [ -n "$url" ]; then
        echo "Package.swift and bindings-swift/Package.swift: let release: (url: String, checksum: String)? = (\"$url\", \"$checksum\")"
    fi
else
    echo "apple-xcframework: dry run done ($((${#targets[@]})) targets, ${#slices[@]} slices)"
fi
