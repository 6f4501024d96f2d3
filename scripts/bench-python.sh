#!/usr/bin/env bash
# The Python benchmark (bench/python/run.py) with everything it compares:
# this repository's binding and the stdlib sqlite3 module (the test venv),
# Honker 0.2.4 from PyPI (its own venv: same module name), and the core
# benchmark's raw rusqlite figures, then bench/python/streams.py, locks.py
# and scheduler.py. Arguments go
# to run.py (--quick, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
honker_python_venv
cargo build --release --locked --manifest-path extension/Cargo.toml --target-dir target -q
export HONKER_EXT="$PWD/target/release/libhonker_ext"
PATH="$HONKER_VENV/bin:$PATH" "$HONKER_VENV/bin/pip" install -q --disable-pip-version-check \
    --no-build-isolation --force-reinstall --no-deps ./bindings-python
cargo build --release --locked -q -p honker-bench
honker024_venv
old="$(dirname "$(dirname "$HONKER024_PYTHON")")"
"$HONKER_VENV/bin/python" bench/python/run.py --honker024 "$old/bin/python" \
    --rust target/release/honker-bench "$@"
# Streams and pub/sub, then locks and rate limits, against Honker 0.2.4's
# (--smoke passes through).
smoke=()
for a in "$@"; do [ "$a" = "--smoke" ] && smoke=(--smoke); done
"$HONKER_VENV/bin/python" bench/python/streams.py --honker024 "$old/bin/python" "${smoke[@]}"
"$HONKER_VENV/bin/python" bench/python/locks.py --honker024 "$old/bin/python" "${smoke[@]}"
exec "$HONKER_VENV/bin/python" bench/python/scheduler.py --honker024 "$old/bin/python" "${smoke[@]}"
