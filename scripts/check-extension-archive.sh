#!/usr/bin/env bash
# check-extension-archive.sh ARCHIVE: what a user of the download does (issue
# 17 §4): verify the checksum, unpack, load the file into Debian's sqlite3
# shell and into /usr/bin/python3's stdlib sqlite3, and get the version back;
# the file carries no debug info.
set -euo pipefail
archive=$1
version=$(bash "$(dirname "$0")/version.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$archive" "$archive.sha256" "$work/"
cd "$work"
sha256sum -c --quiet "$(basename "$archive").sha256"
tar -xzf "$(basename "$archive")"
dir="$work/$(basename "$archive" .tar.gz)"
for f in libhonker_ext.so sql.md README.txt CHANGELOG.md; do
    [ -f "$dir/$f" ] || { echo "check-extension-archive: $f is missing" >&2; exit 1; }
done
sections=$(readelf -S "$dir/libhonker_ext.so")
if grep -q '\.debug_' <<<"$sections"; then
    echo "check-extension-archive: libhonker_ext.so carries debug info" >&2
    exit 1
fi
# Honker's watcher C ABI, which Honker's Go, Bun, .NET and C++ clients look up.
exported=$(nm -D --defined-only "$dir/libhonker_ext.so" | awk '$2 == "T" { print $3 }' | sort | tr '\n' ' ')
want="honker_watcher_close honker_watcher_open honker_watcher_open_v2 honker_watcher_wait sqlite3_honkerext_init "
[ "$exported" = "$want" ] || { echo "check-extension-archive: exports '$exported', not '$want'" >&2; exit 1; }
shell=$(sqlite3 "$work/app.db" ".load $dir/libhonker_ext" "SELECT honker_version();" "SELECT honker_bootstrap() > 0;" \
    "SELECT honker_enqueue('q', '{\"n\":1}', NULL, NULL, 0, 3, NULL);" | tr '\n' ' ')
[ "$shell" = "$version 1 1 " ] || { echo "check-extension-archive: the sqlite3 shell printed '$shell'" >&2; exit 1; }
py=$(/usr/bin/python3 -c '
import sqlite3, sys
c = sqlite3.connect(sys.argv[2])
c.enable_load_extension(True)
c.load_extension(sys.argv[1])
print(c.execute("SELECT honker_version()").fetchone()[0], c.execute("SELECT count(*) FROM _honker_jobs").fetchone()[0])
' "$dir/libhonker_ext" "$work/app.db")
[ "$py" = "$version 1" ] || { echo "check-extension-archive: python3 printed '$py'" >&2; exit 1; }
size=$(stat -c %s "$dir/libhonker_ext.so")
echo "extension archive: $(basename "$archive"), $(stat -c %s "$archive") bytes packed, libhonker_ext.so $size bytes; loads in the sqlite3 shell and python3 ($version)"
