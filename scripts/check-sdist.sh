#!/usr/bin/env bash
# check-sdist.sh: the source distribution a release publishes next to the
# wheel is complete and builds where there is no matching wheel (issue 17
# §1). It is made with maturin, checked for what a build needs (core, the
# Python sources, stubs and py.typed, and the SQL extension's own workspace
# with SQLite's headers), then built by pip in a clean venv of Debian's
# Python, without HONKER_EXT (so the extension is built from the sdist's own
# sources), and the result runs the README's example and loads its extension
# into the stdlib's sqlite3. Two builds that cannot work must say exactly
# what is missing: a Rust older than 1.89, and no libclang.
#
# The sdist is unpacked into target/sdist-src (files rewritten only when
# their content changed) and built in the checkout's target directory, so
# that a warm run rebuilds only what changed, and the README's demo and the
# benchmarks, built from the checkout next, reuse what this build compiled
# (cargo names a path crate's build by its place in the workspace, the same
# in the sdist: the demo's source install then takes seconds, not 80).
# Needs HONKER_VENV (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
version=$(bash scripts/version.sh)

"$HONKER_VENV/bin/maturin" sdist -m bindings-python/Cargo.toml -o "$scratch/dist" >&2
sdist="$scratch/dist/honker-$version.tar.gz"
tar -tzf "$sdist" | sed "s|^honker-$version/||" | sort > "$scratch/contents"
for need in pyproject.toml Cargo.toml Cargo.lock core/src/lib.rs engine/src/lib.rs engine/csrc/ofd_fcntl.c engine/build.rs bindings-python/build.rs cli/src/lib.rs \
    python/honker/__init__.py python/honker/_native.pyi python/honker/py.typed \
    extension/Cargo.toml extension/Cargo.lock extension/src/lib.rs extension/sqlite3/sqlite3.h extension/sqlite3/sqlite3ext.h; do
    if ! grep -qx "$need" "$scratch/contents"; then
        echo "check-sdist: $need is missing from $(basename "$sdist")" >&2
        exit 1
    fi
done
if grep -E '\.(so|dylib|node|whl)$' "$scratch/contents"; then
    echo "check-sdist: $(basename "$sdist") holds a built file" >&2
    exit 1
fi
echo "sdist: $(basename "$sdist"), $(stat -c %s "$sdist") bytes, $(wc -l < "$scratch/contents") files"

# Unpacked where cargo's fingerprints survive between runs: a file is
# rewritten (new mtime) only when its content changed; files gone are removed.
mkdir -p "$scratch/unpacked"
tar -xzf "$sdist" -C "$scratch/unpacked"
"$HONKER_VENV/bin/python" - "$scratch/unpacked/honker-$version" target/sdist-src <<'PY'
import filecmp, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for base, dirs, files in os.walk(dst, topdown=False):
    for name in files:
        path = os.path.join(base, name)
        if not os.path.exists(os.path.join(src, os.path.relpath(path, dst))):
            os.remove(path)
    for name in dirs:
        path = os.path.join(base, name)
        if not os.path.exists(os.path.join(src, os.path.relpath(path, dst))):
            shutil.rmtree(path)
for base, _, files in os.walk(src):
    out = os.path.join(dst, os.path.relpath(base, src))
    os.makedirs(out, exist_ok=True)
    for name in files:
        a, b = os.path.join(base, name), os.path.join(out, name)
        if not (os.path.exists(b) and filecmp.cmp(a, b, shallow=False)):
            shutil.copyfile(a, b)
PY

venv="$scratch/venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$(grep -o 'maturin==[0-9.]*' scripts/deps.sh)"
build() {
    # No HONKER_EXT: the extension must come from the sdist's own sources.
    env -u HONKER_EXT CARGO_TARGET_DIR="$root/target" PATH="$venv/bin:$PATH" \
        "$venv/bin/pip" install --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps \
        "$@" target/sdist-src
}

start=$SECONDS
build -q
echo "sdist: built and installed from source in $((SECONDS - start)) s"
PATH="$venv/bin:/usr/bin:/bin" "$venv/bin/python" scripts/readme-python.py
# A source install gives the `honker` command too.
"$venv/bin/honker" --version | grep -qx "honker $version"
echo "sdist: $("$venv/bin/honker" --version) at $venv/bin/honker"
"$venv/bin/python" - "$version" <<'PY'
import sqlite3, sys
import honker
conn = sqlite3.connect(":memory:")
honker.load_extension(conn)
got = conn.execute("SELECT honker_version()").fetchone()[0]
assert got == sys.argv[1] == honker.__version__, (got, honker.__version__)
print("sdist: honker.extension_path() loads into sqlite3:", honker.extension_path())
PY

# A Rust older than the workspace's rust-version: cargo's refusal names it.
cat > "$scratch/old-rustc" <<SH
#!/bin/sh
# rustc as an old toolchain would describe itself; everything else is the real one.
for a in "\$@"; do
    if [ "\$a" = -vV ]; then
        "$(command -v rustc)" -vV | sed -E 's/^(rustc|release:) [0-9]+\.[0-9]+\.[0-9]+/\1 1.80.0/'
        exit
    fi
done
exec "$(command -v rustc)" "\$@"
SH
chmod +x "$scratch/old-rustc"
if RUSTC="$scratch/old-rustc" build >"$scratch/old.log" 2>&1; then
    echo "check-sdist: the sdist built with a rustc that says it is 1.80" >&2
    exit 1
fi
if ! grep -q "1\.89" "$scratch/old.log"; then
    cat "$scratch/old.log" >&2
    echo "check-sdist: building with Rust 1.80 failed without naming Rust 1.89" >&2
    exit 1
fi
grep -m1 "1\.89" "$scratch/old.log"

# No libclang (bindgen, for the extension): build.rs says so, and how to get it.
if LIBCLANG_PATH="$scratch/no-libclang" build >"$scratch/clang.log" 2>&1; then
    echo "check-sdist: the sdist built without libclang" >&2
    exit 1
fi
if ! grep -q "needs libclang" "$scratch/clang.log" || ! grep -q "apt install libclang-dev" "$scratch/clang.log"; then
    cat "$scratch/clang.log" >&2
    echo "check-sdist: building without libclang failed without saying so" >&2
    exit 1
fi
grep -o "honker: building the SQL extension (libhonker_ext) needs libclang[^(]*" "$scratch/clang.log" | head -n 1
