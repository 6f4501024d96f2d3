#!/usr/bin/env bash
# swift-chroot.sh: prints the path of a Debian 13 (trixie) chroot with Swift
# 6 (Debian's `swiftlang`), creating it first if needed (DESIGN §11: Debian 12
# ships no Swift compiler). Cached outside the repository, under
# $HONKER_CACHE (~/.cache/honker); about 3 GB and a few minutes the first
# time. Needs root (or sudo) for debootstrap and chroot.
#
# The Debian mirror (and an apt proxy, if one is set) is the host's own, read
# from its apt configuration, so the chroot follows the machine's setup.
# Nothing of the caller's environment reaches into the chroot: debootstrap
# and apt-get there run under `env -i` with only what they need (a TMPDIR of
# the host's, say, does not exist inside; scripts/check-scripts.sh checks
# every chroot call for it). The chroot is marked ready only once whole.
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

# The host's Debian mirror: the first deb source of Debian's main archive
# (not -security, -updates or another vendor's), in one-line or deb822 form.
# HONKER_DEBIAN_MIRROR overrides it; deb.debian.org if the host has none.
host_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk '
            function debian(uri, suites) {
                return uri ~ /\/debian\/?$/ && suites !~ /^[^ ]*-(security|updates|backports)( |$)/
            }
            FILENAME ~ /\.sources$/ {
                if ($0 ~ /^[[:space:]]*$/) { check(); next }
                if ($1 == "Types:") types = $0
                if ($1 == "URIs:") uris = $2
                if ($1 == "Suites:") { suites = $0; sub(/^Suites:[[:space:]]*/, "", suites) }
                if ($1 == "Enabled:") enabled = $2
                next
            }
            function check() {
                if (!found && types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && enabled != "no" && debian(uris, suites)) { print uris; found = 1; exit }
                types = uris = suites = enabled = ""
            }
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if (debian($i, $(i + 1))) { print $i; found = 1; exit }
            }
            END { if (FILENAME ~ /\.sources$/) check() }
        ' "$f"
    done | awk 'NR == 1'
}
mirror="${HONKER_DEBIAN_MIRROR:-$(host_mirror)}"
mirror="${mirror:-http://deb.debian.org/debian}"
# An HTTP proxy apt is configured with, for debootstrap and the chroot's apt.
proxy=$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | awk 'NR == 1')
proxy_env=()
[ -n "$proxy" ] && proxy_env=("http_proxy=$proxy")

# What runs in the chroot, and debootstrap (whose second stage runs there),
# get this environment and nothing else: `/usr/bin/env -i "${clean_env[@]}"`.
clean_env=(HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TMPDIR=/tmp LANG=C.UTF-8
    DEBIAN_FRONTEND=noninteractive "${proxy_env[@]}")

if [ ! -f "$root/.honker-ready" ]; then
    command -v debootstrap >/dev/null || {
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq debootstrap
    }
    debootstrap=$(command -v debootstrap)
    "${sudo[@]}" rm -rf "$root"
    mkdir -p "$cache"
    echo "swift-chroot: creating a Debian 13 chroot with Swift in $root from $mirror (once)"
    "${sudo[@]}" /usr/bin/env -i "${clean_env[@]}" "$debootstrap" --variant=minbase trixie "$root" "$mirror"
    if [ -n "$proxy" ]; then
        echo "Acquire::http::Proxy \"$proxy\";" | "${sudo[@]}" tee "$root/etc/apt/apt.conf.d/01honker-proxy" >/dev/null
    fi
    "${sudo[@]}" chroot "$root" /usr/bin/env -i "${clean_env[@]}" \
        apt-get install -y -qq --no-install-recommends swiftlang libc6-dev libstdc++-14-dev \
        libsqlite3-dev ca-certificates
    "${sudo[@]}" touch "$root/.honker-ready"
fi
echo "$root" >&3
