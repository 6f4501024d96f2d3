#!/usr/bin/env bash
# wine.sh PROGRAM.exe [ARGS...]: runs a Windows x86_64 program under Debian's
# Wine (wine64), in a Wine prefix of the project's own cache
# ($HONKER_CACHE/wine), made on first use. Wine 8 (Debian 12's) lacks
# bcryptprimitives.dll, where Rust's standard library takes its random
# bytes from: a stand-in built from scripts/wine/bcryptprimitives.c with
# mingw-w64 goes in the prefix's system32 (never shipped). Quiet: Wine's own
# messages are off unless WINEDEBUG is set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${HONKER_CACHE:-$HOME/.cache/honker}"
export WINEPREFIX="${WINEPREFIX:-$cache/wine}"
export WINEDEBUG="${WINEDEBUG:--all}"
wine=/usr/lib/wine/wine64
[ -x "$wine" ] || wine="$(command -v wine64 || command -v wine)"
stamp="$WINEPREFIX/.honker-shim-$(sha256sum "$here/wine/bcryptprimitives.c" "$here/wine/bcryptprimitives.def" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    mkdir -p "$WINEPREFIX"
    "$wine" wineboot -i >/dev/null 2>&1 || true
    sys32="$WINEPREFIX/drive_c/windows/system32"
    [ -d "$sys32" ] || { echo "wine.sh: wineboot made no $sys32" >&2; exit 1; }
    x86_64-w64-mingw32-gcc -O2 -shared -o "$sys32/bcryptprimitives.dll" \
        "$here/wine/bcryptprimitives.c" "$here/wine/bcryptprimitives.def" -ladvapi32
    rm -f "$WINEPREFIX"/.honker-shim-*
    touch "$stamp"
fi
# A wineserver that outlives its last client by a minute: left to itself it
# exits 3 s after one, and a program that connects while it exits dies with
# "wine client error: recvmsg: Connection reset by peer" before it runs (core's
# test binaries, run one after another, met it twice on a loaded machine). If
# a server already runs for the prefix, this one leaves at once.
wineserver=/usr/lib/wine/wineserver64
[ -x "$wineserver" ] || wineserver="$(command -v wineserver64 || command -v wineserver)"
"$wineserver" -p60 >/dev/null 2>&1 || true
# Even so a client has lost its server before its program ran ("wine
# client error:0: recvmsg: Connection reset by peer", nothing else printed;
# a fresh clone's run of core's tests met it once more). That program never
# ran: it runs once more, and says so. Its output is passed on when it ends.
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
for attempt in 1 2; do
    status=0
    "$wine" "$@" >"$out" 2>"$err" || status=$?
    if [ "$attempt" = 1 ] && [ "$status" != 0 ] && [ ! -s "$out" ] &&
        grep -q '^wine client error:.*recvmsg: Connection reset by peer' "$err" &&
        [ "$(grep -cv '^wine client error:' "$err")" = 0 ]; then
        echo "wine.sh: Wine's client lost its server before $(basename "$1") ran; running it once more" >&2
        "$wineserver" -p60 >/dev/null 2>&1 || true
        continue
    fi
    break
done
cat "$out"
cat "$err" >&2
exit "$status"
