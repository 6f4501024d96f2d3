#!/usr/bin/env bash
# swift-chroot.sh: prints the path of a Debian 13 (trixie) chroot with Swift
# 6 (Debian's `swiftlang`), creating it first if needed (DESIGN §11: Debian 12
# ships no Swift compiler). Cached outside the repository, under
# $HONKER_CACHE (~/.cache/honker); about 3 GB and a few minutes the first
# time. Needs root (or sudo) for debootstrap and chroot.
#
# stdout: the result. Callers read stdout as the path, so everything else
# (apt-get, debootstrap, progress) goes to stderr: fd 3 keeps the real stdout
# for the one line of result (scripts/check-scripts.sh enforces the rule).
set -euo pipefail
exec 3>&1 1>&2
cache="${HONKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/honker}"
root="$cache/trixie-swift"
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
if [ ! -f "$root/.honker-ready" ]; then
    command -v debootstrap >/dev/null || {
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq debootstrap
    }
    "${sudo[@]}" rm -rf "$root"
    mkdir -p "$cache"
    echo "swift-chroot: creating a Debian 13 chroot with Swift in $root (once)"
    "${sudo[@]}" debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
    "${sudo[@]}" chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends swiftlang libc6-dev libstdc++-14-dev \
        libsqlite3-dev ca-certificates
    "${sudo[@]}" touch "$root/.honker-ready"
fi
echo "$root" >&3
