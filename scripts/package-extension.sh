#!/usr/bin/env bash
# package-extension.sh: the SQL extension as a release download (issue 17
# §4), the way sqlite-vec ships its loadable extension: a tar.gz holding the
# stripped libhonker_ext.so, docs/sql.md, a README on loading it and the
# CHANGELOG, plus its SHA-256 in a sha256sum-format file beside it. Builds
# into target/dist, never into the source tree, from HONKER_EXT_SO: the test
# command passes the glibc 2.17 build (zig), the file a release would ship;
# by default, the native build (target/release/libhonker_ext.so).
# HONKER_EXT_PLATFORM names another platform's build (scripts/release.sh:
# linux-arm64-gnu, darwin-arm64, win32-x64-gnu, ...), already stripped; its
# file keeps its suffix (.so, .dylib, .dll).
# stdout: the result (the archive's path)
set -euo pipefail
exec 3>&1 1>&2
cd "$(dirname "$0")/.."

so=${HONKER_EXT_SO:-target/release/libhonker_ext.so}
[ -f "$so" ] || { echo "package-extension: $so is missing: build the extension first" >&2; exit 1; }
version=$(bash scripts/version.sh)
platform=${HONKER_EXT_PLATFORM:-}
file="libhonker_ext.${so##*.}"
case "$platform" in
    "") name="honker-ext-$version-linux-x64"; what="linux-x64, glibc" ;;
    linux-*-gnu) name="honker-ext-$version-$platform"; what="$platform: Linux, glibc 2.17 or later" ;;
    linux-*-musl) name="honker-ext-$version-$platform"; what="$platform: Linux, musl 1.2 or later" ;;
    darwin-*) name="honker-ext-$version-$platform"; what="$platform: macOS 11 or later" ;;
    win32-*) name="honker-ext-$version-$platform"; what="$platform: Windows 10 or later" ;;
    *) echo "package-extension: unknown platform $platform" >&2; exit 2 ;;
esac
dist=target/dist
stage="$dist/$name"
rm -rf "$stage" "$dist/$name.tar.gz" "$dist/$name.tar.gz.sha256"
mkdir -p "$stage"
# Debug info stays out of what users download (the build keeps it; another
# platform's file comes stripped from scripts/release.sh).
if [ -z "$platform" ]; then
    strip --strip-unneeded -o "$stage/$file" "$so"
else
    cp "$so" "$stage/$file"
fi
cp docs/sql.md "$stage/sql.md"
cp CHANGELOG.md "$stage/CHANGELOG.md"
cat > "$stage/README.txt" <<TXT
honker $version: the SQL extension ($what)

Durable job queues inside your application's own SQLite file, as honker_*
SQL functions for any driver, the sqlite3 shell, ORMs and triggers.
Needs SQLite 3.40.1 or newer. Reference: sql.md.

  sqlite3 app.db
  sqlite> .load ./libhonker_ext
  sqlite> SELECT honker_bootstrap();
  sqlite> SELECT honker_version();

  Python:  conn.enable_load_extension(True); conn.load_extension("./libhonker_ext")
  Node (better-sqlite3):  db.loadExtension("./libhonker_ext")

Check the download: sha256sum -c $name.tar.gz.sha256
TXT
# Reproducible archive: fixed owner, order and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' \
    -C "$dist" -czf "$dist/$name.tar.gz" "$name"
(cd "$dist" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
rm -rf "$stage"
echo "$PWD/$dist/$name.tar.gz" >&3
