#!/usr/bin/env bash
# xcframework-cross.sh OUT: the Swift package's HonkerFFI.xcframework built on
# Linux (scripts/release.sh; issue 54), without Xcode: what
# scripts/apple-xcframework.sh makes on a Mac, the same three slices
#
#   ios-arm64                      aarch64-apple-ios (iOS 16+)
#   ios-arm64_x86_64-simulator     aarch64-apple-ios-sim + x86_64-apple-ios
#   macos-arm64_x86_64             aarch64-apple-darwin + x86_64-apple-darwin (macOS 13+)
#
# as static libraries (nothing is linked: no SDK is needed), combined with
# llvm-lipo, local symbols stripped with llvm-strip, the UniFFI header and
# module map under Headers/honker_swiftFFI/, and the XCFramework's
# Info.plist written here (xcodebuild -create-xcframework writes the same
# keys). Built with nightly's -Zbuild-std from the rust-src component (see
# below). Each thin library is checked
# (scripts/check-binary.py swift: its architecture, minimum OS, no sqlite3_*
# defined: the app's system SQLite is used, ADR 18). Writes
# OUT/HonkerFFI.xcframework and OUT/HonkerFFI.xcframework.zip (+ .sha256:
# SwiftPM's checksum is the zip's SHA-256).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "$1")
lib=libhonker_swift.a
header=bindings-swift/Sources/honker_swiftFFI/honker_swiftFFI.h
modulemap=bindings-swift/Sources/honker_swiftFFI/module.modulemap
work="$out/xcframework-work"
rm -rf "$work" "$out/HonkerFFI.xcframework" "$out/HonkerFFI.xcframework.zip"
mkdir -p "$work"
lipo=llvm-lipo-14
strip=llvm-strip-14
# Every slice from nightly's -Zbuild-std: the simulators' standard library
# cannot be had from rustup here, and stable's prebuilt Apple libraries
# carry LLVM bitcode newer than Debian's LLVM 14 tools read (llvm-lipo).
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
rustup component list --toolchain nightly --installed | grep -q '^rust-src' ||
    rustup component add --toolchain nightly rust-src

# build TARGET: the release static library of honker-swift.
build() {
    local t=$1 toolchain=()
    local args=(rustc --locked --release -p honker-swift --target "$t" --crate-type staticlib
        --target-dir target/apple)
    toolchain=(+nightly)
    args+=("-Zbuild-std=std,panic_abort")
    env CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
        IPHONEOS_DEPLOYMENT_TARGET=16.0 MACOSX_DEPLOYMENT_TARGET=13.0 \
        cargo "${toolchain[@]}" "${args[@]}"
    echo "target/apple/$t/release/$lib"
}

declare -A thin
thin[ios]=$(build aarch64-apple-ios | tail -n 1)
thin[sim-arm64]=$(build aarch64-apple-ios-sim | tail -n 1)
thin[sim-x64]=$(build x86_64-apple-ios | tail -n 1)
thin[mac-arm64]=$(build aarch64-apple-darwin | tail -n 1)
thin[mac-x64]=$(build x86_64-apple-darwin | tail -n 1)
for k in "${!thin[@]}"; do
    case "$k" in
        *x64) platform=apple-x64 ;;
        *) platform=apple-arm64 ;;
    esac
    case "$k" in
        mac-*) minos=13.0 ;;
        *) minos=16.0 ;;
    esac
    echo "  $k: $(HONKER_MINOS="$minos" python3 scripts/check-binary.py "$platform" swift "${thin[$k]}")"
done

fw="$out/HonkerFFI.xcframework"
declare -A slice=(
    [ios-arm64]="${thin[ios]}"
    [ios-arm64_x86_64-simulator]="${thin[sim-arm64]} ${thin[sim-x64]}"
    [macos-arm64_x86_64]="${thin[mac-arm64]} ${thin[mac-x64]}"
)
for id in "${!slice[@]}"; do
    mkdir -p "$fw/$id/Headers/honker_swiftFFI"
    # shellcheck disable=SC2086 # the slice's libraries
    set -- ${slice[$id]}
    if [ $# -eq 1 ]; then
        cp "$1" "$fw/$id/$lib"
    else
        "$lipo" -create "$@" -output "$fw/$id/$lib"
    fi
    "$strip" -S -x "$fw/$id/$lib"
    cp "$header" "$fw/$id/Headers/honker_swiftFFI/"
    cp "$modulemap" "$fw/$id/Headers/honker_swiftFFI/module.modulemap"
done
library() { # ID PLATFORM ARCHS [VARIANT]
    local archs="" a
    for a in $3; do archs+="<string>$a</string>"; done
    printf '\t\t<dict>\n\t\t\t<key>HeadersPath</key>\n\t\t\t<string>Headers</string>\n'
    printf '\t\t\t<key>LibraryIdentifier</key>\n\t\t\t<string>%s</string>\n' "$1"
    printf '\t\t\t<key>LibraryPath</key>\n\t\t\t<string>%s</string>\n' "$lib"
    printf '\t\t\t<key>SupportedArchitectures</key>\n\t\t\t<array>%s</array>\n' "$archs"
    printf '\t\t\t<key>SupportedPlatform</key>\n\t\t\t<string>%s</string>\n' "$2"
    [ -z "${4:-}" ] || printf '\t\t\t<key>SupportedPlatformVariant</key>\n\t\t\t<string>%s</string>\n' "$4"
    printf '\t\t</dict>\n'
}
{
    printf '<?xml version="1.0" encoding="UTF-8"?>\n'
    printf '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
    printf '<plist version="1.0">\n<dict>\n\t<key>AvailableLibraries</key>\n\t<array>\n'
    library ios-arm64 ios arm64
    library ios-arm64_x86_64-simulator ios "arm64 x86_64" simulator
    library macos-arm64_x86_64 macos "arm64 x86_64"
    printf '\t</array>\n\t<key>CFBundlePackageType</key>\n\t<string>XFWK</string>\n'
    printf '\t<key>XCFrameworkFormatVersion</key>\n\t<string>1.0</string>\n</dict>\n</plist>\n'
} > "$fw/Info.plist"
python3 -c 'import plistlib, sys; plistlib.load(open(sys.argv[1], "rb"))' "$fw/Info.plist"
for id in "${!slice[@]}"; do
    # (llvm-lipo reads fat archives only: a thin one crashes it.)
    # shellcheck disable=SC2086 # the slice's libraries
    set -- ${slice[$id]}
    archs=arm64
    [ $# -eq 1 ] || archs=$("$lipo" -archs "$fw/$id/$lib")
    echo "  $id: $archs, $(stat -c %s "$fw/$id/$lib") bytes"
done
# A reproducible zip: sorted names, fixed times.
(cd "$out" && python3 - <<'PY' && sha256sum HonkerFFI.xcframework.zip > HonkerFFI.xcframework.zip.sha256
import os, zipfile
names = sorted(os.path.join(d, f) for d, _, fs in os.walk("HonkerFFI.xcframework") for f in fs)
with zipfile.ZipFile("HonkerFFI.xcframework.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for n in names:
        info = zipfile.ZipInfo(n, (2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, open(n, "rb").read())
PY
)
rm -rf "$work"
echo "xcframework-cross: $out/HonkerFFI.xcframework.zip, SwiftPM checksum $(cut -d' ' -f1 "$out/HonkerFFI.xcframework.zip.sha256")"
