#!/usr/bin/env bash
# cold-check.sh: the test command as a new machine runs it. A fresh clone of
# the committed HEAD runs the release tier, `CI=true bash scripts/release.sh
# --tests` (.ci/run's checks, the release's tests, every platform's packages
# and their runs), with every cache the project keeps
# pointed at an empty directory, so that each install path a new
# machine walks really runs: apt (the packages scripts/deps.sh installs),
# debootstrap and apt-get in the Swift chroot, the venvs from PyPI, zig,
# Bun and the npm packages, Honker 0.2.4 built from its sdist, and every
# crate downloaded from crates.io and compiled. Twice a first run on a new
# machine failed where every developer's run passed (round 1's stdout, round
# 2's TMPDIR in the chroot): run this before resolving anything that touches
# scripts/, deps.sh, a cache or an install step, and report its time.
#
#   bash scripts/cold-check.sh [--keep-apt] [--keep]
#
# What is emptied, for the run only (the real caches are left as they are):
#   HONKER_CACHE     venvs, the Swift chroot, Bun, the shared target/
#   XDG_CACHE_HOME   pip's and zig's caches, cargo-zigbuild's
#   npm_config_cache the npm cache
#   CARGO_HOME       the crates.io index and downloaded crates (cargo and
#                    rustc themselves are rustup's proxies, on PATH)
# What a new machine has too, and so is kept: the Rust toolchain under
# RUSTUP_HOME (the image's, from rustup; it cannot be fetched again here).
# What the project adds to that toolchain (the targets of the other
# platforms, the llvm-tools component) is removed first, so that `rustup target add` and
# `rustup component add` run as on a new machine (nightly's rust-src too).
# Debian packages: the ones scripts/deps.sh installs that a new machine's
# image lacks (APT_ADDED below, checked against the image's package list)
# are purged first, so that deps.sh installs them again; --keep-apt skips
# that (apt then finds them present).
#
# Needs root (apt, debootstrap, chroot, as the test command does) and about
# 20 GB of disk (a cold target/ is 13 GB, the chroot 3.5). Prints test.sh's
# step timings and the total; exits with the run's status. The clone and the
# empty caches are removed afterwards (--keep leaves them, and says where);
# a mount left under them fails the check. Not part of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
keep_apt=0
keep=0
for arg in "$@"; do
    case "$arg" in
        --keep-apt) keep_apt=1 ;;
        --keep) keep=1 ;;
        *) echo "usage: bash scripts/cold-check.sh [--keep-apt] [--keep]" >&2; exit 2 ;;
    esac
done
# What scripts/deps.sh and scripts/swift-chroot.sh install with apt that a
# new Debian 12 + Rust machine does not have.
APT_ADDED=(libclang-dev libsqlite3-dev shellcheck debootstrap valgrind gcc-mingw-w64-x86-64 wine64 llvm qemu-user-static musl-tools musl musl-dev)

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "cold-check: the work tree has uncommitted changes; the check runs the committed HEAD only" >&2
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/honker-cold.XXXXXX")
log="${TMPDIR:-/tmp}/honker-cold-$(date +%Y%m%d-%H%M%S).log"
# Mounts under the scratch directory, deepest first.
mounts_under() {
    awk -v d="$scratch" 'index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
unmount_under() {
    local m
    for m in $(mounts_under); do
        umount -l "$m" 2>/dev/null || true
    done
}
cleanup() {
    if [ "$keep" = 1 ]; then
        echo "cold-check: kept $scratch"
    else
        unmount_under
        rm -rf "$scratch"
    fi
}
trap cleanup EXIT

git clone -q "$repo" "$scratch/clone"
echo "cold-check: $(git -C "$scratch/clone" log -1 --format='%h %s' | cut -c1-100)"
caches="$scratch/caches"
mkdir -p "$caches/honker" "$caches/xdg" "$caches/npm" "$caches/cargo"

if [ "$keep_apt" = 0 ]; then
    installed=()
    for p in "${APT_ADDED[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && installed+=("$p")
    done
    if [ "${#installed[@]}" -gt 0 ]; then
        echo "cold-check: removing ${installed[*]} (deps.sh installs them again)"
        DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "${installed[@]}" >/dev/null
    fi
fi
toolchain=$(rustup show active-toolchain | cut -d' ' -f1)
for t in aarch64-apple-ios aarch64-unknown-linux-gnu aarch64-unknown-linux-musl x86_64-unknown-linux-musl \
    x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu; do
    rustup target remove --toolchain "$toolchain" "$t" >/dev/null 2>&1 || true
done
rustup component remove --toolchain "$toolchain" llvm-tools >/dev/null 2>&1 || true
# The XCFramework's build-std source (scripts/xcframework-cross.sh adds it
# to the image's nightly).
rustup component remove --toolchain nightly rust-src >/dev/null 2>&1 || true

echo "cold-check: running scripts/release.sh in $scratch/clone with empty caches; log: $log"
start=$SECONDS
status=0
(
    cd "$scratch/clone"
    env HONKER_CACHE="$caches/honker" XDG_CACHE_HOME="$caches/xdg" \
        npm_config_cache="$caches/npm" PIP_CACHE_DIR="$caches/xdg/pip" \
        CARGO_HOME="$caches/cargo" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
        PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH" CI=true \
        bash scripts/release.sh --tests
) >"$log" 2>&1 || status=$?
took=$((SECONDS - start))

sed -n '/^test.sh: step timings/,$p' "$log"
mounts=$(mounts_under)
if [ -n "$mounts" ]; then
    echo "cold-check: the run left mounts behind:" >&2
    printf '  %s\n' "$mounts" >&2
    [ "$status" = 0 ] && status=1
fi
if [ "$status" = 0 ]; then
    echo "cold-check: passed in $took s (a fresh clone, empty caches)"
else
    echo "cold-check: FAILED (status $status) after $took s; the end of $log:" >&2
    tail -n 40 "$log" >&2
fi
exit "$status"
