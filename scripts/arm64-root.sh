#!/usr/bin/env bash
# arm64-root.sh: a Debian 12 arm64 root holding Debian's python3 (with pip)
# and nodejs, for running the release's linux-arm64-gnu wheel and npm
# package under qemu-user (scripts/qemu-arm64.sh; issue 54). Made once in
# $HONKER_CACHE/arm64-bookworm (~/.cache/honker by default) and reused;
# prints its path on stdout.
#
# No binfmt_misc and no chroot are needed (a container often has neither):
# `debootstrap --foreign` downloads and unpacks the packages without
# running anything of arm64, the packages it only downloads are unpacked
# here with dpkg-deb (no maintainer scripts run: none of these needs one to
# run a program), and the loader's cache is written by arm64's own ldconfig
# under qemu-aarch64-static with -r. Programs then run as
#   qemu-aarch64-static -L ROOT ROOT/usr/bin/python3 ...
# Needs root (debootstrap), debootstrap and qemu-user-static (installed here
# with apt when missing). debootstrap runs under `env -i` as swift-chroot.sh's
# does (an HTTP proxy apt uses passed on), though nothing of its second
# stage runs.
# stdout: the result (the root's path)
set -euo pipefail
exec 3>&1 1>&2
cache="${HONKER_CACHE:-$HOME/.cache/honker}"
root="$cache/arm64-bookworm"
mirror="${HONKER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
proxy=$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | awk 'NR == 1')
clean_env=(HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TMPDIR=/tmp LANG=C.UTF-8)
[ -n "$proxy" ] && clean_env+=("http_proxy=$proxy")
packages=python3,python3-pip,nodejs,ca-certificates
stamp="$root/.honker-ready-$packages"
if [ ! -f "$stamp" ]; then
    need=()
    command -v debootstrap >/dev/null || need+=(debootstrap)
    command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
    fi
    rm -rf "$root"
    mkdir -p "$cache"
    echo "arm64-root: creating a Debian 12 arm64 root in $root from $mirror (once)"
    /usr/bin/env -i "${clean_env[@]}" "$(command -v debootstrap)" --foreign --arch=arm64 --variant=minbase --include="$packages" \
        bookworm "$root" "$mirror"
    for deb in "$root"/var/cache/apt/archives/*.deb; do
        dpkg-deb -x "$deb" "$root"
    done
    rm -f "$root"/var/cache/apt/archives/*.deb
    # usrmerge's links, which the second stage would have made.
    for d in bin sbin lib; do
        [ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"
    done
    qemu-aarch64-static -L "$root" "$root/sbin/ldconfig" -r "$root"
    qemu-aarch64-static -L "$root" "$root/usr/bin/python3" -c 'import platform; assert platform.machine() == "aarch64"'
    qemu-aarch64-static -L "$root" "$root/usr/bin/node" -e 'if (process.arch !== "arm64") process.exit(1)'
    touch "$stamp"
fi
echo "$root" >&3
