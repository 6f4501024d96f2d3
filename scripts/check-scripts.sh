#!/usr/bin/env bash
# check-scripts.sh: the rule for scripts whose stdout is their result (a path
# that a caller reads with $(...)): everything else they run goes to stderr.
# A first run on a fresh machine installs packages; apt-get's progress on
# stdout once became part of a "path" and broke CI there only.
#
# 1. Every script that some caller captures with $(bash scripts/X.sh) (or
#    runs from a Rust test and reads as a path) says "# stdout: the result"
#    and starts with `exec 3>&1 1>&2`, printing its result to fd 3 only.
# 2. swift-chroot.sh, run on its install path with stand-ins for apt-get,
#    debootstrap and chroot that all print to stdout, prints exactly its path.
# 3. Nothing of the caller's environment reaches into the Swift chroot (a
#    host TMPDIR does not exist there: ca-certificates' post-install failed on
#    it, on new machines only): every `chroot` call, in the shell scripts and
#    in the Python that runs one, starts its command with `/usr/bin/env -i`,
#    and so does every debootstrap call (its second stage runs in the
#    chroot). Checked in the text, and on the install path with stand-ins
#    that record what they were given.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

captured=$(grep -rhoE '\$\(bash scripts/[a-z0-9-]+\.sh' scripts bench demo tests-interop .ci 2>/dev/null \
    | sed -E 's/.*scripts\///' | sort -u)
captured+=$'\n'$(grep -rhoE 'join\("\.\./scripts/[a-z0-9-]+\.sh' core/tests | sed -E 's/.*scripts\///' | sort -u)
for name in $(echo "$captured" | sort -u); do
    file="scripts/$name"
    [ -f "$file" ] || continue
    if ! grep -q '^# stdout: the result' "$file"; then
        echo "check-scripts: $file is read as a result but lacks '# stdout: the result'" >&2
        fail=1
    fi
    # The redirect must come before any command (only comments, blank lines and `set` before it).
    first=$(grep -vE '^\s*(#|$)|^set ' "$file" | awk 'NR == 1')
    if [ "$first" != 'exec 3>&1 1>&2' ]; then
        echo "check-scripts: $file must start with 'exec 3>&1 1>&2' (found: $first)" >&2
        fail=1
    fi
done

# Every chroot and debootstrap call runs its command under `env -i`.
if ! python3 scripts/check-chroot-env.py; then
    fail=1
fi

# Behaviour: the install path with noisy stand-ins, in a scratch cache.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/cache"
cat >"$tmp/bin/apt-get" <<'SH'
#!/bin/sh
echo "Selecting previously unselected package arch-test."
echo "apt-get noise on stderr" >&2
# Installing debootstrap makes it appear on PATH.
case "$*" in *debootstrap*) printf '#!/bin/sh\necho "I: Retrieving InRelease"\nenv >"%s/debootstrap.env"\nmkdir -p "$3"\n' "$(dirname "$(dirname "$0")")" >"$(dirname "$0")/debootstrap"; chmod +x "$(dirname "$0")/debootstrap" ;; esac
SH
cat >"$tmp/bin/chroot" <<'SH'
#!/bin/sh
echo "Setting up swiftlang ..."
shift
echo "$@" >>"$(dirname "$(dirname "$0")")/chroot.args"
SH
cat >"$tmp/bin/id" <<'SH'
#!/bin/sh
echo 0
SH
chmod +x "$tmp/bin/"*
# A TMPDIR of the caller's that exists only outside (as scripts/test.sh's).
out=$(HONKER_CACHE="$tmp/cache" TMPDIR="$tmp/host-only" HONKER_LEAK=1 PATH="$tmp/bin:/usr/bin:/bin" \
    bash scripts/swift-chroot.sh 2>/dev/null)
if [ "$out" != "$tmp/cache/trixie-swift" ]; then
    echo "check-scripts: swift-chroot.sh printed more than its path on a first run:" >&2
    printf '%s\n' "$out" | awk 'NR <= 5' >&2
    fail=1
fi
if ! grep -qx 'TMPDIR=/tmp' "$tmp/debootstrap.env" 2>/dev/null || grep -q '^HONKER_LEAK=' "$tmp/debootstrap.env"; then
    echo "check-scripts: debootstrap (whose second stage runs in the chroot) got the caller's environment" >&2
    fail=1
fi
if ! grep -q '^/usr/bin/env -i .*TMPDIR=/tmp .*apt-get install' "$tmp/chroot.args" 2>/dev/null; then
    echo "check-scripts: swift-chroot.sh ran apt-get in the chroot without a clean environment:" >&2
    cat "$tmp/chroot.args" >&2 2>/dev/null || true
    fail=1
fi
# deps.sh's honker_target: a checkout without target/ gets a link to the
# cache's directory for its lockfiles; a second key is kept, a third
# removes the oldest; SQLite's headers are read from the key's copy.
repo="$PWD"
checkout="$tmp/checkout"
mkdir -p "$checkout/extension/sqlite3"
cp extension/sqlite3/*.h "$checkout/extension/sqlite3/"
shared_check=$(
    cd "$checkout"
    export HONKER_CACHE="$tmp/target-cache"
    # shellcheck disable=SC1091
    . "$repo/scripts/deps.sh" >/dev/null
    for lock in a b c; do
        echo "$lock" >Cargo.lock
        echo "$lock" >extension/Cargo.lock
        rm -f target
        honker_target
        echo "$(readlink target) $SQLITE3_INCLUDE_DIR"
    done
)
last=$(echo "$shared_check" | tail -n 1)
link=${last%% *}
headers=${last#* }
if [ "$(echo "$shared_check" | sort -u | wc -l)" != 3 ] ||
    [ "$(find "$tmp/target-cache/target" -mindepth 1 -maxdepth 1 | wc -l)" != 2 ] ||
    [ "$(dirname "$link")" != "$tmp/target-cache/target" ] || [ ! -d "$link" ] ||
    [ "$headers" != "$link/sqlite3-headers" ] || ! cmp -s extension/sqlite3/sqlite3.h "$headers/sqlite3.h"; then
    echo "check-scripts: honker_target (scripts/deps.sh) did not link target/ into the cache as it should:" >&2
    echo "$shared_check" >&2
    fail=1
fi

[ "$fail" = 0 ] && echo "check-scripts: scripts whose stdout is a result print only their result; chroot and debootstrap run under env -i; target/ links into the cache"
exit "$fail"
