#!/usr/bin/env bash
# sqlite-host.sh old|bundled — builds (once, cached outside the repository)
# a tiny host program linked with a given SQLite, and prints its path:
#   old      SQLite 3.38.2, older than the 3.40.1 the extension needs;
#   bundled  the SQLite that honker's bindings bundle (libsqlite3-sys in
#            Cargo.lock), newer than the system's.
# core/tests/extension.rs loads libhonker_ext into them.
#
# Usage of the program: load-extension DB EXT [SQL]: loads EXT into a
# connection on DB, prints the SQLite version and the loader's result, then
# runs SQL (printing each result row) when the load worked.
#
# stdout: the result. Everything else goes to stderr; fd 3 keeps the real
# stdout for the one line of result (scripts/check-scripts.sh enforces it).
set -euo pipefail
exec 3>&1 1>&2
cd "$(dirname "$0")/.."
cache="${HONKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/honker}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

case "${1:-}" in
old)
    # From the libsqlite3-sys 0.24.2 crate on crates.io, checked by SHA-256.
    out="$cache/sqlite-host-3.38.2"
    if [ ! -x "$out/load-extension" ]; then
        crate="$tmp/libsqlite3-sys.crate"
        curl -sSfL -o "$crate" https://static.crates.io/crates/libsqlite3-sys/libsqlite3-sys-0.24.2.crate
        echo "898745e570c7d0453cc1fbc4a701eb6c662ed54e8fec8b7d14be137ebeeb9d14  $crate" | sha256sum -c --quiet
        tar xzf "$crate" -C "$tmp" libsqlite3-sys-0.24.2/sqlite3/sqlite3.c libsqlite3-sys-0.24.2/sqlite3/sqlite3.h
        src="$tmp/libsqlite3-sys-0.24.2/sqlite3"
    fi
    ;;
bundled)
    # The amalgamation cargo already fetched for the root workspace.
    version="$(awk '/^name = "libsqlite3-sys"/ { getline; gsub(/[^0-9.]/, ""); print }' Cargo.lock)"
    out="$cache/sqlite-host-bundled-$version"
    if [ ! -x "$out/load-extension" ]; then
        cargo fetch --locked -q
        src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"libsqlite3-sys-$version"/sqlite3 | head -n1)"
    fi
    ;;
*)
    echo "usage: $0 old|bundled" >&2
    exit 2
    ;;
esac

if [ ! -x "$out/load-extension" ]; then
    cat > "$tmp/load.c" <<'C'
#include <stdio.h>
#include "sqlite3.h"
static int row(void *unused, int n, char **values, char **names) {
    for (int i = 0; i < n; i++) printf("%s%s", i ? "|" : "", values[i] ? values[i] : "NULL");
    printf("\n");
    return 0;
}
int main(int argc, char **argv) {
    sqlite3 *db;
    char *err = 0;
    if (argc < 3 || sqlite3_open(argv[1], &db) != SQLITE_OK) return 2;
    sqlite3_enable_load_extension(db, 1);
    printf("sqlite %s\n", sqlite3_libversion());
    int rc = sqlite3_load_extension(db, argv[2], 0, &err);
    printf("load rc=%d: %s\n", rc, err ? err : "ok");
    sqlite3_free(err);
    err = 0;
    if (argc > 3 && rc == SQLITE_OK) {
        rc = sqlite3_exec(db, argv[3], row, 0, &err);
        printf("exec rc=%d: %s\n", rc, err ? err : "ok");
    }
    sqlite3_close(db);
    return 0;
}
C
    mkdir -p "$out"
    cc -O1 -w -o "$tmp/load-extension" -I "$src" "$tmp/load.c" "$src/sqlite3.c" -ldl -lpthread -lm
    mv "$tmp/load-extension" "$out/load-extension"
fi
echo "$out/load-extension" >&3
