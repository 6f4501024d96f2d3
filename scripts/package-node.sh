#!/usr/bin/env bash
# package-node.sh [PLATFORM...]: the npm tarballs a release publishes
# (issue 17 §2; the platforms named, linux-x64-gnu by default; scripts/
# release.sh names every folder under bindings-node/npm/), the
# napi-rs layout: `npm pack` of bindings-node (the `honker` package: the
# JavaScript, the declarations and the loader, no binary) and of each folder
# under bindings-node/npm/ (one per platform: honker-linux-x64-gnu holds the
# prebuilt honker.node and libhonker_ext.so). The binaries come from the
# build directory, target/node/<platform>/, where `node
# bindings-node/scripts/build.js --zig` puts the glibc 2.17 builds; each
# platform folder is copied to a staging directory with them, so nothing is
# written into the source tree. Tarballs land in target/dist/npm/. Each
# tarball must unpack to at most 12 MiB (what a release publishes, checked
# by every tier: .ci/run packs linux-x64-gnu's from the build it tests).
# stdout: the result (the tarballs' paths, one per line: honker first)
set -euo pipefail
exec 3>&1 1>&2
cd "$(dirname "$0")/.."

dist="$PWD/target/dist/npm"
rm -rf "$dist"
mkdir -p "$dist/stage"
tarballs=()
pack() {
    # npm pack prints the tarball's file name last.
    local name
    name=$(cd "$1" && npm pack --silent --pack-destination "$dist" | tail -n 1)
    tarballs+=("$dist/$name")
}
pack bindings-node
for platform in "${@:-linux-x64-gnu}"; do
    folder="bindings-node/npm/$platform"
    [ -d "$folder" ] || { echo "package-node: no $folder" >&2; exit 1; }
    built="target/node/$platform"
    stage="$dist/stage/$platform"
    cp -r "$folder" "$stage"
    for file in $(node -p "require('./$folder/package.json').files.join(' ')"); do
        [ -f "$built/$file" ] || { echo "package-node: $built/$file is missing: build it first (node bindings-node/scripts/build.js --target $platform)" >&2; exit 1; }
        cp "$built/$file" "$stage/$file"
    done
    pack "$stage"
done
rm -rf "$dist/stage"
limit=$((12 * 1024 * 1024))
for tgz in "${tarballs[@]}"; do
    bytes=$(tar -xzOf "$tgz" | wc -c)
    if [ "$bytes" -gt "$limit" ]; then
        echo "package-node: $(basename "$tgz") unpacks to $bytes bytes, over 12 MiB ($limit)" >&2
        exit 1
    fi
    echo "package-node: $(basename "$tgz"): $bytes bytes unpacked"
done
printf '%s\n' "${tarballs[@]}" >&3
