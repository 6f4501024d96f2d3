#!/usr/bin/env bash
# release.sh [--tests] [--skip-runs] [PLATFORM...]: the release tier (DESIGN §15,
# issue 54). Builds every artifact of a release into target/dist/release/,
# for every platform (or the ones named; napi-rs's names):
#
#   linux-x64-gnu linux-arm64-gnu   glibc 2.17+  (zig)
#   linux-x64-musl linux-arm64-musl musl 1.2+    (zig)
#   darwin-x64 darwin-arm64         macOS 11+    (zig's own macOS support)
#   win32-x64-gnu                   Windows 10+  (mingw-w64)
#   swift                           the XCFramework (scripts/xcframework-cross.sh;
#                                   with every platform, or when named)
#
# and per platform: the Python abi3 wheel, the npm platform package (and the
# honker package itself), the SQL extension's archive. Each native library
# is checked (scripts/check-binary.py: format, architecture, C library or
# minimum OS, imports, export), each wheel by its tags and size (≤ 6 MB;
# auditwheel for Linux), each npm package by its unpacked size (≤ 12 MiB,
# scripts/package-node.sh).
# Then what can run here runs (scripts/platform-runs.sh): Linux arm64 under
# qemu-user in a Debian arm64 root (the wheel and the packages installed
# from their files, the README examples, Python → Node → SQL on one file,
# a named subset of each binding's tests); core's Rust tests built for
# musl, natively; Windows: Node's README example under Wine with Windows's
# node.exe. macOS is built only (no Apple SDK or machine here).
#
# target/dist/release/SHA256SUMS and manifest.json (platform, file, size,
# sha256, what was checked or run on it) describe the release. A maintainer
# makes one with this script alone; --tests first runs the whole release
# tier of tests (scripts/test.sh --release: everything .ci/run runs, plus
# the sdist built from source and the full crash/error-point sweep), as
# scripts/cold-check.sh does. --skip-runs builds and checks without the
# qemu/Wine runs.
#
# Needs: what scripts/deps.sh installs, plus (installed here when missing)
# mingw-w64, LLVM's tools, qemu-user-static, debootstrap and Wine, and
# rustup's standard library for each target.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

all=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl darwin-x64 darwin-arm64 win32-x64-gnu)
tests=0
runs=1
platforms=()
for arg in "$@"; do
    case "$arg" in
        --tests) tests=1 ;;
        --skip-runs) runs=0 ;;
        -*) echo "usage: bash scripts/release.sh [--tests] [--skip-runs] [PLATFORM...]" >&2; exit 2 ;;
        *) platforms+=("$arg") ;;
    esac
done
# The XCFramework comes with a whole release (or when "swift" is named).
xcframework=0
if [ ${#platforms[@]} -eq 0 ]; then
    platforms=("${all[@]}")
    xcframework=1
fi
for i in "${!platforms[@]}"; do
    if [ "${platforms[$i]}" = swift ]; then
        xcframework=1
        unset 'platforms[i]'
    fi
done
platforms=("${platforms[@]}")

start=$SECONDS
if [ "$tests" = 1 ]; then
    bash scripts/test.sh --release
fi

# shellcheck source=scripts/deps.sh
. scripts/deps.sh
honker_tools
honker_target
honker_python_venv
honker_apt gcc-mingw-w64-x86-64 llvm qemu-user-static debootstrap wine64 binfmt-support musl-tools
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

triple() {
    case "$1" in
        linux-x64-gnu) echo x86_64-unknown-linux-gnu ;;
        linux-arm64-gnu) echo aarch64-unknown-linux-gnu ;;
        linux-x64-musl) echo x86_64-unknown-linux-musl ;;
        linux-arm64-musl) echo aarch64-unknown-linux-musl ;;
        darwin-x64) echo x86_64-apple-darwin ;;
        darwin-arm64) echo aarch64-apple-darwin ;;
        win32-x64-gnu) echo x86_64-pc-windows-gnu ;;
        *) echo "release: unknown platform $1 (one of ${all[*]})" >&2; exit 2 ;;
    esac
}
# musl_arch PLATFORM: the architecture in musl's C library's name.
musl_arch() {
    case "$1" in
        linux-x64-musl) echo x86_64 ;;
        linux-arm64-musl) echo aarch64 ;;
    esac
}
suffix() {
    case "$1" in
        darwin-*) echo dylib ;;
        win32-*) echo dll ;;
        *) echo so ;;
    esac
}
installed=$(rustup target list --installed)
for p in "${platforms[@]}"; do
    t=$(triple "$p")
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

dist="$root/target/dist/release"
rm -rf "$dist"
mkdir -p "$dist/python" "$dist/npm" "$dist/extension" "$dist/swift"
version=$(bash scripts/version.sh)
notes="$dist/.notes"
mkdir -p "$notes"
# note FILE TEXT: what was checked or run on FILE, for the manifest.
note() {
    printf '%s\n' "$2" >> "$notes/$(basename "$1").txt"
}

step() { printf '\n==> %s (%ds)\n' "$*" $((SECONDS - start)); }

for p in "${platforms[@]}"; do
    t=$(triple "$p")
    s=$(suffix "$p")
    built="target/node/$p"

    step "$p: the Node addon and the SQL extension"
    node bindings-node/scripts/build.js --target "$p"
    case "$p" in
        linux-*-musl) python3 scripts/musl-soname.py "$(musl_arch "$p")" "$built/honker.node" "$built/libhonker_ext.$s" ;;
    esac
    addon_check=$(python3 scripts/check-binary.py "$p" addon "$built/honker.node")
    ext_check=$(python3 scripts/check-binary.py "$p" extension "$built/libhonker_ext.$s")
    echo "  addon: $addon_check"
    echo "  extension: $ext_check"

    step "$p: the SQL extension's archive"
    archive=$(HONKER_EXT_PLATFORM="$p" HONKER_EXT_SO="$built/libhonker_ext.$s" bash scripts/package-extension.sh)
    mv "$archive" "$archive.sha256" "$dist/extension/"
    note "$archive" "$ext_check"

    step "$p: the Python wheel"
    maturin_args=(build --release --target "$t" -m "$root/bindings-python/Cargo.toml" -o "$dist/python")
    env=(HONKER_EXT="$root/$built/libhonker_ext")
    # As build.js builds another platform's addon: whole-program optimized.
    [ "$p" = linux-x64-gnu ] ||
        env+=(CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_DEBUG=0)
    case "$p" in
        linux-*-gnu) maturin_args+=(--zig --compatibility manylinux_2_17) ;;
        linux-*-musl)
            maturin_args+=(--zig --compatibility musllinux_1_2)
            env+=("CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$t")_RUSTFLAGS=-C target-feature=-crt-static")
            ;;
        darwin-*) maturin_args+=(--zig); env+=(MACOSX_DEPLOYMENT_TARGET=11.0) ;;
        win32-*) ;;
    esac
    before=$(ls "$dist/python")
    # In the build directory: zig leaves an empty object file where it runs.
    mkdir -p target/cross
    (cd target/cross && env "${env[@]}" "$HONKER_VENV/bin/maturin" "${maturin_args[@]}")
    wheel="$dist/python/$(comm -13 <(echo "$before") <(ls "$dist/python") | grep '\.whl$')"
    case "$p" in
        linux-*-musl) python3 scripts/musl-soname.py "$(musl_arch "$p")" "$wheel" ;;
    esac
    python3 - "$wheel" "$p" <<'PY'
import sys, zipfile
wheel, platform = sys.argv[1:]
name = wheel.rsplit("/", 1)[-1]
tags = name[:-4].split("-")[2:]
want = {
    "linux-x64-gnu": "manylinux_2_17_x86_64", "linux-arm64-gnu": "manylinux_2_17_aarch64",
    "linux-x64-musl": "musllinux_1_2_x86_64", "linux-arm64-musl": "musllinux_1_2_aarch64",
    "darwin-x64": "macosx_", "darwin-arm64": "macosx_", "win32-x64-gnu": "win_amd64",
}[platform]
assert tags[0] == "cp39" and tags[1] == "abi3", f"{name}: not an abi3 wheel for CPython >= 3.9"
assert want in tags[2], f"{name}: platform tag {tags[2]}, wanted {want}"
if platform.startswith("darwin"):
    arch = "x86_64" if platform.endswith("x64") else "arm64"
    assert tags[2].endswith(arch), f"{name}: {tags[2]} is not {arch}"
size = sum(i.file_size for i in zipfile.ZipFile(wheel).infolist())
names = zipfile.ZipFile(wheel).namelist()
ext = {"darwin": "dylib", "win32": "dll"}.get(platform.split("-")[0], "so")
assert f"honker/libhonker_ext.{ext}" in names, f"{name}: no honker/libhonker_ext.{ext}"
import os
assert os.path.getsize(wheel) <= 6 * 1024 * 1024, f"{name}: over 6 MB"
print(f"  wheel: {name}, {os.path.getsize(wheel)} bytes, tags {'-'.join(tags)}")
PY
    unpacked="$notes/wheel-$p"
    rm -rf "$unpacked"
    "$HONKER_VENV/bin/python" -m zipfile -e "$wheel" "$unpacked"
    module=$(find "$unpacked/honker" -name '_native.*' | head -n 1)
    py_check=$(python3 scripts/check-binary.py "$p" python "$module")
    echo "  module: $py_check"
    note "$wheel" "abi3 tags; honker/_native: $py_check; honker/libhonker_ext.$s: $ext_check"
    case "$p" in
        linux-*)
            # An empty library path: auditwheel resolves no library of this
            # machine's (glibc's libc.so, a linker script, for a musl wheel).
            mkdir -p "$notes/no-libraries"
            auditwheel show --ldpaths "$notes/no-libraries" "$wheel" > "$notes/auditwheel-$p.txt" 2>&1
            case "$p" in
                linux-x64-gnu) tag=manylinux_2_17_x86_64 ;;
                linux-arm64-gnu) tag=manylinux_2_17_aarch64 ;;
                linux-x64-musl) tag=musllinux_1_2_x86_64 ;;
                linux-arm64-musl) tag=musllinux_1_2_aarch64 ;;
            esac
            grep -q "\"$tag\"" "$notes/auditwheel-$p.txt" || {
                cat "$notes/auditwheel-$p.txt" >&2
                echo "release: auditwheel does not find $(basename "$wheel") $tag" >&2
                exit 1
            }
            note "$wheel" "auditwheel: consistent with $tag"
            ;;
    esac
    rm -rf "$unpacked"
done

if [ "$xcframework" = 1 ]; then
    step "Swift: the XCFramework (iOS, iOS simulator and macOS slices, static libraries)"
    mkdir -p "$dist/swift"
    bash scripts/xcframework-cross.sh "$dist/swift" | tee "$notes/xcframework.txt"
    for f in "$dist"/swift/*.zip; do
        grep -E '^  ' "$notes/xcframework.txt" | sed 's/^  //' >> "$notes/$(basename "$f").txt"
    done
fi

step "npm packages"
mapfile -t tarballs < <(bash scripts/package-node.sh "${platforms[@]}")
cp "${tarballs[@]}" "$dist/npm/"
# package-node.sh refused any tarball over 12 MiB unpacked.
for tgz in "$dist"/npm/*.tgz; do
    case "$(basename "$tgz")" in
        honker-[0-9]*) note "$tgz" "the JavaScript package: no binary" ;;
        *)
            p=$(basename "$tgz" | sed -E "s/^honker-(.*)-$version\.tgz$/\1/")
            note "$tgz" "addon: $(python3 scripts/check-binary.py "$p" addon "target/node/$p/honker.node")"
            ;;
    esac
done

if [ "$runs" = 1 ]; then
    step "what runs here: arm64 under qemu, musl natively, Windows under Wine"
    bash scripts/platform-runs.sh "$dist" "$notes" "${platforms[@]}"
fi

step "checksums and manifest"
(cd "$dist" && find python npm extension swift -maxdepth 1 -type f ! -name '*.sha256' | sort | xargs sha256sum > SHA256SUMS)
python3 - "$dist" "$notes" "$version" <<'PY'
import hashlib, json, os, re, sys
dist, notes, version = sys.argv[1:]
platforms = ["linux-x64-gnu", "linux-arm64-gnu", "linux-x64-musl", "linux-arm64-musl",
             "darwin-x64", "darwin-arm64", "win32-x64-gnu"]
wheel_platform = {
    "manylinux_2_17_x86_64": "linux-x64-gnu", "manylinux_2_17_aarch64": "linux-arm64-gnu",
    "musllinux_1_2_x86_64": "linux-x64-musl", "musllinux_1_2_aarch64": "linux-arm64-musl",
    "win_amd64": "win32-x64-gnu",
}
def platform_of(kind, name):
    if kind == "python":
        tag = name[:-4].split("-")[-1]
        if tag.startswith("macosx"):
            return "darwin-x64" if tag.endswith("x86_64") else "darwin-arm64"
        # manylinux's compound tag (manylinux2014_x86_64.manylinux_2_17_x86_64) names it last.
        return wheel_platform.get(tag.split(".")[-1], tag)
    if kind == "swift":
        return "ios, ios-simulator, macos"
    for p in platforms:
        if f"-{p}-" in name or f"-{p}." in name:
            return p
    return "any"
files = []
for kind in ("python", "npm", "extension", "swift"):
    for name in sorted(os.listdir(os.path.join(dist, kind))):
        if name.endswith(".sha256"):
            continue
        path = os.path.join(dist, kind, name)
        if not os.path.isfile(path):
            continue  # the XCFramework's folder: its zip is the artifact
        note = os.path.join(notes, name + ".txt")
        checks = open(note).read().splitlines() if os.path.exists(note) else []
        files.append({
            "platform": platform_of(kind, name), "kind": kind, "file": f"{kind}/{name}",
            "size": os.path.getsize(path),
            "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
            "checked": checks,
        })
runs = os.path.join(notes, "runs.json")
manifest = {"version": version, "files": files,
            "runs": json.load(open(runs)) if os.path.exists(runs) else []}
json.dump(manifest, open(os.path.join(dist, "manifest.json"), "w"), indent=2)
print(f"  {len(files)} files; {dist}/manifest.json, {dist}/SHA256SUMS")
PY
rm -rf "$notes"
echo "release: done in $((SECONDS - start)) s"
